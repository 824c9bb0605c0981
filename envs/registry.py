"""Registry of environment families (docs/architecture.md: how to add an env family).

One entry per environment name, :class:`EnvEntry`: the env class, its task generator, its trace
for the metrics that travel, and the task parameters that are difficulty levels. Adding a family
is its folder plus one entry here, or one :func:`register` call from outside the package.

Entries are import paths, so naming an env never imports another family's dependencies
(TextMiniGrid needs ``minigrid``; the grid map needs nothing), and reading an entry's
``levels`` imports nothing at all.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clew.envs.base import Env, Task


@dataclass(frozen=True)
class EnvEntry:
    """One registered environment. Paths are ``"module:attribute"``.

    * ``env``: the :class:`~clew.envs.base.Env` subclass.
    * ``generator``: ``generate(params: dict, seed: int) -> Task`` (optional).
    * ``trace``: ``trace(task, episode record) -> clew.envs.trace.Trace``, what coverage,
      redundancy and the exploitation gap are computed from (optional: a family without one
      gets no such metric, or brings its own under the same keys, as rooms does).
    * ``levels``: task parameters that are difficulty levels, dotted one dict deep
      (``"layout.size"``), in display order; ``clew report`` tabulates success by them.
    """

    env: str
    generator: str | None = None
    trace: str | None = None
    levels: tuple[str, ...] = ()


ENVS: dict[str, EnvEntry] = {
    "rooms": EnvEntry("clew.envs.rooms.env:RoomsEnv", "clew.envs.rooms.generator:generate_task",
                      levels=("layout.size",)),
    "hillsearch": EnvEntry("clew.envs.oracle_search.hill:HillSearchEnv",
                           "clew.envs.oracle_search.hill:generate_task",
                           trace="clew.envs.oracle_search.trace:trace"),
    "treesearch": EnvEntry("clew.envs.oracle_search.treesearch:TreeSearchEnv",
                           "clew.envs.oracle_search.treesearch:generate_task",
                           trace="clew.envs.oracle_search.trace:trace"),
    "maxsatsearch": EnvEntry("clew.envs.oracle_search.maxsat:MaxSatSearchEnv",
                             "clew.envs.oracle_search.maxsat:generate_task",
                             trace="clew.envs.oracle_search.trace:trace"),
    "gridmap": EnvEntry("clew.envs.gridmap.env:GridMapEnv",
                        "clew.envs.gridmap.generator:generate_task",
                        trace="clew.envs.gridmap.trace:trace",
                        levels=("presets.exploration_level", "presets.dag_level",
                                "presets.exploitation_demand", "presets.density")),
    "textminigrid": EnvEntry("clew.envs.textminigrid.env:TextMiniGridEnv",
                             "clew.envs.textminigrid.generator:generate_task",
                             trace="clew.envs.textminigrid.trace:trace",
                             levels=("difficulty", "rooms", "density")),
    "browsergym": EnvEntry("clew.envs.browsergym.env:BrowserGymEnv",
                           "clew.envs.browsergym.tasks:generate_task", levels=("group",)),
}


def load_object(path: str) -> Any:
    """The object an import path ``"module:attribute"`` names (every registry of clew stores
    these, so naming an entry imports nothing until it is used)."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def register(name: str, env: str, generator: str | None = None, *, trace: str | None = None,
             levels: tuple[str, ...] | list[str] = ()) -> None:
    """Add (or replace) an environment by import paths; see :class:`EnvEntry`."""
    ENVS[name] = EnvEntry(env, generator, trace, tuple(levels))


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
