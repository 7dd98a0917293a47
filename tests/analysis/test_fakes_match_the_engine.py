"""The synthetic runs (fake_runs.py) have the shape of what the engine really writes.

Every analysis test that uses a fake leans on this: the session's real runs (the smoke
study's served and wedged cells, generated once for the notebooks) are compared with fakes of
the same cells, file by file: summary keys, parquet columns and dtypes, post-mortem files and
their JSON shapes. A field the engine adds, renames or drops turns this red, so the fakes
cannot drift from the engine again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from fake_runs import write_run
from run_source import GeneratedRuns

CELLS = {
    "served": ["engine/admission=rank_local", "engine/ordering=upstream"],
    "wedged": ["engine/admission=decision", "engine/ordering=flush_before_decision"],
}
BASE = ["pp=2", "workload=shared_prefix", "workload.num_requests=6"]


def _schema(path: Path) -> dict[str, str]:
    return {f.name: str(f.type) for f in pq.read_schema(path)}


def _keys(obj: Any) -> Any:
    """The shape of a JSON value: dict keys (recursively), the shape of a list's first item."""
    if isinstance(obj, dict):
        return {k: _keys(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_keys(obj[0])] if obj else []
    return type(obj).__name__ if obj is not None else None


def shape(run_dir: Path) -> dict[str, Any]:
    s = json.loads((run_dir / "summary.json").read_text())
    out: dict[str, Any] = {
        "summary": sorted(s),
        "choices": sorted(s["choices"]),
        "per_rank": sorted(s["per_rank"]),
        "blocked_on": _keys(s["blocked_on"]),
    }
    for name in ("metrics", "events", "requests"):
        out[name] = _schema(run_dir / f"{name}.parquet")
    pm = run_dir / "postmortem"
    if pm.exists():
        out["postmortem"] = sorted(
            str(p.relative_to(pm)) for p in pm.rglob("*") if p.parent.name != "stacks"
        )
        # rank<r>.pyspy.txt too where py-spy is installed and permitted
        out["stacks"] = sorted(p.name for p in (pm / "stacks").glob("rank?.txt"))
        for name in ("waitfor", "blocked_on"):
            out[name + ".json"] = _keys(json.loads((pm / f"{name}.json").read_text()))
        last = json.loads((pm / "last_events.json").read_text())
        entries = [e for events in last.values() for e in events]  # a quiet rank logs none
        out["last_events.json"] = (sorted(last), _keys(entries[:1]))
        out["ledger.json"] = sorted(json.loads((pm / "ledger.json").read_text()))
        out["ops"] = _schema(pm / "ops.parquet")
    return out


def _real(runs: GeneratedRuns, verdict: str) -> Path:
    for p in sorted(runs.runs_root.glob("*/summary.json")):
        if json.loads(p.read_text())["verdict"] == verdict:
            return p.parent
    pytest.fail(f"the smoke study left no {verdict} run in {runs.runs_root}")


@pytest.mark.parametrize("verdict", sorted(CELLS))
def test_a_fake_run_has_the_shape_of_the_real_one(verdict, real_session_runs, tmp_path):
    real = shape(_real(real_session_runs, verdict))
    fake = shape(write_run(tmp_path / verdict, [*BASE, *CELLS[verdict]]))
    for part in real:
        assert fake.get(part) == real[part], part
    assert set(fake) == set(real)


def test_a_fake_flip_run_has_the_shape_of_the_real_one(real_session_runs, tmp_path):
    real_dir = real_session_runs.flip_root / "0"
    real = shape(real_dir)
    fake_dir = write_run(tmp_path / "flip", ["pp=2", "flip=every_40_passes"])
    assert shape(fake_dir) == real
    kinds = {
        d: set(pq.read_table(d / "events.parquet")["kind"].to_pylist())
        for d in (real_dir, fake_dir)
    }
    assert {"flip_start", "flip_end"} <= kinds[real_dir] & kinds[fake_dir]
