"""Registry of environments and task generators (DESIGN §2).

Entries are import paths, so naming an env never imports another family's dependencies
(TextMiniGrid needs ``minigrid``; the grid map needs nothing).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from clew.envs.base import Env, Task

# name -> "module:EnvClass"
ENVS: dict[str, str] = {
    "rooms": "clew.envs.rooms.env:RoomsEnv",
    "hillsearch": "clew.envs.oracle_search.hill:HillSearchEnv",
    "treesearch": "clew.envs.oracle_search.tree:TreeSearchEnv",
    "maxsatsearch": "clew.envs.oracle_search.maxsat:MaxSatSearchEnv",
    "gridmap": "clew.envs.gridmap.env:GridMapEnv",
    "textminigrid": "clew.envs.textminigrid.env:TextMiniGridEnv",
    "browsergym": "clew.envs.browsergym.env:BrowserGymEnv",
}

# name -> "module:generate" where generate(params: dict, seed: int) -> Task
GENERATORS: dict[str, str] = {
    "rooms": "clew.envs.rooms.generator:generate_task",
    "hillsearch": "clew.envs.oracle_search.hill:generate_task",
    "treesearch": "clew.envs.oracle_search.tree:generate_task",
    "maxsatsearch": "clew.envs.oracle_search.maxsat:generate_task",
    "gridmap": "clew.envs.gridmap.generator:generate_task",
    "textminigrid": "clew.envs.textminigrid.generator:generate_task",
    "browsergym": "clew.envs.browsergym.tasks:generate_task",
}


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def register(name: str, env: str, generator: str | None = None) -> None:
    """Add an environment (and optionally its generator) by import path."""
    ENVS[name] = env
    if generator:
        GENERATORS[name] = generator


def env_class(name: str) -> type[Env]:
    try:
        return _load(ENVS[name])
    except KeyError:
        raise KeyError(f"unknown environment {name!r}; known: {', '.join(sorted(ENVS))}") from None


def make(name: str, **params: Any) -> Env:
    """Build an environment by name; ``params`` are its constructor options (not the task)."""
    return env_class(name)(**params)


def make_for(task: Task, **params: Any) -> Env:
    """Build the environment a task belongs to."""
    return make(task.env, **params)


def generator(name: str) -> Callable[[dict[str, Any], int], Task]:
    try:
        return _load(GENERATORS[name])
    except KeyError:
        raise KeyError(f"no generator for {name!r}; known: {', '.join(sorted(GENERATORS))}") from None


def generate(name: str, params: dict[str, Any] | None = None, seed: int = 0) -> Task:
    return generator(name)(dict(params or {}), seed)
