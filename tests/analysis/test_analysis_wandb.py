"""load_wandb returns the load_runs frame shape, against a stand-in `wandb` module (no
network here), and fails with a clear message when W&B is offline."""

from __future__ import annotations

import sys
import types

import pytest

import ppx.analysis as pa


class _Summary(dict):
    @property
    def _json_dict(self) -> dict:
        return dict(self)


class _Run:
    def __init__(self, rid: str, summary: dict, config: dict) -> None:
        self.id, self.summary, self.config = rid, _Summary(summary), config
        self.path, self.url, self.group = ["me", "ppx", rid], f"https://w/{rid}", "study_a"
        self.tags = ["guard=rid"]


def _fake_wandb(runs: list[_Run], calls: list) -> types.ModuleType:
    mod = types.ModuleType("wandb")

    class Api:
        def runs(self, path, filters=None):
            calls.append((path, filters))
            return runs

    mod.Api = Api
    return mod


def test_load_wandb_same_shape(monkeypatch, matrix_root) -> None:
    local = pa.load_runs(matrix_root)
    nested = {
        "verdict": "served",
        "voids": 3,
        "out_tok_s": 9.5,
        "_runtime": 4.0,
        "choices": {"guard": "rid", "pp": 2},
        "per_rank": {"voids": [1, 2]},
    }
    flat = {
        "verdict": "wedged",
        "voids": 5,
        "choices/guard": "prefix",
        "choices/pp": 3,
        "cycle": "rank0 -[x]-> rank1 -[y]-> rank0",
    }
    from_config = {"verdict": "served", "voids": 1}
    runs = [
        _Run("a", nested, {}),
        _Run("b", flat, {}),
        _Run("c", from_config, {"guard": "off", "pp": 4}),
    ]
    calls: list = []
    monkeypatch.setitem(sys.modules, "wandb", _fake_wandb(runs, calls))
    monkeypatch.delenv("WANDB_MODE", raising=False)
    df = pa.load_wandb("me/ppx", {"group": "study_a"})
    assert calls == [("me/ppx", {"group": "study_a"})]
    assert list(df.columns[: len(local.columns) - 1]) == list(local.columns[:-1])
    assert list(df["guard"]) == ["rid", "prefix", "off"]
    assert list(df["pp"]) == [2, 3, 4] and df["pp"].dtype == "Int64"
    assert df["verdict"].dtype == local["verdict"].dtype
    assert list(df["run_id"]) == ["a", "b", "c"]
    assert df.loc[0, "wandb_path"] == "me/ppx/a" and df.loc[0, "study"] == "study_a"
    assert "_runtime" not in df and "per_rank" not in df
    table = pa.compare(df, by="guard", metrics=["voids"])
    assert list(table["mean"]) == [1.0, 5.0, 3.0]


def test_load_wandb_offline_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    with pytest.raises(RuntimeError, match="wandb sync"):
        pa.load_wandb("me/ppx", None)
    monkeypatch.delenv("WANDB_MODE")
    broken = types.ModuleType("wandb")

    def api():
        raise ConnectionError("no route to api.wandb.ai")

    broken.Api = api
    monkeypatch.setitem(sys.modules, "wandb", broken)
    with pytest.raises(RuntimeError, match="not reachable.*ConnectionError"):
        pa.load_wandb("me/ppx", None)
