"""`python -m ppx.postmortem RUN_DIR [-o FILE]`: the post-mortem page of a run dir."""

from __future__ import annotations

import argparse
import sys
import time

from ppx.postmortem.page import write_page


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ppx.postmortem", description=__doc__)
    ap.add_argument("run_dir")
    ap.add_argument("-o", "--out", default=None, help="default: RUN_DIR/postmortem.html")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        path = write_page(args.run_dir, args.out)
    except FileNotFoundError as e:
        print(f"ppx.postmortem: {e}", file=sys.stderr)
        return 2
    print(f"ppx.postmortem: {path} ({time.perf_counter() - t0:.2f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
