"""Registry of environment families (docs/architecture.md#how-to-add-an-environment-family).

A family (:class:`~clew.envs.family.Family`, in its folder's ``family.py``) names its envs, its
own metrics and its suites by import path; :data:`FAMILIES` holds one line per family, and
:func:`register_family` adds one from outside clew. :data:`ENVS` is what they register, one
:class:`~clew.envs.family.EnvEntry` per environment name (the env class, its task generator, its
trace for the metrics that travel, the task parameters that are difficulty levels);
:func:`register` adds a single environment, a family of one.

Entries are import paths, so naming an env never imports another family's dependencies
(TextMiniGrid needs ``minigrid``; the grid map needs nothing), and reading an entry's
``levels`` imports nothing at all.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from clew.envs.base import Env, Task
from clew.envs.family import EnvEntry, Family, FamilyMetric

#: one line per built-in family: the import path of its :class:`~clew.envs.family.Family`
FAMILIES: list[str] = [
    "clew.envs.rooms.family:FAMILY",
    "clew.envs.oracle_search.family:FAMILY",
    "clew.envs.gridmap.family:FAMILY",
    "clew.envs.gridmap.family:PITS_FAMILY",
    "clew.envs.textminigrid.family:FAMILY",
    "clew.envs.browsergym.family:FAMILY",
]

#: every registered environment by name
ENVS: dict[str, EnvEntry] = {}
#: every registered family by name
REGISTERED: dict[str, Family] = {}


def load_object(path: str) -> Any:
    """The object an import path ``"module:attribute"`` names (every registry of clew stores
    these, so naming an entry imports nothing until it is used)."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def register_family(family: Family | str) -> Family:
    """Add (or replace) a family, given as a :class:`~clew.envs.family.Family` or the import
    path of one: its envs, metrics and suites become known by name."""
    fam = load_object(family) if isinstance(family, str) else family
    if not isinstance(fam, Family):
        raise TypeError(f"{family!r} is not a clew.envs.family.Family")
    REGISTERED[fam.name] = fam
    for name, env_entry in fam.envs.items():
        ENVS[name] = replace(env_entry, family=fam.name)
    return fam


def register(name: str, env: str, generator: str | None = None, *, trace: str | None = None,
             levels: tuple[str, ...] | list[str] = ()) -> None:
    """Add (or replace) one environment by import paths (a family of one; see
    :class:`~clew.envs.family.EnvEntry`)."""
    register_family(Family(name, {name: EnvEntry(env, generator, trace, tuple(levels))}))


def family_of(name: str) -> Family | None:
    """The registered family an environment belongs to (``None`` for an entry set directly)."""
    fam = ENVS[name].family if name in ENVS else None
    return REGISTERED.get(fam) if fam is not None else None


def family_metrics(name: str) -> tuple[FamilyMetric, ...]:
    """The metrics an environment's family defines for it."""
    fam = family_of(name)
    return fam.metrics if fam is not None else ()


def family_suites() -> tuple[dict[str, str], dict[str, str]]:
    """The suites the registered families bring (name -> builder path) and the replacements of
    their superseded versions."""
    suites: dict[str, str] = {}
    superseded: dict[str, str] = {}
    for fam in REGISTERED.values():
        suites.update(fam.suites)
        superseded.update(fam.superseded)
    return suites, superseded


def entry(name: str) -> EnvEntry:
    try:
        return ENVS[name]
    except KeyError:
        raise KeyError(f"unknown environment {name!r}; known: {', '.join(sorted(ENVS))}") from None


def env_class(name: str) -> type[Env]:
    return load_object(entry(name).env)


def make(name: str, **params: Any) -> Env:
    """Build an environment by name; ``params`` are its constructor options (not the task)."""
    return env_class(name)(**params)


def make_for(task: Task, **params: Any) -> Env:
    """Build the environment a task belongs to."""
    return make(task.env, **params)


def generator(name: str) -> Callable[[dict[str, Any], int], Task]:
    path = ENVS[name].generator if name in ENVS else None
    if path is None:
        known = sorted(n for n, e in ENVS.items() if e.generator)
        raise KeyError(f"no generator for {name!r}; known: {', '.join(known)}")
    return load_object(path)


def generate(name: str, params: dict[str, Any] | None = None, seed: int = 0) -> Task:
    return generator(name)(dict(params or {}), seed)


def traced_envs() -> set[str]:
    """Environments whose entry names a trace (where the metrics that travel are defined)."""
    return {name for name, e in ENVS.items() if e.trace}


def trace_function(name: str) -> Callable[[Task, Any], Any] | None:
    """The env's trace function (see :class:`EnvEntry`), or ``None`` when it has none."""
    path = ENVS[name].trace if name in ENVS else None
    return load_object(path) if path else None


def level_keys(name: str) -> tuple[str, ...]:
    """The difficulty-level parameters the env declares (none for an unknown env)."""
    return ENVS[name].levels if name in ENVS else ()


for _path in FAMILIES:
    register_family(_path)
