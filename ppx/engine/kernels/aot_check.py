"""Compile every triton kernel for a Hopper (sm_90) target on a machine without a GPU.

The CPU tests run the kernels under triton's interpreter, which accepts some programs the
real compiler rejects (and vice versa). Compiling ahead of time down to a cubin with the
ptxas bundled in the triton wheel catches those errors, and reports each kernel's shared
memory, without needing a device.

    python -m ppx.engine.kernels.aot_check           # the full dtype x GQA matrix
    python -m ppx.engine.kernels.aot_check --quick   # the subset the CPU test suite runs

Exit status: 0 all compiled, 1 a kernel failed to compile or overflows shared memory,
3 this triton has no ahead-of-time API we know (the caller should skip, not fail).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# Real compilation, not the interpreter: must hold before the kernel modules are imported,
# which is why this runs as its own process (``python -m``), never inside the test session.
os.environ["TRITON_INTERPRET"] = "0"

import triton  # noqa: E402

try:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
except ImportError:  # pragma: no cover - depends on the installed triton
    GPUTarget = ASTSource = None  # type: ignore[assignment,misc]

from ppx.engine.kernels import (  # noqa: E402
    triton_attention,
    triton_common,
    triton_decode,
    triton_elementwise,
    triton_indices,
)

H100_SMEM_BYTES = 227 * 1024  # per-block opt-in limit on sm_90 (H100/H200)
API_MISSING = 3


def _specs(dt: str, group: int, tile: int, precision: str | None) -> list[tuple]:
    """(kernel, type overrides, constexprs, num_warps) mirroring the launch sites."""
    idx = "*i64"
    return [
        (triton_attention._extend_kernel,
         {"qo_indptr_ptr": idx, "prefix_indptr_ptr": idx, "prefix_indices_ptr": idx},
         {"GROUP": group, "BLOCK_M": tile, "BLOCK_N": tile, "BLOCK_D": 128,
          "PRECISION": precision}, 4),
        (triton_decode._decode_partial_kernel,
         {"kv_indptr_ptr": idx, "kv_indices_ptr": idx, "mid_o_ptr": "*fp32",
          "mid_lse_ptr": "*fp32"},
         {"GROUP": group, "NUM_SPLITS": 4, "BLOCK_G": max(16, group), "BLOCK_N": tile,
          "BLOCK_D": 128, "PRECISION": precision}, 4),
        (triton_decode._decode_merge_kernel, {"mid_o_ptr": "*fp32", "mid_lse_ptr": "*fp32"},
         {"NUM_SPLITS": 4, "BLOCK_S": 4, "BLOCK_D": 128}, 4),
        (triton_elementwise._rms_norm_kernel, {}, {"BLOCK_H": 4096}, 16),
        (triton_elementwise._rope_kernel, {"cos_ptr": "*fp32", "sin_ptr": "*fp32"},
         {"BLOCK_HEADS": 32, "BLOCK_HALF": 64}, 4),
        (triton_elementwise._silu_and_mul_kernel, {}, {"BLOCK": 1024}, 4),
        (triton_indices._indptr_kernel, {"kv_lens_ptr": idx, "indptr_ptr": idx},
         {"BLOCK": 1024}, 4),
        (triton_indices._gather_kernel,
         {"req_to_token_ptr": "*i32", "req_rows_ptr": idx, "kv_lens_ptr": idx,
          "indptr_ptr": idx, "indices_ptr": idx},
         {"BLOCK": 256}, 4),
    ]  # fmt: skip


def _compile(kernel: triton.JITFunction, dt: str, overrides: dict, constexprs: dict, warps: int):
    signature = {}
    for name in kernel.arg_names:
        if name in constexprs:
            signature[name] = "constexpr"
        elif name in overrides:
            signature[name] = overrides[name]
        elif name.endswith("_ptr"):
            signature[name] = f"*{dt}"
        elif name in ("scale", "eps"):
            signature[name] = "fp32"
        else:
            signature[name] = "i32"  # strides and sizes, as small ints are passed at launch
    source = ASTSource(kernel, signature, constexprs=constexprs)
    target = GPUTarget("cuda", 90, 32)
    return triton.compile(source, target=target, options={"num_warps": warps, "num_stages": 3})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="bf16 everything, fp32 attention")
    args = parser.parse_args(argv)
    if ASTSource is None or GPUTarget is None:
        print("aot_check: this triton has no ASTSource/GPUTarget; skipping", file=sys.stderr)
        return API_MISSING
    if triton_common.INTERPRET:
        print("aot_check: kernels were imported in interpreter mode; run it as its own process")
        return 1

    # (dtype, tile, dot precision) as chosen by attention_tile / dot_precision on a GPU.
    configs = [("bf16", 64, None), ("fp16", 64, None), ("fp32", 32, "ieee")]
    groups = [1, 2, 4]
    if args.quick:
        configs, groups = [configs[0], configs[2]], [4]
    seen: set[tuple] = set()
    failures = 0
    for dt, tile, precision in configs:
        for group in groups:
            for kernel, overrides, constexprs, warps in _specs(dt, group, tile, precision):
                key = (kernel.__name__, dt, tuple(sorted(constexprs.items())))
                if key in seen:
                    continue
                seen.add(key)
                if args.quick and dt == "fp32" and "PRECISION" not in constexprs:
                    continue  # the quick run checks fp32 only where it differs: tl.dot
                start = time.perf_counter()
                label = f"{kernel.__name__} {dt} group={group}"
                try:
                    compiled = _compile(kernel, dt, overrides, constexprs, warps)
                except Exception as err:  # report every kernel, then fail once
                    failures += 1
                    print(f"FAIL {label}: {type(err).__name__}: {err}")
                    continue
                smem = int(compiled.metadata.shared)
                ok = smem <= H100_SMEM_BYTES
                failures += not ok
                took = time.perf_counter() - start
                status = "ok  " if ok else "FAIL"
                print(f"{status} {label:<40} smem={smem:>7} B  {took:4.1f}s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
