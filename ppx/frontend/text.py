"""Text in and out: a model directory's tokenizer.json (the `tokenizers` library, never
`transformers`), chat messages rendered with the directory's chat template, and prompt files
(JSONL here, ShareGPT in sharegpt.py) read with a reason for every prompt that cannot be
served."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass


class TextError(ValueError):
    """A tokenizer or prompt file ppx cannot use; the message names the file and the problem."""


def tokenizer_file(model) -> str | None:
    """`model.tokenizer` if set, else DIR/tokenizer.json when the model directory has one."""
    if getattr(model, "tokenizer", None):
        return str(model.tokenizer)
    path = getattr(model, "path", None)
    if path and os.path.exists(os.path.join(path, "tokenizer.json")):
        return os.path.join(path, "tokenizer.json")
    return None


class Codec:
    """A tokenizer with its file and chat template."""

    def __init__(self, tok, file: str) -> None:
        self.tok, self.file, self.chat = tok, file, ChatTemplate(file)

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=False)


def load_tokenizer(file: str, vocab: int) -> Codec:
    """The tokenizer, checked against the model: every id it can produce must be an embedding
    row (checkpoints may pad the vocab, so fewer tokens than `vocab` is fine)."""
    from tokenizers import Tokenizer

    if not os.path.exists(file):
        raise TextError(f"{file}: tokenizer file is missing")
    try:
        tok = Tokenizer.from_file(file)
    except Exception as e:  # tokenizers raises a bare Exception for a malformed file
        raise TextError(f"{file}: unreadable tokenizer ({e})") from None
    n = tok.get_vocab_size(with_added_tokens=True)
    if n > vocab:
        raise TextError(f"{file}: the tokenizer has {n} tokens but the model's vocab is {vocab}")
    return Codec(tok, file)


class ChatTemplate:
    """tokenizer_config.json's `chat_template` (jinja), or plain `role: content` lines."""

    def __init__(self, tokenizer_file: str | None) -> None:
        self.template, self.special = None, {}
        cfg = os.path.join(os.path.dirname(tokenizer_file or ""), "tokenizer_config.json")
        if tokenizer_file and os.path.exists(cfg):
            with open(cfg) as f:
                c = json.load(f)
            self.template = c.get("chat_template")
            self.special = {k: c.get(k) or "" for k in ("bos_token", "eos_token")}
            self.special = {k: v if isinstance(v, str) else v.get("content", "") for k, v in self.special.items()}  # fmt: skip

    def render(self, messages: list[dict]) -> str:
        if isinstance(self.template, str):
            import jinja2

            env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
            return env.from_string(self.template).render(
                messages=messages, add_generation_prompt=True, **self.special
            )
        return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"


@dataclass(frozen=True)
class Line:
    """One JSONL line: its prompt ids and max_new, or why it cannot be served."""

    prompt: list[int]
    max_new: int
    text: str | None
    error: str = ""


def _parse(raw: str, where: str, tok: Codec | None, max_new: int, max_context: int) -> Line:
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as e:
        return Line([], max_new, None, f"{where}: not JSON ({e.msg})")
    if not isinstance(obj, dict):
        return Line([], max_new, None, f"{where}: expected an object with prompt or messages")
    n = obj.get("max_new", max_new)
    if not isinstance(n, int) or n < 1:
        return Line([], max_new, None, f"{where}: max_new={n!r} must be a positive integer")
    text = obj.get("prompt")
    if text is None and isinstance(obj.get("messages"), list):
        msgs = obj["messages"]
        if not all(isinstance(m, dict) and "role" in m and "content" in m for m in msgs):
            return Line([], n, None, f"{where}: every message needs role and content")
        text = tok.chat.render(msgs) if tok is not None else ChatTemplate(None).render(msgs)
    if isinstance(text, list) and all(isinstance(t, int) for t in text):
        ids = list(text)  # token ids given directly (a model without a tokenizer)
        text = tok.decode(ids) if tok is not None else None
    elif isinstance(text, str) and text:
        if tok is None:
            return Line([], n, None, f"{where}: a text prompt needs a tokenizer (model.tokenizer)")
        ids = tok.encode(text)
    else:
        return Line([], n, None, f"{where}: no prompt (a non-empty 'prompt' or 'messages')")
    return checked_line(ids, n, text, where, max_context)


def checked_line(ids: list[int], n: int, text: str | None, where: str, max_context: int) -> Line:
    """A prompt of token ids with `n` tokens to generate, or why the model cannot serve it."""
    if not ids:
        return Line([], n, text, f"{where}: the prompt encodes to no tokens")
    if len(ids) + n > max_context:
        return Line(
            [], n, text,
            f"{where}: prompt of {len(ids)} tokens + max_new {n} > model.max_context={max_context}",
        )  # fmt: skip
    return Line(ids, n, text)


def read_jsonl(path: str, tok: Codec | None, max_new: int, max_context: int) -> list[Line]:
    """Every non-blank line of `path`, in order; a bad line carries its reason (the request
    is refused with it and the rest are served)."""
    if not os.path.exists(path):
        raise TextError(f"{path}: workload file is missing")
    out = []
    with open(path) as f:
        for i, raw in enumerate(f, 1):
            if raw.strip():
                out.append(_parse(raw, f"{path}:{i}", tok, max_new, max_context))
    if not out:
        raise TextError(f"{path}: no prompts in the file")
    if all(x.error for x in out):
        raise TextError(f"{out[0].error} (and no line of the file can be served)")
    return out
