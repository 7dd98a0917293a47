"""How the engine's cost grows with pipeline depth and batch: one run, side by side.

  python benchmarks/bench_scaling.py [--pp 1 2 3 4] [--conc 1 2 4 8 16] [--new 32]

For every (pp, concurrency): a closed-loop random load (prompt 16, `--new` tokens, two
requests per concurrent stream), all served and oracle-checked. Prints out_tok_s and the
mean pass time (the serving span, first submit to last token, over rank 0's passes) in two
tables, pp down, concurrency across. Ranks beyond the machine's cores share them: read the
pp columns against the core count printed on top.
"""

from __future__ import annotations

import argparse
import os

import _common
import _method


def point(pp: int, conc: int, new: int) -> tuple[float, float]:
    import pandas as pd

    s, run_dir = _common.run(*_common.decode_load(pp, conc, 16, new, requests=2 * conc))
    assert s["verdict"] == "served" and s["oracle_mismatches"] == 0, s["reason"]
    req = pd.read_parquet(os.path.join(run_dir, "requests.parquet"))
    span = float(req.finish_t_s.max() - req.submit_t_s.min())
    return float(s["out_tok_s"]), 1e3 * span / max(int(s["passes"]), 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pp", type=int, nargs="+", default=[1, 2, 3, 4])
    ap.add_argument("--conc", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--new", type=int, default=32)
    args = ap.parse_args()
    _method.print_machine()
    got = {}
    for pp in args.pp:
        for c in args.conc:
            got[pp, c] = point(pp, c, args.new)
            print(
                f"  pp={pp} concurrency={c}: {got[pp, c][0]:.1f} tok/s, {got[pp, c][1]:.2f} ms/pass"
            )
    head = "pp \\ conc " + "".join(f"{c:>9}" for c in args.conc)
    for title, i, fmt in (("out_tok_s", 0, "{:>9.1f}"), ("pass time, ms", 1, "{:>9.2f}")):
        print(f"\n{title} (random load, prompt 16, {args.new} new tokens)")
        print(head)
        for pp in args.pp:
            print(f"{pp:>10} " + "".join(fmt.format(got[pp, c][i]) for c in args.conc))
    print(_method.machine())


if __name__ == "__main__":
    main()
