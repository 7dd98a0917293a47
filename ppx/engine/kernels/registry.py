"""Kernel registry: the only door through which the engine reaches its math kernels.

Two backends share one interface:

* ``"torch"``  -- torch: the readable reference (``torch_ref``) for the elementwise kernels and
  vectorized attention / index building (``torch_batched``, tested against the reference);
  never imports triton.
* ``"triton"`` -- fused triton kernels, compiled for the GPU when the tensors live on one and
  run under triton's CPU interpreter when they live on the CPU (which lets the CPU test suite
  check them against the reference) -- on any machine, with or without CUDA.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ppx.switch import Switch


@dataclass(frozen=True)
class Kernels:
    """A bundle of kernel callables; see ``docs/kernels.md`` for shapes and semantics."""

    rms_norm: Callable[[Tensor, Tensor, float], Tensor]
    rope: Callable[[Tensor, Tensor, Tensor, float], tuple[Tensor, Tensor]]
    silu_and_mul: Callable[[Tensor], Tensor]
    build_kv_indices: Callable[[Tensor, Tensor, Tensor], tuple[Tensor, Tensor]]
    extend_attention: Callable[..., Tensor]
    decode_attention: Callable[..., Tensor]


def reference_kernels() -> Kernels:
    """The plain reference every other implementation is tested against."""
    from ppx.engine.kernels import torch_ref

    return Kernels(
        rms_norm=torch_ref.rms_norm,
        rope=torch_ref.rope,
        silu_and_mul=torch_ref.silu_and_mul,
        build_kv_indices=torch_ref.build_kv_indices,
        extend_attention=torch_ref.extend_attention,
        decode_attention=torch_ref.decode_attention,
    )


def _torch_kernels() -> Kernels:
    from ppx.engine.kernels import torch_batched

    return dataclasses.replace(
        reference_kernels(),
        build_kv_indices=torch_batched.build_kv_indices,
        extend_attention=torch_batched.extend_attention,
        decode_attention=torch_batched.decode_attention,
    )


def triton_mode(device: str | torch.device) -> str:
    """ "interpret" or "compiled": decided by where the tensors live, never by whether the
    machine has CUDA (a CPU tensor handed to a compiled kernel fails on a GPU machine too).
    On a GPU an explicit TRITON_INTERPRET=1 is kept: the interpreter is a debugging tool."""
    asked = os.environ.get("TRITON_INTERPRET")
    if torch.device(device).type == "cpu" or (asked == "1" and asked != _SET_BY_US[0]):
        return "interpret"
    return "compiled"


# the value _triton_kernels wrote into TRITON_INTERPRET (not the user's choice)
_SET_BY_US: list[str | None] = [None]


def _triton_kernels(mode: str) -> Kernels:
    # triton decides between compiling and interpreting when each @triton.jit function is
    # *defined*, so the variable must be in place before our triton modules are imported, and
    # one process holds one of the two: asking for the other one later is an error, not a
    # silent wrong choice.
    loaded = sys.modules.get("ppx.engine.kernels.triton_common")
    if loaded is not None and ("interpret" if loaded.INTERPRET else "compiled") != mode:
        have = "interpret" if loaded.INTERPRET else "compiled"
        raise RuntimeError(
            f"triton kernels were loaded {have} in this process; {mode} kernels (for tensors on "
            f"another device) need a fresh process"
        )
    _check_triton_library(mode)
    if mode == "interpret" and (why := interpreter_problem()) is not None:
        raise RuntimeError(why)
    os.environ["TRITON_INTERPRET"] = _SET_BY_US[0] = "1" if mode == "interpret" else "0"
    from ppx.engine.kernels import (
        triton_attention,
        triton_decode,
        triton_elementwise,
        triton_indices,
    )

    return Kernels(
        rms_norm=triton_elementwise.rms_norm,
        rope=triton_elementwise.rope,
        silu_and_mul=triton_elementwise.silu_and_mul,
        build_kv_indices=triton_indices.build_kv_indices,
        extend_attention=triton_attention.extend_attention,
        decode_attention=triton_decode.decode_attention,
    )


def _check_triton_library(mode: str) -> None:
    """triton's own library (`tl.cumsum`, ...) is decorated when `triton` is first imported:
    imported before TRITON_INTERPRET=1 (by another library, or an earlier test in the same
    process), our interpreted kernels would fail inside the interpreter with "Cannot call
    @triton.jit'd outside of the scope of a kernel". Say so instead."""
    triton = sys.modules.get("triton")
    if triton is None:
        return
    have = type(triton.language.standard.cumsum).__name__ == "InterpretedFunction"
    if have != (mode == "interpret"):
        raise RuntimeError(
            f"triton was imported in this process {'with' if have else 'without'} "
            f"TRITON_INTERPRET=1 before ppx asked for {mode} kernels; set TRITON_INTERPRET "
            "before the first triton import, or use a fresh process"
        )


# triton's interpreter before 3.7 keeps a program id as a one-element array, so a loop bound
# loaded through it (every kernel here reads its request's length from memory) fails in
# `range()` with "only 0-dimensional arrays can be converted to Python scalars" (seen on a GPU
# image's triton 3.6.0; 3.7.1, 3.8.0 and 3.9.0 run the kernel tests). Compiled kernels are not
# affected, and torch pins its own triton, so this is refused by name, not installed over.
INTERPRETER_MIN = (3, 7)


def interpreter_problem() -> str | None:
    """Why triton's interpreter cannot run ppx's kernels on this machine, or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        have = version("triton")
    except PackageNotFoundError:
        return "triton is not installed (the dev extra: pip install -e '.[dev]')"
    if tuple(int(x) for x in re.findall(r"\d+", have)[:2]) < INTERPRETER_MIN:
        need = ".".join(map(str, INTERPRETER_MIN))
        return (
            f"triton {have}'s interpreter cannot run ppx's kernels (a loop bound read from "
            f"memory through a program id); triton >= {need} interprets them, and compiled "
            "kernels on a GPU are unaffected"
        )
    return None


@dataclass(frozen=True)
class KernelBackend:
    """One `engine.kernels.name`: how its bundle is built, and whether a CPU device runs it
    under the triton interpreter (a per-device mode, slow: run.py says so before the run)."""

    build: Callable[[str], Kernels]  # the mode (`any`, `interpret`, `compile`) -> the bundle
    interpreted_on_cpu: bool = False

    def mode(self, device: str | torch.device) -> str:
        return triton_mode(device) if self.interpreted_on_cpu else "any"


KERNELS: Switch[KernelBackend] = Switch(
    "engine.kernels.name",
    {
        "torch": KernelBackend(lambda mode: _torch_kernels()),
        "triton": KernelBackend(lambda mode: _triton_kernels(mode), interpreted_on_cpu=True),
    },
)
KERNEL_BACKENDS = KERNELS.names

_CACHE: dict[tuple[str, str], Kernels] = {}


def get_kernels(name: str, device: str | torch.device = "cpu") -> Kernels:
    """Return the kernel bundle for backend ``name`` (KERNELS) for tensors on ``device``
    (triton: interpreted on the CPU, compiled on a GPU); ValueError names an unknown one."""
    backend = KERNELS.get(name)
    key = (name, backend.mode(device))
    if key not in _CACHE:
        _CACHE[key] = backend.build(key[1])
    return _CACHE[key]
