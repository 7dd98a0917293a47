"""Torch's own Flight Recorder in the gloo / NCCL rank processes, dumped beside ppx's.

A rank turns the recorder on before its process group exists (`TORCH_FR_BUFFER_SIZE`, read
at `init_process_group`; the installed torch records gloo's collectives, NCCL's collectives
and p2p) and parks a thread reading a FIFO, ranks/torch_fr_<rank>.request. A wedged rank's
main thread sits in a blocking gloo/NCCL call that never returns to Python, so no Python
signal handler would run (and a signal can land on one of torch's own threads); the parked
thread does run, and writes `_dump_fr_trace()` to ranks/torch_fr_<rank> when the post-mortem
writes a byte into its FIFO. The post-mortem then copies the dumps to
postmortem/flight_recorder/ (prefix `torch_fr_`, beside ppx's `ppx_fr_`:
`torchfrtrace DIR -p torch_fr_` reads them).
"""

from __future__ import annotations

import os
import shutil
import threading
import time

PREFIX = "torch_fr_"
BUFFER = "2000"  # entries per rank, torch's recommended size


def enable(ranks_dir: str, rank: int) -> None:
    """In a rank process, before its process group is created."""
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", BUFFER)
    path = os.path.join(ranks_dir, f"{PREFIX}{rank}")
    if os.path.exists(path + ".request"):
        os.remove(path + ".request")
    os.mkfifo(path + ".request")
    threading.Thread(target=_dump_on_request, args=(path,), daemon=True, name="ppx-torch-fr").start()  # fmt: skip


def _dump_on_request(path: str) -> None:
    while True:
        with open(path + ".request", "rb") as fifo:  # blocks (no CPU) until a writer opens it
            if not fifo.read(1):
                continue
        try:
            import torch._C._distributed_c10d as c10d

            # private and absent from torch's stubs (so mypy would refuse the import); a torch
            # without it raises here and lands in the except below
            data = getattr(c10d, "_dump_fr_trace")()  # noqa: B009
        except Exception as e:  # a torch without the recorder: say so where the dump would be
            with open(path + ".error", "w") as f:
                f.write(f"{type(e).__name__}: {e}\n")
            continue
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)  # whole or absent: the post-mortem never copies half


def disable(ranks_dir: str, rank: int) -> None:
    """Remove the rank's FIFO (a copy of the run dir should not meet a pipe)."""
    fifo = os.path.join(ranks_dir, f"{PREFIX}{rank}.request")
    if os.path.exists(fifo):
        os.remove(fifo)


def _request(path: str) -> bool:
    try:  # non-blocking: a rank that is gone (no reader) is skipped, never waited on
        fd = os.open(path + ".request", os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        os.write(fd, b"d")
    finally:
        os.close(fd)
    return True


def collect(ranks: list[int], ranks_dir: str, fr_dir: str, wait_s: float = 5.0) -> list[int]:
    """Ask each (live) rank for its dump, wait for them, copy them to `fr_dir`; returns the
    ranks whose dump arrived."""
    paths = {r: os.path.join(ranks_dir, f"{PREFIX}{r}") for r in ranks}
    asked: set[int] = set()
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        # a rank whose thread has not opened its FIFO yet has no reader: ask again shortly
        asked |= {r for r, p in paths.items() if r not in asked and _request(p)}
        if len(asked) == len(paths) and all(os.path.exists(paths[r]) for r in asked):
            break
        time.sleep(0.05)
    got = []
    os.makedirs(fr_dir, exist_ok=True)
    for r in sorted(asked):
        if os.path.exists(paths[r]):
            shutil.copy(paths[r], os.path.join(fr_dir, f"{PREFIX}{r}"))
            got.append(r)
    for r in ranks:  # the ranks are torn down next and never clean up after themselves
        disable(ranks_dir, r)
    return got
