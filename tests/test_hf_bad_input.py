"""Bad checkpoints, tokenizers and prompt files: one line naming the file and the problem,
exit 2, nothing spawned -- or, for one bad line among good ones, that request refused with
its reason and the rest served."""

from __future__ import annotations

import json
import os
import shutil

import pytest

pytest.importorskip("transformers")  # the tiny checkpoints are saved by transformers

from hf_fixtures import builder, write_jsonl  # noqa: E402
from ppx_helpers import compose  # noqa: E402

from ppx.config import ConfigError  # noqa: E402


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    root = tmp_path_factory.mktemp("hfbad")
    return builder().build(str(root / "good"), "llama", shard="40KB")


@pytest.fixture
def ckpt(good, tmp_path):
    """A fresh copy of the good checkpoint to break."""
    dst = str(tmp_path / "ckpt")
    shutil.copytree(good, dst)
    return dst


def _edit_json(path: str, fn) -> None:
    with open(path) as f:
        c = json.load(f)
    fn(c)
    with open(path, "w") as f:
        json.dump(c, f)


def _error(*overrides: str) -> str:
    with pytest.raises(ConfigError) as e:
        compose(*overrides)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_good_checkpoint_validates(ckpt):
    """Green arm: the unbroken copy passes, and its shape comes from config.json."""
    cfg = compose("model=hf", f"model.path={ckpt}", "pp=3")
    assert (cfg.model.layers, cfg.model.hidden, cfg.model.kv_heads) == (6, 96, 6)
    assert cfg.model.dtype == "float32"


def test_absent_shard(ckpt):
    os.remove(os.path.join(ckpt, "model-00003-of-00038.safetensors"))
    msg = _error("model=hf", f"model.path={ckpt}")
    assert "model-00003-of-00038.safetensors: shard file is missing" in msg


def test_tensor_missing_from_index(ckpt):
    idx = os.path.join(ckpt, "model.safetensors.index.json")
    _edit_json(idx, lambda c: c["weight_map"].pop("model.layers.4.mlp.up_proj.weight"))
    msg = _error("model=hf", f"model.path={ckpt}")
    assert "model.safetensors.index.json" in msg
    assert "model.layers.4.mlp.up_proj.weight is missing" in msg


def test_wrong_shapes(ckpt):
    _edit_json(os.path.join(ckpt, "config.json"), lambda c: c.update(intermediate_size=192))
    msg = _error("model=hf", f"model.path={ckpt}")
    assert "has shape [96, 96], config.json implies [192, 96]" in msg


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda c: c.update(architectures=["GPT2LMHeadModel"]), "architecture ['GPT2LMHeadModel']"),
        (
            lambda c: c.update(rope_parameters={"rope_type": "llama3", "rope_theta": 5e5}),
            "rope_type='llama3' is not supported",
        ),
        (lambda c: c.update(hidden_act="gelu"), "hidden_act='gelu' is not supported"),
        (lambda c: c.update(attention_bias=True), "attention_bias=true is not supported"),
    ],
)
def test_unsupported(ckpt, edit, needle):
    _edit_json(os.path.join(ckpt, "config.json"), edit)
    msg = _error("model=hf", f"model.path={ckpt}")
    assert needle in msg and "config.json" in msg


def test_missing_directory(tmp_path):
    assert "not a directory" in _error("model=hf", f"model.path={tmp_path / 'nope'}")
    assert "needs model.path" in _error("model=hf")


def test_tokenizer_vocab_mismatch(ckpt, tmp_path):
    from tokenizers import Tokenizer, models

    big = str(tmp_path / "big.json")
    Tokenizer(models.WordLevel({f"w{i}": i for i in range(100)}, unk_token="w0")).save(big)
    msg = _error("model=hf", f"model.path={ckpt}", f"model.tokenizer={big}")
    assert msg == f"{big}: the tokenizer has 100 tokens but the model's vocab is 64"


def test_prompt_longer_than_max_context(ckpt, tmp_path):
    jl = write_jsonl(str(tmp_path / "long.jsonl"), ["the lazy dog " * 30])
    msg = _error(
        "model=hf", f"model.path={ckpt}", "workload=jsonl", f"workload.path={jl}",
        "model.max_context=64",
    )  # fmt: skip
    assert f"{jl}:1: prompt of 90 tokens + max_new 8 > model.max_context=64" in msg


def test_cli_exit_2_nothing_spawned(ckpt, ppx_run):
    os.remove(os.path.join(ckpt, "model-00010-of-00038.safetensors"))
    proc, summary, run_dir = ppx_run("model=hf", f"model.path={ckpt}", timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ppx:")]
    assert len(lines) == 1 and "model-00010-of-00038.safetensors: shard file is missing" in lines[0]
    assert summary is None and not os.path.exists(os.path.join(run_dir, "ranks"))


def test_bad_line_refused_rest_served(ckpt, engine, tmp_path):
    jl = str(tmp_path / "mixed.jsonl")
    with open(jl, "w") as f:
        f.write(json.dumps({"prompt": "the quick brown fox"}) + "\n")
        f.write(json.dumps({"text": "no prompt key here"}) + "\n")
        f.write("{not json\n")
        f.write(json.dumps({"messages": [{"role": "user", "content": "hello world"}]}) + "\n")
    s, d = engine(
        "model=hf", f"model.path={ckpt}", "workload=jsonl", f"workload.path={jl}",
        "workload.max_new=4", "pp=2", "engine.transport=sim",
    )  # fmt: skip
    assert s["verdict"] == "served", s["reason"]
    assert (s["submitted"], s["served"], s["refused"]) == (4, 2, 2)
    import pandas as pd

    df = pd.read_parquet(os.path.join(d, "requests.parquet")).set_index("rid")
    assert df.loc[1, "reason"] == f"{jl}:2: no prompt (a non-empty 'prompt' or 'messages')"
    assert df.loc[2, "reason"].startswith(f"{jl}:3: not JSON")
    assert df.loc[3, "prompt_text"] == "user : hello world assistant :"  # the chat template
