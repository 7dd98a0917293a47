"""Shared by the benchmark scripts: boot the real engine in-process from overrides."""

from __future__ import annotations

import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def compose(*overrides: str):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from ppx.validation import validate

    with initialize_config_dir(config_dir=os.path.join(ROOT, "conf"), version_base=None):
        return validate(hydra_compose(config_name="config", overrides=["logger=none", *overrides]))


def run(*overrides: str) -> tuple[dict, str]:
    """One real run (ranks over gloo, oracle, store) in a temp run dir."""
    from ppx.run import execute

    run_dir = tempfile.mkdtemp(prefix="ppx-bench-")
    cfg = compose(*overrides)
    import contextlib
    import io

    with contextlib.redirect_stderr(io.StringIO()):
        summary = execute(cfg, run_dir, None)
    return summary, run_dir


def decode_tok_s(run_dir: str) -> float:
    """Output tokens after each request's first, over the span from the first first-token
    to the last token: the decode rate, without boot and prefill."""
    import pandas as pd

    req = pd.read_parquet(os.path.join(run_dir, "requests.parquet"))
    first = (req.submit_t_s + req.ttft_ms / 1e3).min()
    return float((req.output_len - 1).sum() / (req.finish_t_s.max() - first))


def decode_load(pp: int, batch: int, prompt: int, new: int, requests: int = 0) -> list[str]:
    """The decode-bound load of the overhead benchmarks: `batch` equal prompts at once
    (`requests` in all, default one batch)."""
    return [
        f"pp={pp}",
        "workload=random",
        f"workload.num_requests={requests or batch}",
        f"workload.concurrency={batch}",
        f"workload.prompt_min={prompt}",
        f"workload.prompt_max={prompt}",
        f"workload.max_new={new}",
    ]
