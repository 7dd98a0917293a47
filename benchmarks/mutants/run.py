"""Run the mutant zoo (zoo.py): each mutant applied to a temporary copy of ppx (the committed
tree, HEAD), then

- the suite arm: the mutant's own tests (`Mutant.tests`, `pytest -x`): caught by which test,
- the scenario arm: `python -m ppx.explore <DESIGN> explore.scenarios=... explore.budget_s=S`
  (the explorer draws its own scenarios for S seconds): the verdict, scenarios and schedules
  to the first find, the shrunk scenario's requests, and whether the saved failure replays
  exactly as a full run (its printed command, run in the mutant's copy).

First the unmutated copy runs the scenario arm (a baseline that must serve). Results go to
`OUT/results.jsonl` (one line per mutant and arm, appended as they finish) and a table.

  python benchmarks/mutants/run.py [--only NAME,NAME] [--arms scenarios,suite]
                                   [--budget 60] [--seed S] [--out DIR] [--no-baseline]
  python benchmarks/mutants/run.py --report OUT/results.jsonl [MORE.jsonl]   # the table
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from zoo import EQUIVALENT, ZOO, Mutant

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COPIED = ("ppx", "conf", "tests", "experiments", "pyproject.toml")
# the design the scenario arm explores: rank 0 decides, followers retract, the guard learns
# (the default rank_local design has no decision, void, guard or follower to break, and
# fails under pool skew by design: `stopped`, proxy width check)
DESIGN = ["pp=3", "engine/admission=decision", "engine/ordering=decision_first"]
DESIGN += ["engine/guard=rid"]
MAX_STEPS = 50_000


def copy_tree(dst: str) -> None:
    """The committed tree (HEAD), not the working files: a zoo run takes most of an hour,
    and every mutant must mutate the same code whatever is edited meanwhile."""
    archive = subprocess.run(
        ["git", "-C", ROOT, "archive", "HEAD", *COPIED], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", dst], input=archive, check=True)


def apply(m: Mutant, root: str) -> None:
    path = os.path.join(root, m.path)
    with open(path) as f:
        text = f.read()
    if text.count(m.old) != 1:
        sys.exit(f"mutant {m.name}: {m.path} holds its text {text.count(m.old)} times, not once")
    with open(path, "w") as f:
        f.write(text.replace(m.old, m.new))


def env_for(root: str) -> dict:
    return dict(os.environ, PYTHONPATH=root, WANDB_MODE="disabled", PYTHONHASHSEED="0")


def scenario_arm(root: str, budget: float, shrink_s: float, seed: int = 0) -> dict:
    run_dir = os.path.join(root, "explore")
    cmd = [sys.executable, "-m", "ppx.explore", *DESIGN, "logger=none", f"explore.seed={seed}"]
    cmd += ["explore.scenarios=100000", f"explore.budget_s={budget}"]
    cmd += [f"explore.shrinker.scenario_s={shrink_s}", f"hydra.run.dir={run_dir}"]
    # a run that neither ends nor trips a livelock bound would go on to 2,000,000 steps
    # (minutes of wall time each): 50,000 steps is ~25x the longest served scenario
    cmd += [f"sim.max_steps={MAX_STEPS}"]
    t0 = time.time()
    try:
        p = subprocess.run(
            cmd, cwd=root, env=env_for(root), capture_output=True, text=True,
            timeout=budget + shrink_s + 600,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"caught": False, "verdict": "error", "wall_s": round(time.time() - t0, 1),
                "error": f"the explorer ran past {budget + shrink_s + 600:.0f} s"}  # fmt: skip
    wall = round(time.time() - t0, 1)
    path = os.path.join(run_dir, "summary.json")
    if not os.path.exists(path):
        return {"caught": False, "verdict": "error", "wall_s": wall, "error": p.stderr[-400:]}
    s = json.load(open(path))
    out = {
        "caught": s["verdict"] != "served",
        "verdict": s["verdict"],
        "scenarios": s["scenarios"],
        "schedules": s["schedules"],
        "wall_s": wall,
        "missing": s["mechanisms_missing"],
    }
    f = s.get("found")
    if f:
        out |= {
            "key": f["key"],
            "to_find": f["to_find"],
            "requests": f["requests"],
            "shrunk": f["scenario"],  # the least failing scenario, as the shrink left it
            "shrink_runs": f["scenario_shrink"],
            "replayed": f["replayed"],
            "replay_run": replay_verdict(root, f["replay"]),
        }
    return out


def replay_verdict(root: str, command: str) -> str:
    """The saved failure replayed as a full run (the command the explorer printed)."""
    args = shlex.split(command)[1:]  # "python" -> this interpreter
    run_dir = os.path.join(root, "replay")
    p = subprocess.run(
        [sys.executable, *args, f"hydra.run.dir={run_dir}"], cwd=root, env=env_for(root),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    path = os.path.join(run_dir, "summary.json")
    if not os.path.exists(path):
        return f"error: {p.stderr.strip().splitlines()[-1:]}"
    return json.load(open(path))["verdict"]


def suite_arm(root: str, tests: tuple[str, ...], timeout: float, k: str) -> dict:
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-x", "-p", "no:cacheprovider"]
    cmd += ["-k", k] if k else []
    t0 = time.time()
    try:
        p = subprocess.run(
            [*cmd, *tests], cwd=root, env=env_for(root), capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"caught": False, "test": None, "wall_s": round(time.time() - t0, 1),
                "note": f"suite subset ran past {timeout:.0f} s"}  # fmt: skip
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", p.stdout, re.M)
    return {
        "caught": p.returncode != 0,
        "test": failed[0] if failed else (None if p.returncode == 0 else p.stdout[-300:]),
        "wall_s": round(time.time() - t0, 1),
    }


def run_one(m: Mutant | None, arms: list[str], args) -> list[dict]:
    root = tempfile.mkdtemp(prefix="ppx-mutant-")
    name = m.name if m else "baseline"
    rows = []
    try:
        copy_tree(root)
        if m is not None:
            apply(m, root)
        for arm in arms:
            if arm == "scenarios":
                r = scenario_arm(root, args.budget, args.shrink_s, args.seed)
            else:
                r = suite_arm(root, m.tests, args.suite_timeout, args.suite_k)
            row = {"mutant": name, "area": m.area if m else "-", "arm": arm, **r}
            rows.append(row)
            print(json.dumps(row), flush=True)
            with open(os.path.join(args.out, "results.jsonl"), "a") as f:
                f.write(json.dumps(row) + "\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def table(rows: list[dict]) -> str:
    by: dict[str, dict] = {}
    for r in rows:
        by.setdefault(r["mutant"], {"area": r["area"]})[r["arm"]] = r
    lines = [
        "| mutant | area | suite | scenarios: verdict | scenarios, schedules, s to find "
        "| requests found -> shrunk | replays (exact / as a run) | failure |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, d in by.items():
        su, sc = d.get("suite"), d.get("scenarios")
        suite = "-" if su is None else (su["test"] or "caught") if su["caught"] else "survived"
        if sc is None:
            cells = ["-", "-", "-", "-", "-"]
        elif sc["caught"]:
            t = sc.get("to_find") or {}
            req = sc.get("requests") or ["?", "?"]
            cells = [
                sc["verdict"],
                f"{t.get('scenarios')}, {t.get('schedules')}, {t.get('s')}",
                f"{req[0]} -> {req[1]}",
                f"{sc.get('replayed')} / {sc.get('replay_run')}",
                "`" + sc.get("key", "").split(": ", 1)[-1][:70].replace("|", "/") + "`",
            ]
        else:
            word = "served" if name == "baseline" else "survived"
            cells = [f"{word} ({sc['scenarios']} scenarios)", "-", "-", "-", "-"]
        lines.append(f"| {name} | {d['area']} | {suite} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated mutant names")
    ap.add_argument("--arms", default="scenarios,suite")
    ap.add_argument("--budget", type=float, default=60.0, help="scenario search seconds")
    ap.add_argument("--shrink-s", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0, help="explore.seed of the scenario arm")
    ap.add_argument("--suite-timeout", type=float, default=600.0)
    # the real-gloo arms boot processes per test: minutes per file on a loaded machine
    ap.add_argument("--suite-k", default="not gloo", help="pytest -k of the suite arm")
    ap.add_argument("--out", default=os.path.join(ROOT, "outputs", "mutants"))
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--report", nargs="+", help="results.jsonl file(s): print the table only")
    args = ap.parse_args()
    if args.report:
        rows = [json.loads(line) for path in args.report for line in open(path)]
        print(table(rows))
        return
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - {m.name for m in (*ZOO, *EQUIVALENT)})
    if unknown:
        sys.exit(f"--only: no mutant named {', '.join(unknown)}")
    arms = [a for a in args.arms.split(",") if a]
    if set(arms) - {"scenarios", "suite"}:
        sys.exit(f"--arms={args.arms}: scenarios | suite")
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    print(f"load average {os.getloadavg()}; {os.cpu_count()} cores", flush=True)
    # the baseline: the unmutated copy's exploration must serve (its suite is CI's business)
    rows = [] if args.no_baseline or "scenarios" not in arms else run_one(None, ["scenarios"], args)
    for m in (*ZOO, *EQUIVALENT):  # the equivalent ones only by name (zoo.py says why)
        if (not names and m in ZOO) or m.name in names:
            rows += run_one(m, arms, args)
    print(table(rows))
    mutants = [r for r in rows if r["mutant"] != "baseline"]
    for arm in arms:
        got = [r for r in mutants if r["arm"] == arm]
        print(f"{arm}: caught {sum(r['caught'] for r in got)}/{len(got)}")
    print(f"wall {time.time() - t0:.0f} s; load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
