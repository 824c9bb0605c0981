"""Named, versioned task suites with ``train`` (seen) and ``test`` (unseen) splits (docs/architecture.md#contracts).

A suite is addressed as ``NAME:SPLIT`` (e.g. ``gridmap-v2:test``); a path to a ``.jsonl`` file of
task objects works too (``tasks.jsonl`` or ``tasks.jsonl:test`` to filter by split). Builders are
pure functions of nothing: the same suite name gives the same tasks on every machine.
"""

from __future__ import annotations

import json
from pathlib import Path

from clew.envs.base import Task
from clew.envs.family import Suite
from clew.envs.registry import family_suites, load_object

# Suites that span families (each family's own are in its family.py): name -> "module:builder"
# with builder() -> Suite. register_suite adds one from outside.
SUITES: dict[str, str] = {
    "exploration-v2": "clew.envs.exploration_suite:exploration_v2",
    "exploration-v1": "clew.envs.exploration_suite:exploration_v1",
    "exploration-v1-wide": "clew.envs.exploration_suite:exploration_v1_wide",
    "exploration-v1-wide-test": "clew.envs.exploration_suite:exploration_v1_wide_test",
    "exploration-v1-gridmap-xl": "clew.envs.exploration_suite:exploration_v1_gridmap_xl",
    "exploration-v1-textminigrid-xl":
        "clew.envs.exploration_suite:exploration_v1_textminigrid_xl",
    "exploration-v1-gridmap-pits-xl": "clew.envs.exploration_suite:exploration_v1_gridmap_pits_xl",
    "exploration-v1-wide-pits": "clew.envs.exploration_suite:exploration_v1_wide_pits",
    "exploration-v1-wide-test-pits": "clew.envs.exploration_suite:exploration_v1_wide_test_pits",
}

# Superseded suite -> the suite that replaced it (docs/methods/instances.md: version, don't
# overwrite). A superseded suite stays loadable and gives exactly its old tasks, so old runs stay
# comparable; every suite not listed here (or in its family's ``superseded``) is current.
SUPERSEDED_BY: dict[str, str] = {
    "exploration-v1": "exploration-v2",
}

_cache: dict[str, Suite] = {}


def register_suite(name: str, builder: str) -> None:
    SUITES[name] = builder


def suite_builders() -> dict[str, str]:
    """Every suite by name: the registered families' and :data:`SUITES`."""
    return {**family_suites()[0], **SUITES}


def replacements() -> dict[str, str]:
    """Every superseded suite -> its replacement."""
    return {**family_suites()[1], **SUPERSEDED_BY}


def current_suite(name: str) -> str:
    """The current suite for ``name``: itself, or the end of its chain of replacements."""
    seen, newer = {name}, replacements()
    while name in newer:
        name = newer[name]
        if name in seen:
            raise ValueError(f"suite replacements form a loop at {name!r}")
        seen.add(name)
    return name


def get_suite(name: str) -> Suite:
    if name not in _cache:
        builders = suite_builders()
        try:
            path = builders[name]
        except KeyError:
            raise KeyError(f"unknown suite {name!r}; known: {', '.join(sorted(builders))}") \
                from None
        _cache[name] = load_object(path)()
    return _cache[name]


def load_tasks_file(path: Path, split: str | None = None) -> list[Task]:
    tasks = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            task = Task.from_dict(json.loads(line))
        except (ValueError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}:{lineno}: not a task: {exc}") from None
        if split is None or task.split == split:
            tasks.append(task)
    return tasks


def resolve(spec: str) -> list[Task]:
    """Tasks named by ``SUITE:SPLIT`` or ``FILE.jsonl[:SPLIT]``."""
    name, _, split = spec.partition(":")
    if name.endswith(".jsonl"):
        return load_tasks_file(Path(name), split or None)
    if not split:
        raise ValueError(f"suite spec {spec!r} needs a split, e.g. {spec}:test")
    return get_suite(name).split(split)
