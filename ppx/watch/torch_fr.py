"""Torch's own Flight Recorder in the gloo / NCCL rank processes, dumped beside ppx's.

A rank turns the recorder on before its process group exists (`TORCH_FR_BUFFER_SIZE`, read
at `init_process_group`; the installed torch records gloo's collectives, NCCL's collectives
and p2p) and parks a thread on `sigwait(SIGUSR2)`. A wedged rank's main thread sits in a
blocking gloo/NCCL call that never returns to Python, so a Python signal handler would never
run; the parked thread does, and writes `_dump_fr_trace()` to ranks/torch_fr_<rank>. The
post-mortem signals every live rank and copies the dumps to postmortem/flight_recorder/
(prefix `torch_fr_`, beside ppx's `ppx_fr_`: `torchfrtrace DIR -p torch_fr_` reads them).
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time

DUMP_SIGNAL = signal.SIGUSR2
PREFIX = "torch_fr_"
BUFFER = "2000"  # entries per rank, torch's recommended size


def enable(ranks_dir: str, rank: int) -> None:
    """In a rank process, before its process group is created."""
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", BUFFER)
    # blocked in every thread (threads started later inherit the mask): only sigwait takes it
    signal.pthread_sigmask(signal.SIG_BLOCK, {DUMP_SIGNAL})
    path = os.path.join(ranks_dir, f"{PREFIX}{rank}")
    threading.Thread(target=_dump_on_signal, args=(path,), daemon=True, name="ppx-torch-fr").start()


def _dump_on_signal(path: str) -> None:
    while True:
        signal.sigwait({DUMP_SIGNAL})
        try:
            from torch._C._distributed_c10d import _dump_fr_trace

            data = _dump_fr_trace()
        except Exception as e:  # a torch without the recorder: say so where the dump would be
            with open(path + ".error", "w") as f:
                f.write(f"{type(e).__name__}: {e}\n")
            continue
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)  # whole or absent: the post-mortem never copies half


def collect(pids: dict[int, int], ranks_dir: str, fr_dir: str, wait_s: float = 2.0) -> list[int]:
    """Signal each live rank (rank -> pid), wait for its dump, copy it to `fr_dir`; returns
    the ranks whose dump arrived."""
    for pid in pids.values():
        try:
            os.kill(pid, DUMP_SIGNAL)
        except ProcessLookupError:
            pass
    want = {r: os.path.join(ranks_dir, f"{PREFIX}{r}") for r in pids}
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and not all(os.path.exists(p) for p in want.values()):
        time.sleep(0.05)
    got = []
    os.makedirs(fr_dir, exist_ok=True)
    for r, p in sorted(want.items()):
        if os.path.exists(p):
            shutil.copy(p, os.path.join(fr_dir, f"{PREFIX}{r}"))
            got.append(r)
    return got
