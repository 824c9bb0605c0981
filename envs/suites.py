"""Named, versioned task suites with ``train`` (seen) and ``test`` (unseen) splits (docs/architecture.md#contracts).

A suite is addressed as ``NAME:SPLIT`` (e.g. ``gridmap-v2:test``); a path to a ``.jsonl`` file of
task objects works too (``tasks.jsonl`` or ``tasks.jsonl:test`` to filter by split). Builders are
pure functions of nothing: the same suite name gives the same tasks on every machine.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from clew.envs.base import Task


@dataclass(frozen=True)
class Suite:
    name: str
    version: int
    splits: dict[str, list[Task]] = field(default_factory=dict)
    description: str = ""

    def split(self, split: str) -> list[Task]:
        if split in ("all", "*"):
            return [t for tasks in self.splits.values() for t in tasks]
        try:
            return self.splits[split]
        except KeyError:
            raise KeyError(
                f"suite {self.name!r} has no split {split!r}; splits: {', '.join(self.splits)}"
            ) from None


# name -> "module:builder" with builder() -> Suite
SUITES: dict[str, str] = {
    "rooms-v3": "clew.envs.rooms.suites:rooms_v3",
    "rooms-v3-4x4": "clew.envs.rooms.suites:rooms_v3_4x4",
    "rooms-v3-5x5": "clew.envs.rooms.suites:rooms_v3_5x5",
    "rooms-v3-7x7": "clew.envs.rooms.suites:rooms_v3_7x7",
    "rooms-v3-7x7-exploit": "clew.envs.rooms.suites:rooms_v3_7x7_exploit",
    "rooms-v3-7x7-explore": "clew.envs.rooms.suites:rooms_v3_7x7_explore",
    "rooms-v2": "clew.envs.rooms.suites:rooms_v2",
    "rooms-v2-4x4": "clew.envs.rooms.suites:rooms_v2_4x4",
    "rooms-v2-5x5": "clew.envs.rooms.suites:rooms_v2_5x5",
    "rooms-v2-7x7": "clew.envs.rooms.suites:rooms_v2_7x7",
    "rooms-v2-7x7-exploit": "clew.envs.rooms.suites:rooms_v2_7x7_exploit",
    "rooms-v2-7x7-explore": "clew.envs.rooms.suites:rooms_v2_7x7_explore",
    "rooms-v1": "clew.envs.rooms.suites:rooms_v1",
    "rooms-4x4": "clew.envs.rooms.suites:rooms_4x4",
    "rooms-5x5": "clew.envs.rooms.suites:rooms_5x5",
    "rooms-7x7": "clew.envs.rooms.suites:rooms_7x7",
    "rooms-7x7-exploit": "clew.envs.rooms.suites:rooms_7x7_exploit",
    "rooms-7x7-explore": "clew.envs.rooms.suites:rooms_7x7_explore",
    "paper-003-main": "clew.envs.oracle_search.suites:paper_003_main",
    "paper-003-additional": "clew.envs.oracle_search.suites:paper_003_additional",
    "paper-003-main-v1": "clew.envs.oracle_search.suites:paper_003_main_v1",
    "paper-003-additional-v1": "clew.envs.oracle_search.suites:paper_003_additional_v1",
    "paper-003-general": "clew.envs.oracle_search.suites:paper_003_general",
    "paper-003-difficulty": "clew.envs.oracle_search.suites:paper_003_difficulty",
    "gridmap-v2": "clew.envs.gridmap.suites:gridmap_v2",
    "gridmap-v1": "clew.envs.gridmap.suites:gridmap_v1",
    "gridmap-mini": "clew.envs.gridmap.suites:gridmap_mini",
    "gridmap-semantic": "clew.envs.gridmap.suites:gridmap_semantic",
    "textminigrid-45": "clew.envs.textminigrid.suites:textminigrid_45",
    "textminigrid-v1": "clew.envs.textminigrid.suites:textminigrid_v1",
    "exploration-v2": "clew.envs.exploration_suite:exploration_v2",
    "exploration-v1": "clew.envs.exploration_suite:exploration_v1",
    "exploration-v1-wide": "clew.envs.exploration_suite:exploration_v1_wide",
    "exploration-v1-gridmap-xl": "clew.envs.exploration_suite:exploration_v1_gridmap_xl",
    "exploration-v1-textminigrid-xl":
        "clew.envs.exploration_suite:exploration_v1_textminigrid_xl",
    "miniwob-v1": "clew.envs.browsergym.suites:miniwob_v1",
}

# Superseded suite -> the suite that replaced it (issue 13: version, don't overwrite). A
# superseded suite stays loadable and gives exactly its old tasks, so old runs stay comparable;
# every suite not listed here is current.
SUPERSEDED_BY: dict[str, str] = {
    "gridmap-v1": "gridmap-v2",
    "rooms-v1": "rooms-v2",
    "rooms-4x4": "rooms-v2-4x4",
    "rooms-5x5": "rooms-v2-5x5",
    "rooms-7x7": "rooms-v2-7x7",
    "rooms-7x7-exploit": "rooms-v2-7x7-exploit",
    "rooms-7x7-explore": "rooms-v2-7x7-explore",
    "rooms-v2": "rooms-v3",
    "rooms-v2-4x4": "rooms-v3-4x4",
    "rooms-v2-5x5": "rooms-v3-5x5",
    "rooms-v2-7x7": "rooms-v3-7x7",
    "rooms-v2-7x7-exploit": "rooms-v3-7x7-exploit",
    "rooms-v2-7x7-explore": "rooms-v3-7x7-explore",
    "exploration-v1": "exploration-v2",
    "paper-003-main-v1": "paper-003-main",
    "paper-003-additional-v1": "paper-003-additional",
}

_cache: dict[str, Suite] = {}


def register_suite(name: str, builder: str) -> None:
    SUITES[name] = builder


def current_suite(name: str) -> str:
    """The current suite for ``name``: itself, or the end of its chain of replacements."""
    seen = {name}
    while name in SUPERSEDED_BY:
        name = SUPERSEDED_BY[name]
        if name in seen:
            raise ValueError(f"suite replacements form a loop at {name!r}")
        seen.add(name)
    return name


def get_suite(name: str) -> Suite:
    if name not in _cache:
        try:
            path = SUITES[name]
        except KeyError:
            raise KeyError(f"unknown suite {name!r}; known: {', '.join(sorted(SUITES))}") from None
        module, _, attr = path.partition(":")
        _cache[name] = getattr(importlib.import_module(module), attr)()
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
