#!/usr/bin/env python
"""Benchmark the triton kernels against the torch reference on one GPU.

For each kernel: median time of both backends (``triton.testing.do_bench``), the speedup,
the triton kernel's achieved bandwidth over the bytes it must move, and that bandwidth as a
fraction of the card's device-to-device copy bandwidth (a large ``clone``). Every triton
output is first checked against the reference, so a fast but wrong kernel fails the run.

    python benchmarks/bench_kernels.py              # needs CUDA
    python benchmarks/bench_kernels.py --allow-cpu  # tiny shapes, interpreter, smoke only
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout

from ppx.engine.kernels import get_kernels  # noqa: E402
from ppx.engine.kernels.testing import (  # noqa: E402
    assert_kernel_close,
    make_decode_case,
    make_extend_case,
    make_req_to_token,
)

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@dataclass
class Case:
    name: str
    run_torch: Callable[[], object]
    run_triton: Callable[[], object]
    nbytes: int  # bytes the kernel must read + write at minimum
    cosine: bool = False


def _first(out: object) -> list[torch.Tensor]:
    return list(out) if isinstance(out, tuple) else [out]  # type: ignore[list-item]


def build_cases(device: str, dtype: torch.dtype, tiny: bool) -> list[Case]:
    ref, tri = get_kernels("torch"), get_kernels("triton", device)
    es = torch.empty((), dtype=dtype).element_size()
    gen = torch.Generator().manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=gen).to(device=device, dtype=dtype)

    t, h, inter = (16, 64, 96) if tiny else (8192, 4096, 14336)
    nh, nkv, d = (4, 2, 32) if tiny else (32, 8, 128)
    cases: list[Case] = []

    x, w = randn(t, h), randn(h)
    cases.append(
        Case(
            f"rms_norm T={t} H={h}",
            lambda: ref.rms_norm(x, w, 1e-6),
            lambda: tri.rms_norm(x, w, 1e-6),
            (2 * t * h + h) * es,
        )
    )

    q, k = randn(t, nh, d), randn(t, nkv, d)
    pos = torch.arange(t, device=device)
    cases.append(
        Case(
            f"rope T={t} nh={nh} nkv={nkv} d={d}",
            lambda: ref.rope(q, k, pos, 10000.0),
            lambda: tri.rope(q, k, pos, 10000.0),
            2 * t * (nh + nkv) * d * es + t * 8,
        )
    )

    gu = randn(t, 2 * inter)
    cases.append(
        Case(
            f"silu_and_mul T={t} I={inter}",
            lambda: ref.silu_and_mul(gu),
            lambda: tri.silu_and_mul(gu),
            3 * t * inter * es,
        )
    )

    batch, max_len = (4, 64) if tiny else (256, 4096)
    table = make_req_to_token(2 * batch, max_len, pool_size=1 << 20, device=device)
    rows = torch.randperm(2 * batch, generator=gen)[:batch].to(device)
    lens = torch.randint(max_len // 4, max_len + 1, (batch,), generator=gen).to(device)
    total = int(lens.sum())
    cases.append(
        Case(
            f"build_kv_indices B={batch} kv={total}",
            lambda: ref.build_kv_indices(table, rows, lens),
            lambda: tri.build_kv_indices(table, rows, lens),
            total * (4 + 8) + batch * 8 * 3,
        )
    )

    n_req, ext, pre = (2, 20, 12) if tiny else (4, 1024, 1024)
    ec = make_extend_case([ext] * n_req, [pre] * n_req, nh, nkv, d, dtype, device)
    cases.append(
        Case(
            f"extend_attention B={n_req} new={ext} prefix={pre}",
            lambda: ref.extend_attention(*ec.args()),
            lambda: tri.extend_attention(*ec.args()),
            n_req * ((2 * ext * nh + 2 * (ext + pre) * nkv) * d * es + pre * 8),
            cosine=True,
        )
    )

    n_dec, kv_len = (3, 40) if tiny else (64, 4096)
    dc = make_decode_case([kv_len] * n_dec, nh, nkv, d, dtype, device)
    cases.append(
        Case(
            f"decode_attention B={n_dec} kv={kv_len}",
            lambda: ref.decode_attention(*dc.args()),
            lambda: tri.decode_attention(*dc.args()),
            n_dec * (2 * nh * d * es + kv_len * (2 * nkv * d * es + 8)),
            cosine=True,
        )
    )
    return cases


def _wall_ms(fn: Callable[[], object], reps: int = 3) -> float:
    """CPU stand-in for do_bench (which needs a GPU): best of a few wall-clock runs."""
    fn()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument(
        "--allow-cpu", action="store_true", help="without CUDA, run tiny shapes as a smoke check"
    )
    args = parser.parse_args(argv)

    cuda = torch.cuda.is_available()
    if not cuda and not args.allow_cpu:
        print(
            "bench_kernels: CUDA is not available; this benchmark measures GPU kernels "
            "(pass --allow-cpu for a tiny smoke run under the triton interpreter)",
            file=sys.stderr,
        )
        return 1
    device, dtype = ("cuda" if cuda else "cpu"), DTYPES[args.dtype]

    if cuda:
        from triton.testing import do_bench

        def bench(fn: Callable[[], object]) -> float:
            return float(do_bench(fn, return_mode="median"))

        blob = torch.empty(1 << 30, dtype=torch.uint8, device=device)
        copy_bw = 2 * blob.numel() / (bench(blob.clone) * 1e-3)  # read + write
        del blob
        where = torch.cuda.get_device_name()
    else:
        bench = _wall_ms
        blob = torch.empty(1 << 24, dtype=torch.uint8)
        copy_bw = 2 * blob.numel() / (bench(blob.clone) * 1e-3)
        where = "CPU (triton interpreter; smoke check only, numbers are meaningless)"

    print(f"device: {where}  dtype: {args.dtype}  copy bandwidth: {copy_bw / 1e9:.0f} GB/s")
    header = (
        f"{'kernel':<44} {'torch_ms':>9} {'triton_ms':>9} {'speedup':>8} {'GB/s':>8} {'/copy':>6}"
    )
    print(header)
    print("-" * len(header))
    failures = []
    for case in build_cases(device, dtype, tiny=not cuda):
        # Correctness first: a wrong kernel's timing is not worth reporting.
        try:
            for out, ref in zip(_first(case.run_triton()), _first(case.run_torch()), strict=True):
                assert_kernel_close(out, ref, what=case.name, cosine=case.cosine)
        except AssertionError as err:
            failures.append(str(err))
            print(f"{case.name:<44} MISMATCH: {err}")
            continue
        torch_ms, triton_ms = bench(case.run_torch), bench(case.run_triton)
        gbps = case.nbytes / (triton_ms * 1e-3) / 1e9
        print(
            f"{case.name:<44} {torch_ms:>9.3f} {triton_ms:>9.3f} {torch_ms / triton_ms:>7.2f}x "
            f"{gbps:>8.1f} {gbps * 1e9 / copy_bw:>6.2f}"
        )
    if failures:
        print(
            f"bench_kernels: {len(failures)} kernel(s) disagree with the reference", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
