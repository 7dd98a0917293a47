"""Prompt-file workloads (jsonl, ShareGPT) chosen by name, and their check before a spawn.

Above text.py (the JSONL reader, the tokenizer) and sharegpt.py (which reads through
text.py's line parser), so neither imports the other back.
"""

from __future__ import annotations

from ppx.frontend.sharegpt import read_sharegpt
from ppx.frontend.text import (
    Codec,
    Line,
    TextError,
    load_tokenizer,
    read_jsonl,
    tokenizer_file,
)

PROMPT_FILES = {
    "jsonl": "one JSON object per line",
    "sharegpt": "a ShareGPT JSON array of conversations",
}


def prompt_lines(cfg, tok: Codec | None) -> list[Line] | None:
    """The prompts of a prompt-file workload (jsonl, sharegpt); None for any other."""
    w = cfg.workload
    if w.name not in PROMPT_FILES:
        return None
    if not w.path:
        raise TextError(f"workload={w.name} needs workload.path=FILE ({PROMPT_FILES[w.name]})")
    if w.name == "sharegpt":
        n = int(w.output_len)
        return read_sharegpt(str(w.path), tok, n, int(cfg.model.max_context))[0]
    return read_jsonl(str(w.path), tok, int(w.max_new), int(cfg.model.max_context))


def check_text(cfg) -> None:
    """Validation before any spawn: the tokenizer matches the model, and a prompt-file
    workload has at least one servable prompt (`workload.num_requests` is capped at them)."""
    file = tokenizer_file(cfg.model)
    tok = load_tokenizer(file, int(cfg.model.vocab)) if file else None
    lines = prompt_lines(cfg, tok)
    if lines is not None:
        cfg.workload.num_requests = min(int(cfg.workload.num_requests), len(lines))
