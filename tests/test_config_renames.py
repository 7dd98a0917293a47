"""Moved config keys: a schedule recorded before a move (or before a field existed) still
replays from its file, and a command line or study that says an old key is refused in one
line naming the new one. The moves are ppx/config_renames.py's `RENAMED`."""

from __future__ import annotations

import json
import os

import pytest
from omegaconf import OmegaConf

from ppx import config_renames
from ppx.config import PPXConfig
from ppx.config_renames import RENAMED, migrate_config, migrate_overrides, renamed_problem
from ppx.replay import main as replay
from ppx.sim.schedule import config_hash, load, save

MOVES = {"workload.old_new": "workload.max_new", "explore.knobs": "explore.pct"}


@pytest.fixture
def moves(monkeypatch):
    monkeypatch.setattr(config_renames, "RENAMED", dict(MOVES))


def test_overrides_move_to_the_new_path_and_others_stay(moves) -> None:
    got = migrate_overrides(
        ["workload.old_new=3", "+explore.knobs.depth=2", "engine/guard=rid", "pp=2"]
    )
    assert got == ["workload.max_new=3", "+explore.pct.depth=2", "engine/guard=rid", "pp=2"]


def test_a_recorded_config_moves_leaves_and_whole_sections(moves) -> None:
    old = {"workload": {"old_new": 3, "num_requests": 2}, "explore": {"knobs": {"depth": 2}}}
    new = migrate_config(old)
    assert new == {"workload": {"max_new": 3, "num_requests": 2}, "explore": {"pct": {"depth": 2}}}
    assert old["workload"]["old_new"] == 3  # the caller's dict is not touched


def test_an_old_key_is_refused_in_one_line_naming_the_new(moves, capsys) -> None:
    assert renamed_problem(["pp=2", "workload.max_new=3"]) is None
    line = renamed_problem(["pp=2", "workload.old_new=3"])
    assert line == "workload.old_new was renamed workload.max_new: write workload.max_new=3"
    with pytest.raises(SystemExit) as e:
        config_renames.refuse_renamed(["pp=2", "explore.knobs.depth=4"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "ppx: config error: explore.knobs.depth was renamed explore.pct.depth: "
        "write explore.pct.depth=4"
    )


def test_a_study_with_an_old_key_is_refused_before_it_runs(moves) -> None:
    from ppx.study.spec import parse_study

    with pytest.raises(ValueError, match="study s: workload.old_new was renamed workload.max_new"):
        parse_study({"question": "q", "cells": [["pp=2", "workload.old_new=2"]]}, "s")
    parse_study({"question": "q", "cells": [["pp=2", "workload.max_new=2"]]}, "s")


def test_every_move_lands_on_a_key_the_schema_has_and_leaves_none_behind() -> None:
    schema = OmegaConf.structured(PPXConfig)
    for old, new in RENAMED.items():
        assert OmegaConf.select(schema, new, default="MISSING") != "MISSING", new
        if not new.startswith(old + "."):  # a leaf that became a section keeps its path
            assert OmegaConf.select(schema, old, default="MISSING") == "MISSING", old


def _record_as_before(path: str, edit) -> None:
    """Rewrite a schedule as if an older ppx had recorded it: its recorded config edited by
    `edit` (keys at their old paths, fields that did not exist yet), hashed as then."""
    sch = load(path)
    edit(sch)
    sch.config_hash = config_hash(sch.config)
    save(path, sch)


def test_a_schedule_recorded_before_a_move_and_a_new_field_replays(
    tmp_path, engine, moves, capsys
) -> None:
    s, run_dir = engine("pp=2", "engine.transport=sim", "model=hash", "workload.max_new=3")
    path = os.path.join(run_dir, "schedule.txt")

    def before(sch) -> None:
        w = sch.config["workload"]
        w["old_new"] = w.pop("max_new")  # the key's old path
        del sch.config["watch"]["progress_s"]  # a field added since, at its default
        sch.overrides = [
            "workload.old_new=3" if o == "workload.max_new=3" else o for o in sch.overrides
        ]

    _record_as_before(path, before)
    assert replay([path, "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr()
    assert "-> reproduced" in out.out, out
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["verdict"] == s["verdict"] and summary["served"] == s["served"]


def test_an_edited_schedule_or_a_key_ppx_no_longer_has_is_refused(tmp_path, engine, moves, capsys):
    _, run_dir = engine("pp=2", "engine.transport=sim", "model=hash", "workload.max_new=3")
    path = os.path.join(run_dir, "schedule.txt")
    sch = load(path)
    sch.config["workload"]["gone_knob"] = 1  # a key no schema of today has
    sch.config_hash = config_hash(sch.config)
    save(path, sch)
    assert replay([path, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "recorded for a config key ppx no longer has" in err and "gone_knob" in err, err
    sch.config["workload"].pop("gone_knob")
    sch.config["workload"]["max_new"] = 4  # edited after it was hashed: not what ran
    save(path, sch)
    assert replay([path, "--out", str(tmp_path / "r2")]) == 2
    assert "recorded for another config" in capsys.readouterr().err


def test_a_fault_leaf_that_became_a_section_moves_once() -> None:
    """faults.offer_flap (a count) is now the section faults.offer_flap.{tokens}: the old
    leaf moves under it, the new path is left alone, in overrides and in a recorded config."""
    assert migrate_overrides(["faults.offer_flap=7", "faults.pool_tokens=64"]) == [
        "faults.offer_flap.tokens=7",
        "faults.pool.tokens=64",
    ]
    assert migrate_overrides(["faults.offer_flap.tokens=7"]) == ["faults.offer_flap.tokens=7"]
    assert renamed_problem(["faults.match_cap.tokens=[1,2]"]) is None
    old = {"faults": {"name": "x", "offer_flap": 7, "pool_rank": 1, "pool_tokens": 64}}
    new = {"faults": {"name": "x", "offer_flap": {"tokens": 7}, "pool": {"rank": 1, "tokens": 64}}}
    assert migrate_config(old) == new
    assert migrate_config(new) == new
    # a faults section recorded before the move upgrades to today's schema, every key
    flat = {"delay_kind": "proxy", "delay_rank": 1, "delay_s": 0.5, "lose_rank": 1}
    flat |= {"lose_kind": "output", "lose_seq": 2, "drop_void_output": True, "corrupt_rank": -2}
    flat |= {"corrupt_rid": 3, "corrupt_position": 1, "kill_rank": 1, "kill_after_s": 6.0}
    flat |= {"pool_rank": 1, "pool_tokens": 64, "lifo_rank": 1, "epoch_desync_rank": 1}
    flat |= {"offer_flap": 7, "retract_rid": 0, "retract_redeliver": True, "drop_rank": 1}
    flat |= {"match_cap": [-1, 64, 50], "drop_pass": 2}
    assert {f"faults.{k}" for k in flat} == {k for k in RENAMED if k.startswith("faults.")}
    up = OmegaConf.merge(OmegaConf.structured(PPXConfig), migrate_config({"faults": flat}))
    assert up.faults.match_cap.tokens == [-1, 64, 50] and up.faults.cache_drop.after_pass == 2
    assert up.faults.drop_void_output.enabled and up.faults.delay.s == 0.5
