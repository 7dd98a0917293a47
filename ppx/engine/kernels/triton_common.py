"""Helpers shared by the triton kernel modules."""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

# Read once at import, which is also when triton decides whether this package's jit
# functions are compiled or interpreted, so the two can never disagree.
INTERPRET: bool = os.environ.get("TRITON_INTERPRET", "0") == "1"
# The same flag as a compile-time constant the jit helpers below can read (triton only lets
# kernels see module globals that are constexpr).
_INTERP: tl.constexpr = tl.constexpr(INTERPRET)


def device_fn(fn):
    """``@triton.jit`` for a helper the kernels call, except under the interpreter.

    The interpreter re-patches the whole ``triton.language`` namespace (``inspect.getmembers``
    over every module) on each call of a jit device function -- about 3 ms, several times the
    helper's own work, paid per program per call. Interpreted kernels are plain Python, so
    there the helper is called as a plain function instead (the kernel's launch has already
    patched ``tl``); compiled kernels get the jit function exactly as before.
    """
    return fn if INTERPRET else triton.jit(fn)


def block_size(n: int, minimum: int = 1) -> int:
    """Smallest power of two >= max(n, minimum); triton tiles must be powers of two."""
    return max(minimum, triton.next_power_of_2(max(int(n), 1)))


def rows_per_program(n: int) -> int:
    """Token rows one program of a per-token kernel (RMSNorm, RoPE, SiLU) handles.

    One on the GPU, where a program per row fills the machine. Under the interpreter every
    program costs milliseconds of Python whatever its tile size (numpy does the tile at
    once), so a launch covers up to 128 rows in one program: a decode batch or a short
    prefill is one program, and longer inputs still cross tiles (the masked tail).
    """
    return min(block_size(n), 128) if INTERPRET else 1


def dot_precision(dtype: torch.dtype) -> str | None:
    """``input_precision`` for ``tl.dot``: fp32 inputs must not silently drop to tf32 on
    tensor cores, or fp32 results would miss the 1e-5 tolerance against the reference.
    Half-precision inputs keep triton's default (the option only concerns fp32)."""
    return "ieee" if dtype == torch.float32 else None


def attention_tile(dtype: torch.dtype) -> int:
    """KV (and query) tile length for the attention kernels.

    Small under the interpreter, so tiny test shapes still cross several tiles and exercise
    the tiling logic. On the GPU, 64 for half precision; fp32 tiles are twice the bytes, and
    pipelined K/V buffers of 64 x 128 fp32 would crowd shared memory, so fp32 uses 32.
    """
    if INTERPRET:
        return 16
    return 32 if dtype == torch.float32 else 64


def decode_splits() -> int:
    """KV splits per request of split-KV decode attention when the caller names none.

    Four on the GPU, where splitting a long KV is what keeps a small decode batch from
    leaving most of the machine idle. Two under the interpreter, where every program is
    milliseconds of Python and occupancy means nothing: the cheapest count that still
    sends every decode through the log-sum-exp merge of several partial results.
    """
    return 2 if INTERPRET else 4


@device_fn
def mma(a, b, PRECISION: tl.constexpr):
    """``a @ b`` with an fp32 accumulator.

    The CPU interpreter stores bf16 as raw uint16 and its dot multiplies those bit patterns,
    so under the interpreter both operands are widened to fp32 first (exact, and the same
    fp32-accumulated result tensor cores give). Compiled kernels keep the half-precision
    operands and use tensor cores.
    """
    if _INTERP:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    else:
        return tl.dot(a, b, input_precision=PRECISION)


@device_fn
def cast_to(x, dtype: tl.constexpr):
    """``x.to(dtype)`` with round-to-nearest-even on every backend.

    The interpreter narrows fp32 to bf16 by truncation, while GPUs round to nearest even;
    under the interpreter we round the fp32 bits ourselves (the usual add-0x7FFF-plus-odd-bit
    trick) so the narrowing is exact and CPU tests see the rounding the GPU will do.
    """
    if _INTERP:
        if dtype == tl.bfloat16:
            bits = x.to(tl.float32).to(tl.uint32, bitcast=True)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
            x = bits.to(tl.float32, bitcast=True)
    return x.to(dtype)
