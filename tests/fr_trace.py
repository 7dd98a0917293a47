"""torch's own Flight Recorder analyzer (`torchfrtrace`) run on a dump directory, and the
wait-for edges its report names (helpers for the tests; imported by name)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys


def torchfrtrace(fr_dir: str, prefix: str = "ppx_fr_") -> subprocess.CompletedProcess:
    """The analyzer's console entry point (the module's main where the script is not on PATH)."""
    exe = shutil.which("torchfrtrace")
    cmd = (
        [exe]
        if exe
        else [sys.executable, "-c", "from torch.distributed.flight_recorder.fr_trace import main; main()"]
    )  # fmt: skip
    return subprocess.run([*cmd, fr_dir, "-p", prefix], capture_output=True, text=True, timeout=60)


def analyzer_edges(report: str) -> set[tuple[int, int]]:
    """(waiting rank, missing rank) for every "Not all ranks joining" the report names."""
    edges = set()
    for block in report.split("Not all ranks joining collective")[1:]:
        missing = re.search(r"missing ranks: \{([\d, ]+)\}", block)
        expected = re.search(r"expected ranks: \{([\d, ]+)\}", block)
        if missing and expected:
            miss = {int(x) for x in missing.group(1).split(",")}
            for waiter in {int(x) for x in expected.group(1).split(",")} - miss:
                edges |= {(waiter, m) for m in miss}
    return edges


def cycle_edges(cycle: str) -> set[tuple[int, int]]:
    """`rank0 -[flush chain]-> rank1 -[...]-> rank0` -> {(0, 1), (1, 0)}."""
    ranks = [int(r) for r in re.findall(r"rank(\d+)", cycle)]
    return set(zip(ranks, ranks[1:]))
