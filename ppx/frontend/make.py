"""The workload a config names: a generator, a prompt file or a trace (the one place that
chooses; it sits above workloads.py, prompts.py and traces.py, which import none of it)."""

from __future__ import annotations

from ppx.frontend.kinds import WORKLOADS
from ppx.frontend.prompts import prompt_lines
from ppx.frontend.text import load_tokenizer, tokenizer_file
from ppx.frontend.traces import make_trace_workload
from ppx.frontend.workloads import LinesWorkload, Workload


def make_workload(cfg) -> Workload:
    """The workload a (validated) config names, with the model's tokenizer when it has one."""
    file = tokenizer_file(cfg.model)
    tok = load_tokenizer(file, int(cfg.model.vocab)) if file else None
    w = cfg.workload
    if WORKLOADS.of(cfg).trace:
        return make_trace_workload(cfg)
    lines = prompt_lines(cfg, tok)
    if lines is not None:
        return LinesWorkload(w, lines, tok, int(cfg.seed))
    wl = Workload(w, int(cfg.model.vocab), int(cfg.seed))
    wl.tokenizer = tok
    return wl
