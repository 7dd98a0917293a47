"""engine/kernels=triton on a CPU says, before the run starts, that the interpreter is slow
and which preset to use."""

from __future__ import annotations

from ppx_helpers import compose

from ppx.run import triton_cpu_notice


def test_notice_only_for_triton_on_cpu():
    assert triton_cpu_notice(compose("engine/kernels=torch")) is None
    line = triton_cpu_notice(compose("engine/kernels=triton"))
    assert "interpreter" in line and "+exp=triton_cpu" in line and "slower" in line


def test_named_preset_is_triton_on_the_interp_model():
    cfg = compose("+exp=triton_cpu")
    assert cfg.engine.kernels.name == "triton" and cfg.model.name == "interp"
    assert triton_cpu_notice(cfg) is not None  # the preset itself still gets the notice


def test_notice_printed_before_the_run(ppx_run):
    proc, summary, _ = ppx_run(
        "+exp=triton_cpu", "pp=1", "workload.num_requests=1", "workload.max_new=1",
        "watch.max_run_s=3", "watch.stall_s=3", timeout=180,
    )  # fmt: skip
    lines = [
        ln for ln in proc.stderr.splitlines() + proc.stdout.splitlines() if ln.startswith("ppx:")
    ]
    assert lines and "triton interpreter" in lines[0], proc.stderr[-2000:]
    assert summary is not None  # the run still ran (a notice, not an error)
