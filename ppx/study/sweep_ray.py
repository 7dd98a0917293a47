"""A study's cells as tasks on a Ray cluster (`python -m ppx.study NAME --ray ADDRESS`).

Beside the Hydra launchers (joblib here, submitit on SLURM): each cell is the same
`python -m ppx.run -m ...` job the launchers run (sweep.build_commands, one per cell), started
by a Ray task on whichever node has a free CPU, writing into the study's runs directory (a
local head, or a cluster whose nodes share that path), so `evaluate` reads the same runs as
after a local sweep. The cluster (`local`, `auto`, `HOST:PORT`, `ray://HOST:PORT`) is
ppx/launch/ray_cluster.py's.
"""

from __future__ import annotations

import time
from pathlib import Path

from ppx.launch.ray_cluster import cluster
from ppx.study.sweep import Progress, start_logged, stop


def _run_cell(cmd: list[str], log_path: str) -> int:
    proc = start_logged(cmd, Path(log_path))
    try:
        return proc.wait()
    except BaseException:
        # ray.cancel (the sweep's timeout) interrupts the task: its job goes with it
        stop(proc)
        raise


def run_sweep_ray(
    commands: list[list[str]],
    progress: Progress,
    log_dir: Path,
    address: str,
    cpus: int,
    timeout_s: float | None = None,
    poll_s: float = 1.0,
) -> list[int]:
    """Each command a one-CPU task; returns each command's exit code (-9 for ones stopped by
    the timeout). `cpus`: the size of a `local` head."""
    import ray

    log_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s if timeout_s else None
    codes: dict[int, int] = {}
    with cluster(address, cpus):
        task = ray.remote(num_cpus=1, max_retries=0)(_run_cell)
        refs = [task.remote(c, str(log_dir / f"sweep_{i}.log")) for i, c in enumerate(commands)]
        index = {ref: i for i, ref in enumerate(refs)}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=len(pending), timeout=poll_s)
            codes.update({index[ref]: ray.get(ref) for ref in done})
            progress.scan()
            if pending and deadline and time.monotonic() > deadline:
                progress.echo(f"timeout after {timeout_s:.0f}s: stopping the sweep")
                for ref in pending:
                    ray.cancel(ref)
                    codes[index[ref]] = -9
                pending = []
    progress.scan(final=True)
    return [codes[i] for i in range(len(commands))]
