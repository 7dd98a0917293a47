"""Kernel registry: the only door through which the engine reaches its math kernels.

Two backends share one interface:

* ``"torch"``  -- torch: the readable reference (``torch_ref``) for the elementwise kernels and
  vectorized attention / index building (``torch_batched``, tested against the reference);
  never imports triton.
* ``"triton"`` -- fused triton kernels. On a machine without CUDA they run under triton's
  CPU interpreter, which lets the CPU test suite check them against the reference.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

KERNEL_BACKENDS = ("torch", "triton")


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


def _triton_kernels() -> Kernels:
    # triton decides between compiling and interpreting when each @triton.jit function is
    # *defined*, so the variable must be in place before our triton modules are imported.
    # setdefault leaves an explicit choice by the user (e.g. TRITON_INTERPRET=0) alone.
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
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


_CACHE: dict[str, Kernels] = {}


def get_kernels(name: str) -> Kernels:
    """Return the kernel bundle for backend ``name`` ("torch" or "triton")."""
    if name not in KERNEL_BACKENDS:
        raise ValueError(f"unknown kernel backend {name!r}; expected one of {KERNEL_BACKENDS}")
    if name not in _CACHE:
        _CACHE[name] = _torch_kernels() if name == "torch" else _triton_kernels()
    return _CACHE[name]
