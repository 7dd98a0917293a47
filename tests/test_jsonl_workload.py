"""workload=jsonl (prompts, chat messages, token ids, per-line max_new, bad lines) and
oracle.sample, on the random model (no transformers needed)."""

from __future__ import annotations

import json
import os

import pytest
from ppx_helpers import compose

from ppx.config import ConfigError
from ppx.frontend.text import TextError, load_tokenizer, read_jsonl


@pytest.fixture(scope="module")
def tok_file(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    words = ["a b c d e f g h", "user assistant : hello world", "one two three"]
    tok.train_from_iterator(words, trainers.WordLevelTrainer(special_tokens=["<unk>"]))
    path = str(tmp_path_factory.mktemp("tok") / "tokenizer.json")
    tok.save(path)
    return path


def _write(path, *objs) -> str:
    with open(path, "w") as f:
        for o in objs:
            f.write((o if isinstance(o, str) else json.dumps(o)) + "\n")
    return str(path)


def test_lines_prompts_messages_ids_and_max_new(tok_file, tmp_path):
    tok = load_tokenizer(tok_file, 64)
    jl = _write(
        tmp_path / "w.jsonl",
        {"prompt": "a b c"},
        {"messages": [{"role": "user", "content": "hello world"}], "max_new": 3},
        "",
        {"prompt": [5, 6, 7]},
    )
    lines = read_jsonl(jl, tok, 16, 512)
    assert [ln.error for ln in lines] == ["", "", ""]  # the blank line is skipped
    assert lines[0].prompt == tok.encode("a b c") and lines[0].max_new == 16
    assert lines[1].text == "user: hello world\nassistant:" and lines[1].max_new == 3
    assert lines[1].prompt == tok.encode("user: hello world\nassistant:")
    assert lines[2].prompt == [5, 6, 7]


def test_bad_lines_carry_reasons(tok_file, tmp_path):
    tok = load_tokenizer(tok_file, 64)
    jl = _write(
        tmp_path / "bad.jsonl",
        {"prompt": "a b"},
        {"prompt": ""},
        {"max_new": 0, "prompt": "a"},
        [1, 2],
        {"messages": [{"role": "user"}]},
        {"prompt": "a " * 40},
    )
    errs = [ln.error for ln in read_jsonl(jl, tok, 8, 32)]
    assert errs[0] == ""
    assert errs[1] == f"{jl}:2: no prompt (a non-empty 'prompt' or 'messages')"
    assert errs[2] == f"{jl}:3: max_new=0 must be a positive integer"
    assert errs[3] == f"{jl}:4: expected an object with prompt or messages"
    assert errs[4] == f"{jl}:5: every message needs role and content"
    assert errs[5] == f"{jl}:6: prompt of 40 tokens + max_new 8 > model.max_context=32"


def test_text_without_tokenizer_and_empty_files(tmp_path):
    jl = _write(tmp_path / "t.jsonl", {"prompt": "words"}, {"prompt": [1, 2]})
    lines = read_jsonl(jl, None, 4, 64)
    assert lines[0].error.endswith("a text prompt needs a tokenizer (model.tokenizer)")
    assert lines[1].prompt == [1, 2] and not lines[1].error
    with pytest.raises(TextError, match="no prompts in the file"):
        read_jsonl(_write(tmp_path / "e.jsonl", ""), None, 4, 64)
    with pytest.raises(TextError, match="no line of the file can be served"):
        read_jsonl(_write(tmp_path / "b.jsonl", {"x": 1}), None, 4, 64)


def test_config_errors(tok_file, tmp_path):
    with pytest.raises(ConfigError, match="workload=jsonl needs workload.path"):
        compose("workload=jsonl")
    with pytest.raises(ConfigError, match="workload file is missing"):
        compose("workload=jsonl", f"workload.path={tmp_path / 'none.jsonl'}")
    with pytest.raises(ConfigError, match="the tokenizer has .* tokens but the model's vocab is 8"):
        compose(f"model.tokenizer={tok_file}", "model.vocab=8")
    with pytest.raises(ConfigError, match="oracle.sample=0.0"):
        compose("oracle.sample=0")
    jl = _write(tmp_path / "n.jsonl", {"prompt": [1, 2]}, {"prompt": [3]})
    cfg = compose("workload=jsonl", f"workload.path={jl}")
    assert cfg.workload.num_requests == 2  # capped at the file's lines


def test_sample_rids():
    from ppx.oracle import sample_rids

    rids = list(range(40))
    assert sample_rids(rids, 1.0) == rids
    assert sample_rids(rids, 100) == rids
    half = sample_rids(rids, 0.5, seed=3)
    assert len(half) == 20 and half == sample_rids(rids, 0.5, seed=3)
    assert len(sample_rids(rids, 5)) == 5 and set(sample_rids(rids, 5)) <= set(rids)
    assert sample_rids([], 0.5) == []


def test_jsonl_ids_served_bad_line_refused_oracle_sampled(engine, tmp_path):
    """The random model serves token-id prompts from a file over real gloo; the bad line is
    refused with its reason, the rest served; the oracle checks only the sampled requests."""
    jl = _write(
        tmp_path / "ids.jsonl",
        {"prompt": [3, 4, 5, 6, 7], "max_new": 3},
        {"prompt": "no tokenizer here"},
        {"prompt": [9, 8, 7, 6], "max_new": 4},
        {"prompt": [11, 12, 13]},
    )
    s, d = engine(
        "model=micro", "pp=2", "workload=jsonl", f"workload.path={jl}", "workload.max_new=2",
        "oracle.sample=2",
    )  # fmt: skip
    assert s["verdict"] == "served", s["reason"]
    assert (s["submitted"], s["served"], s["refused"]) == (4, 3, 1)
    assert s["oracle_checked"] == 2
    import pandas as pd

    df = pd.read_parquet(os.path.join(d, "requests.parquet")).set_index("rid")
    assert list(df["output_len"]) == [3, 0, 4, 2]
    assert df.loc[1, "reason"].endswith(":2: a text prompt needs a tokenizer (model.tokenizer)")
    assert df["prompt_text"].isna().all()  # no tokenizer, no text


def test_oracle_for_config_flags_a_wrong_token():
    """Red / green for the oracle built from a config (the path check_tokens uses)."""
    from ppx.oracle import Oracle

    cfg = compose("model=micro")
    o = Oracle.for_config(cfg)
    prompt = [5, 6, 7, 8]
    good = o.ref.greedy(prompt, 4)
    assert o.check(prompt, good) == []
    bad = good[:2] + [(good[2] + 1) % cfg.model.vocab] + good[3:]
    found = o.check(prompt, bad, rid=7)
    assert len(found) >= 1 and found[0].position == 2 and found[0].rid == 7
