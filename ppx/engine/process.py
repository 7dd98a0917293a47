"""The rank as an operating-system process (gloo / nccl): what a spawned rank does around
`serve` -- its environment, its logs and stack file, dying with its supervisor, its report on
disk, and leaving without waiting on peers that may be blocked on it."""

from __future__ import annotations

import ctypes
import faulthandler
import json
import multiprocessing as mp
import os
import signal
import sys
import threading

import torch

from ppx.engine.board import Board
from ppx.engine.rank import RankArgs, serve
from ppx.engine.transport import Transport
from ppx.engine.transport.registry import spec_of
from ppx.watch import torch_fr


def die_with_parent() -> None:
    """No orphans even if the supervisor is SIGKILLed: the kernel kills us with it."""
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    supervisor = mp.parent_process()
    if supervisor is not None and supervisor.pid != os.getppid():
        # a forkserver child: the kernel's parent is the forkserver, which lives as long as
        # any of its children does (each holds its liveness pipe), so the signal above would
        # never come. The supervisor's own pipe reads EOF the moment it dies.
        def watch() -> None:
            supervisor.join()
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=watch, name="ppx-supervisor-watch", daemon=True).start()


def write_report(a: RankArgs, report: dict) -> None:
    if a.run_dir:
        with open(os.path.join(a.run_dir, "ranks", f"rank{a.rank}.json"), "w") as f:
            json.dump(report, f, indent=1)


def rank_main(a: RankArgs) -> None:
    """The rank process (gloo / nccl)."""
    # only the explorer's in-process runs keep no files; a rank process always has its dir
    assert a.run_dir is not None, f"rank{a.rank} process started without a run dir"
    ranks = os.path.join(a.run_dir, "ranks")
    if a.env is not None:
        os.environ.clear()
        os.environ.update(a.env)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the supervisor's to handle
    # torch's own Flight Recorder, dumped on the post-mortem's request beside ppx's
    # (ppx/watch/torch_fr.py)
    torch_fr.enable(ranks, a.rank)
    die_with_parent()
    # everything the rank prints (warnings, gloo's own messages) goes to its log in the run dir
    log = os.open(
        os.path.join(ranks, f"rank{a.rank}.log"),
        os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    )
    os.dup2(log, 1)
    os.dup2(log, 2)
    torch.set_num_threads(1)
    # faulthandler writes here on SIGUSR1; the post-mortem copies it into postmortem/stacks
    stack_file = open(os.path.join(ranks, f"rank{a.rank}.stack.txt"), "w")
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    board = Board(a.board_path, a.world)
    # benchmarks/profile_pass.py: the engine's methods timed part by part (ppx/engine/passprof.py)
    prof = None
    if os.environ.get("PPX_PROFILE") == "1":
        from ppx.engine import passprof

        prof = passprof.install()

    def open_t() -> Transport:
        store = a.store.connect() if a.store else None
        return spec_of(a.cfg).open(a.cfg, a.rank, a.world, a.port, store)

    report, loop = serve(a, open_t, board)
    write_report(a, report)
    if prof is not None:
        prof.dump(os.path.join(ranks, f"rank{a.rank}.profile.json"))
    if loop is not None and report["state"] == "done":
        loop.t.close()
    stack_file.flush()
    sys.stdout.flush()
    torch_fr.disable(ranks, a.rank)
    # after a stop or an error the peers may be blocked on us: leave without waiting on gloo
    os._exit(0 if report["state"] == "done" else 3)
