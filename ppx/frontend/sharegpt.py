"""ShareGPT-format prompt files (`vllm bench serve --dataset-name sharegpt`,
`sglang.bench_serving --dataset-name sharegpt`): one JSON array of
{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}, ...]}.

As in both benchmarks, a conversation's first turn is the prompt and its second turn's token
count the output length (unless `workload.bench.output_len` fixes it); a conversation with fewer
than two turns is skipped, as they skip it. An entry ppx cannot serve is refused with its
file, index and reason (the rest are served).
"""

from __future__ import annotations

import json
import os

from ppx.frontend.text import Line, TextError, checked_line


def _entry(obj, where: str, tok, output_len: int, max_context: int) -> Line | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("conversations"), list):
        return Line([], 1, None, f"{where}: expected an object with a 'conversations' list")
    turns = obj["conversations"]
    if len(turns) < 2:
        return None  # the benchmarks' filter: nothing to measure the output length against
    if not all(isinstance(t, dict) and isinstance(t.get("value"), str) for t in turns[:2]):
        return Line([], 1, None, f"{where}: the first two turns need a string 'value'")
    if tok is None:
        return Line([], 1, None, f"{where}: a text prompt needs a tokenizer (model.tokenizer)")
    prompt, reply = turns[0]["value"], turns[1]["value"]
    n = output_len if output_len > 0 else len(tok.encode(reply))
    if n < 1:
        return Line([], 1, prompt, f"{where}: the reply encodes to no tokens (set output_len)")
    return checked_line(tok.encode(prompt), n, prompt, where, max_context)


def read_sharegpt(path: str, tok, output_len: int, max_context: int) -> tuple[list[Line], int]:
    """(the entries in file order, how many one-turn conversations were skipped)."""
    if not os.path.exists(path):
        raise TextError(f"{path}: workload file is missing")
    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise TextError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(data, list):
        raise TextError(f"{path}: expected a JSON array of conversations (ShareGPT format)")
    out, skipped = [], 0
    for i, obj in enumerate(data):
        line = _entry(obj, f"{path}[{i}]", tok, output_len, max_context)
        if line is None:
            skipped += 1
        else:
            out.append(line)
    if not out:
        raise TextError(f"{path}: no conversation with two turns in the file")
    if all(x.error for x in out):
        raise TextError(f"{out[0].error} (and no entry of the file can be served)")
    return out, skipped
