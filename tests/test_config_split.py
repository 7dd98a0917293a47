"""Issue 34's split of the widest schema sections: every moved key is in ppx/config_renames.py,
lands on a key today's schema has, and a config recorded under the old keys upgrades to
exactly today's (a saved schedule replays), while an old key on a command line is refused."""

from __future__ import annotations

import copy

from omegaconf import OmegaConf

from ppx.config import PPXConfig
from ppx.config_renames import DROPPED, RENAMED, migrate_config, renamed_problem
from ppx.sim.schedule import config_hash, upgraded

TODAY = OmegaConf.to_container(OmegaConf.structured(PPXConfig), resolve=True)
# issue 34's moves (the faults sections' moves are held by tests/test_config_renames.py)
SPLIT = {old: new for old, new in RENAMED.items() if not old.startswith("faults.")}


def _has(tree: dict, key: str) -> bool:
    node = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


# fields added to a split section since the split: a config recorded before it lacks them,
# and `upgraded` gives them their defaults (the behaviour before they existed)
ADDED_SINCE = ("workload.bench.repeat_count",)


def _without(config: dict, keys) -> dict:
    out = copy.deepcopy(config)
    for key in keys:
        *head, leaf = key.split(".")
        parent = out
        for part in head:
            parent = parent[part]
        parent.pop(leaf)
    return out


def _as_recorded_before_the_split(config: dict) -> dict:
    """Today's resolved config written with the old keys (each moved leaf put back, each field
    added since left out)."""
    old = _without(config, ADDED_SINCE)
    for was, now in SPLIT.items():
        *head, leaf = now.split(".")
        parent = old
        for part in head:
            parent = parent[part]
        value = parent.pop(leaf)
        *old_head, old_leaf = was.split(".")
        target = old
        for part in old_head:
            target = target.setdefault(part, {})
        target[old_leaf] = value
    for key in (
        "explore.pct",
        "explore.dfs",
        "explore.exhaustive",
        "explore.fanout",
        "explore.shrinker",
    ):
        section, name = key.split(".")
        assert old[section].pop(name) == {}, key  # every leaf of a new section moved
    for key in ("workload.bench", "workload.trace", "engine.liveness", "engine.admission.prefetch"):
        *head, name = key.split(".")
        parent = old
        for part in head:
            parent = parent[part]
        assert parent.pop(name) == {}, key
    old["explore"]["name"] = "default"  # the key the split dropped
    return old


def test_every_new_key_is_in_the_schema_and_no_old_one_is():
    for was, now in SPLIT.items():
        assert _has(TODAY, now), now
        assert was == "explore.shrink" or not _has(TODAY, was), was
    assert not any(_has(TODAY, k) for k in DROPPED)


def test_a_config_recorded_before_the_split_upgrades_to_todays():
    old = _as_recorded_before_the_split(TODAY)
    assert old["workload"]["burstiness"] == 1.0 and old["explore"]["shrink"] == 200
    assert migrate_config(old) == _without(TODAY, ADDED_SINCE)
    assert config_hash(upgraded(old)) == config_hash(TODAY)
    # red arm: one leaf left at its old place is not today's config
    wrong = migrate_config(old)
    wrong["engine"]["livelock_passes"] = wrong["engine"]["liveness"].pop("livelock_passes")
    assert wrong != TODAY


def test_an_old_key_is_refused_in_one_line_and_a_new_one_is_not():
    assert renamed_problem(["explore.workers=2"]) == (
        "explore.workers was renamed explore.fanout.workers: write explore.fanout.workers=2"
    )
    assert renamed_problem(["explore.shrink=0"]) == (
        "explore.shrink was renamed explore.shrinker.runs: write explore.shrinker.runs=0"
    )
    new = ["explore.fanout.workers=2", "explore.shrinker.runs=0", "workload.bench.burstiness=0.5"]
    assert renamed_problem(new) is None
