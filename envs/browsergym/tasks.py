"""BrowserGym task names, their benchmark packages, and clew tasks for them (docs/web.md).

A clew task for the ``browsergym`` env names one BrowserGym task (``params["task"]``, the gym id
without its ``browsergym/`` prefix, e.g. ``miniwob.click-button`` or ``webarena.310``), its step
budget (``params["max_steps"]``) and optionally a ``group`` label that reports tabulate success by
(the registry's ``levels``); ``Task.seed`` is the seed BrowserGym's ``reset`` receives.

The benchmark package of a task is imported only when the task is first made, and MiniWoB++ is
pointed at the task pages that the ``miniwob`` wheel ships (``MINIWOB_URL`` = a ``file://`` URL
into site-packages, unless the user set it), so MiniWoB++ runs with no server and no network.
"""

from __future__ import annotations

import importlib
import logging
import os
from importlib.resources import files
from typing import Any

from clew.envs.base import Task

DEFAULT_MAX_STEPS = 10
#: task-name prefix -> (module that registers its tasks, pip package)
BENCHMARKS = {
    "miniwob": ("browsergym.miniwob", "browsergym-miniwob"),
    "webarena": ("browsergym.webarena", "browsergym-webarena"),
    "visualwebarena": ("browsergym.visualwebarena", "browsergym-visualwebarena"),
    "workarena": ("browsergym.workarena", "browsergym-workarena"),
    "assistantbench": ("browsergym.assistantbench", "browsergym-assistantbench"),
}
_prepared: set[str] = set()


def benchmark(name: str) -> str:
    return name.split(".", 1)[0]


def miniwob_url() -> str:
    """``file://`` URL of the MiniWoB++ pages inside the installed ``miniwob`` package."""
    try:
        pages = files("miniwob") / "html" / "miniwob"
    except ModuleNotFoundError:
        raise ModuleNotFoundError("error: MiniWoB++ tasks need the miniwob package "
                                  "(pip install 'clew[web]')") from None
    return pages.as_uri() + "/"  # type: ignore[attr-defined]


def prepare(name: str) -> None:
    """Import the benchmark package of task ``name`` (registers its gym ids); once per prefix."""
    prefix = benchmark(name)
    if prefix in _prepared:
        return
    try:
        module, package = BENCHMARKS[prefix]
    except KeyError:
        raise ValueError(f"error: unknown BrowserGym benchmark {prefix!r} in task {name!r}; "
                         f"known: {', '.join(sorted(BENCHMARKS))}") from None
    if prefix == "miniwob" and not os.environ.get("MINIWOB_URL"):
        os.environ["MINIWOB_URL"] = miniwob_url()
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(f"error: BrowserGym task {name!r} needs {package} "
                                  f"(pip install {package}; {exc})") from None
    _prepared.add(prefix)


class _QuietOverrides(logging.Filter):
    """BrowserGym warns at every reset that an option overrides the task's; clew's env options
    document those overrides (BrowserGymEnv), and a search resets hundreds of times."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Overriding the task's")


def make_browser_env(name: str, **kwargs: Any) -> Any:
    """BrowserGym's ``BrowserEnv`` for task ``name`` (``gym.make`` of ``browsergym/NAME``)."""
    import gymnasium as gym

    prepare(name)
    log = logging.getLogger("browsergym.core.env")
    if not any(isinstance(f, _QuietOverrides) for f in log.filters):
        log.addFilter(_QuietOverrides())
    try:
        env = gym.make(f"browsergym/{name}", disable_env_checker=True, **kwargs)
    except gym.error.Error as exc:
        raise ValueError(f"error: unknown BrowserGym task {name!r}: {exc}") from None
    return env.unwrapped


def generate_task(params: dict[str, Any], seed: int) -> Task:
    """A clew task for BrowserGym task ``params["task"]`` with BrowserGym seed ``seed``."""
    name = params.get("task")
    if not isinstance(name, str) or "." not in name:
        raise ValueError(f"browsergym task params need 'task' = a BrowserGym task name such as "
                         f"'miniwob.click-button', got {name!r}")
    unknown = set(params) - {"task", "max_steps", "group"}
    if unknown:
        raise ValueError(f"browsergym task params: unknown key(s) {', '.join(sorted(unknown))}")
    max_steps = int(params.get("max_steps", DEFAULT_MAX_STEPS))
    if max_steps < 1:
        raise ValueError(f"browsergym task params: max_steps must be >= 1, got {max_steps}")
    out = {"task": name, "max_steps": max_steps}
    if "group" in params:  # a label for reports (the registry's levels), e.g. "one-step"
        out["group"] = str(params["group"])
    return Task("browsergym", out, seed, f"{name.removeprefix('miniwob.')}-s{seed}")
