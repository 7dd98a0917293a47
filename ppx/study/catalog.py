"""A study by name: found on the experiments path, its includes resolved (cells_from, variants,
expect_from), parsed."""

from __future__ import annotations

import os

import yaml

from ppx.study.include import resolve
from ppx.study.paths import find_study
from ppx.study.spec import Study, parse_study


def load_study(name: str, experiments: str | os.PathLike | None = None) -> Study:
    path = find_study(name, experiments)
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a study file must be a mapping")
    return parse_study(resolve(data, experiments), name=path.stem, path=path)
