"""Prompt-file workloads (jsonl, ShareGPT), read by their kind's reader (kinds.py), and
their check before a spawn.

Above text.py (the JSONL reader, the tokenizer) and sharegpt.py (which reads through
text.py's line parser), so neither imports the other back.
"""

from __future__ import annotations

from ppx.frontend.kinds import WORKLOADS
from ppx.frontend.text import Codec, Line, TextError, load_tokenizer, tokenizer_file
from ppx.frontend.workloads import with_repeats


def prompt_lines(cfg, tok: Codec | None) -> list[Line] | None:
    """The prompts of a prompt-file workload (jsonl, sharegpt); None for any other."""
    w = cfg.workload
    kind = WORKLOADS.of(cfg)
    if kind.read is None:
        return None
    if not w.path:
        raise TextError(f"workload={w.name} needs workload.path=FILE ({kind.prompt_file})")
    return kind.read(w, tok, int(cfg.model.max_context))


def check_text(cfg) -> None:
    """Validation before any spawn: the tokenizer matches the model, and a prompt-file
    workload has at least one servable prompt (`workload.num_requests` is capped at them,
    each `workload.bench.repeat_count` times)."""
    file = tokenizer_file(cfg.model)
    tok = load_tokenizer(file, int(cfg.model.vocab)) if file else None
    lines = prompt_lines(cfg, tok)
    if lines is not None:
        served = with_repeats(cfg.workload, len(lines))
        cfg.workload.num_requests = min(int(cfg.workload.num_requests), served)
