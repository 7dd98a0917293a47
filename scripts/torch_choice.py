"""Which torch scripts/setup.sh should leave on this machine (stdlib only: runs before torch).

Prints one line for the shell: `keep`, `cpu` (install the CPU build) or `cuda <index-url>`
(install the CUDA build for the driver); on a contradiction (a GPU machine with a CPU-only
torch, or a CUDA build newer than the driver) prints why and how to fix it on stderr and
exits 3 -- a set-up that "succeeds" there leaves every `device=cuda` run failing later.

    python scripts/torch_choice.py                       # probe this machine
    python scripts/torch_choice.py --gpu --driver-cuda 12.8 --torch 2.13.0+cpu   # decide for given facts
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass

TORCH = "2.13.0"
INDEX = "https://download.pytorch.org/whl"
# CUDA builds published for torch 2.13.0 (its install matrix); the newest one the driver runs
# is chosen. Check https://pytorch.org/get-started/locally/ when bumping TORCH.
CUDA_BUILDS = ("12.6", "12.8", "13.0")


@dataclass(frozen=True)
class Choice:
    action: str  # keep | cpu | cuda | fail
    arg: str = ""
    message: str = ""

    @property
    def line(self) -> str:
        return f"{self.action} {self.arg}".strip()


def _ver(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def cuda_index(driver_cuda: str | None) -> str | None:
    """The wheel index of the newest CUDA build the driver supports (None: too old)."""
    if driver_cuda is None:
        return None
    ok = [b for b in CUDA_BUILDS if _ver(b) <= _ver(driver_cuda)]
    return f"{INDEX}/cu{ok[-1].replace('.', '')}" if ok else None


def choose(
    gpu: bool, driver_cuda: str | None, torch_version: str | None, torch_cuda: str | None
) -> Choice:
    index = cuda_index(driver_cuda)
    fix = (
        f"pip install --force-reinstall torch=={TORCH} --index-url {index}"
        if index
        else f"update the NVIDIA driver (CUDA {driver_cuda or '?'} is older than every "
        f"CUDA build of torch {TORCH}: {', '.join(CUDA_BUILDS)})"
    )
    if torch_version is None:
        if not gpu:
            return Choice("cpu", message=f"no GPU: installing the CPU build of torch=={TORCH}")
        if index is None:
            return Choice("fail", message=f"setup: GPU found but no usable torch build: {fix}")
        return Choice(
            "cuda", index, f"GPU (driver CUDA {driver_cuda}): torch=={TORCH} from {index}"
        )
    if not gpu:
        return Choice("keep", message=f"keeping the installed torch {torch_version}")
    if torch_cuda is None:
        return Choice(
            "fail",
            message=f"setup: FAILED: this machine has a GPU (driver CUDA {driver_cuda or '?'}) but "
            f"the installed torch {torch_version} is a CPU-only build, so device=cuda cannot run. "
            f"Install the CUDA build: {fix}",
        )
    if driver_cuda is not None and _ver(torch_cuda) > _ver(driver_cuda):
        return Choice(
            "fail",
            message=f"setup: FAILED: the installed torch {torch_version} is built for CUDA "
            f"{torch_cuda}, newer than the driver's CUDA {driver_cuda}. {fix}",
        )
    return Choice(
        "keep", message=f"keeping the installed torch {torch_version} (CUDA {torch_cuda})"
    )


def probe() -> tuple[bool, str | None, str | None, str | None]:
    try:
        out = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=60)
        gpu = out.returncode == 0 and "NVIDIA-SMI" in out.stdout
        m = re.search(r"CUDA Version:\s*([\d.]+)", out.stdout) if gpu else None
        driver = m.group(1) if m else None
    except (OSError, subprocess.TimeoutExpired):
        gpu, driver = False, None
    try:
        import torch
    except ImportError:
        return gpu, driver, None, None
    return gpu, driver, torch.__version__, torch.version.cuda


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", action=argparse.BooleanOptionalAction, default=None)
    ap.add_argument("--driver-cuda")
    ap.add_argument("--torch", help="installed torch version ('none': not installed)")
    ap.add_argument("--torch-cuda", help="torch.version.cuda ('none': a CPU build)")
    a = ap.parse_args(argv)
    gpu, driver, tv, tc = (
        probe() if a.gpu is None else (a.gpu, a.driver_cuda, a.torch, a.torch_cuda)
    )
    c = choose(
        gpu, driver, None if tv in (None, "none") else tv, None if tc in (None, "none") else tc
    )
    print(c.message, file=sys.stderr)
    if c.action == "fail":
        return 3
    print(c.line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
