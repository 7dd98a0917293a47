"""conf/hydra/launcher/*.yaml compose with Hydra and name the right launcher class.

Composes the project's own conf/config.yaml (a config that does not compose is a failure
here, not a fallback). Field names are checked against each plugin's config dataclass where
the plugin is installed. (There is no Ray launcher: hydra-ray-launcher 1.2.2 pins
cloudpickle<3, which breaks joblib>=1.5's cloudpickle>=3 that the default launcher needs.)
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import warnings
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parents[2]
LAUNCHERS = {
    "joblib": (
        "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
        "hydra_plugins.hydra_joblib_launcher.config",
        "JobLibLauncherConf",
    ),
    "submitit_slurm": (
        "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher",
        "hydra_plugins.hydra_submitit_launcher.config",
        "SlurmQueueConf",
    ),
    "submitit_local": (
        "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
        "hydra_plugins.hydra_submitit_launcher.config",
        "LocalQueueConf",
    ),
}


def _compose_launcher(conf_dir: Path, name: str):
    GlobalHydra.instance().clear()
    with warnings.catch_warnings():
        # Our files share their names with the plugins' ConfigStore entries (the names
        # people type: hydra/launcher=joblib), so Hydra merges them over the plugin schema
        # and says so with a deprecation warning; the merge is what we want.
        warnings.filterwarnings("ignore", message=r"(?s).*validated against ConfigStore schema")
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            cfg = compose("config", overrides=[f"hydra/launcher={name}"], return_hydra_config=True)
    GlobalHydra.instance().clear()
    return cfg.hydra.launcher


def _launcher_node(name: str):
    # the engine's groups start from structured schemas (`defaults: [schema, _self_]`) that
    # `python -m ppx.run` registers before composing; do the same
    from ppx.config import register_configs

    register_configs()
    return _compose_launcher(REPO / "conf", name)


@pytest.mark.parametrize("name", sorted(LAUNCHERS))
def test_launcher_config_composes(name: str) -> None:
    raw = (REPO / "conf" / "hydra" / "launcher" / f"{name}.yaml").read_text()
    assert raw.lstrip().splitlines()[0] != "" and "# @package hydra.launcher" in raw
    node = _launcher_node(name)
    target, conf_module, conf_class = LAUNCHERS[name]
    assert node._target_ == target
    keys = set(OmegaConf.to_container(node, resolve=False))
    if conf_module and importlib.util.find_spec(conf_module.rsplit(".", 1)[0]):
        schema = getattr(importlib.import_module(conf_module), conf_class)
        fields = {f.name for f in dataclasses.fields(schema)}
        assert keys <= fields, f"unknown launcher fields: {keys - fields}"
        module, cls = target.rsplit(".", 1)
        assert hasattr(importlib.import_module(module), cls)


def test_joblib_is_the_study_default() -> None:
    node = _launcher_node("joblib")
    assert node.n_jobs == 2
    assert node.backend is None  # loky; `multiprocessing` workers cannot spawn rank processes
