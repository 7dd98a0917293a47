"""The workloads `workload.name` names (conf/workload/*.yaml) and where each one's requests
come from: a seeded generator (workloads.py), a prompt file read by its own reader, or a trace
(traces.py). make.py, prompts.py and checks.py ask the kind; none compares the name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ppx.frontend.sharegpt import read_sharegpt
from ppx.frontend.text import Codec, Line, read_jsonl
from ppx.switch import Switch

# (workload config, tokenizer or None, model.max_context) -> the file's servable prompts
Reader = Callable[[object, "Codec | None", int], list[Line]]


def _jsonl(w, tok: Codec | None, max_context: int) -> list[Line]:
    return read_jsonl(str(w.path), tok, int(w.max_new), max_context)


def _sharegpt(w, tok: Codec | None, max_context: int) -> list[Line]:
    return read_sharegpt(str(w.path), tok, int(w.bench.output_len), max_context)[0]


@dataclass(frozen=True)
class WorkloadKind:
    prompt_file: str | None = None  # what workload.path must hold; None: no prompt file
    read: Reader | None = None  # the prompt file's reader
    trace: bool = False  # a public trace's rows at their own arrival times (traces.py)


GENERATOR = WorkloadKind()  # seeded prompts from the knobs (workloads.py)

WORKLOADS: Switch[WorkloadKind] = Switch(
    "workload.name",
    {
        "shared_prefix": GENERATOR,
        "random": GENERATOR,
        "long_prompt": GENERATOR,
        "generated_shared_prefix": GENERATOR,
        "jsonl": WorkloadKind("one JSON object per line", _jsonl),
        "sharegpt": WorkloadKind("a ShareGPT JSON array of conversations", _sharegpt),
        "trace": WorkloadKind(trace=True),
    },
)
