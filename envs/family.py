"""What an env family registers, by import path: its envs, suites and metrics
(docs/methods/envs.md#adding-an-env-family).

A family is a folder (``envs/NAME/`` in clew, or a package of one's own) with its env classes, task
generators and, where it has them, a trace for the metrics that travel, its own metrics and its
suites. Its :class:`Family` names them all; one line registers it (:data:`clew.envs.registry.FAMILIES`,
or :func:`clew.envs.registry.register_family` from outside clew). What else the family knows is on
its env class, as the hooks of :class:`clew.envs.base.Env` (prompts, ground-truth progress, the
reflection memory's cut, the actions a model-free policy proposes, ...), so nothing outside the
folder names the family.

Paths are ``"module:attribute"``: registering a family imports none of its code, so naming one
env never imports another family's dependencies (TextMiniGrid needs ``minigrid``, the web tasks
BrowserGym), and reading an entry's ``levels`` imports nothing at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from clew.envs.base import Task


@dataclass(frozen=True)
class EnvEntry:
    """One registered environment.

    * ``env``: the :class:`~clew.envs.base.Env` subclass.
    * ``generator``: ``generate(params: dict, seed: int) -> Task`` (optional).
    * ``trace``: ``trace(task, episode record) -> clew.envs.trace.Trace``, what coverage,
      redundancy and the exploitation gap are computed from (optional: a family without one
      gets no such metric, or brings its own under the same keys, as rooms does).
    * ``levels``: task parameters that are difficulty levels, dotted one dict deep
      (``"layout.size"``), in display order; ``clew report`` tabulates success by them.
    * ``family``: the registered family it belongs to (set by the registry).
    """

    env: str
    generator: str | None = None
    trace: str | None = None
    levels: tuple[str, ...] = ()
    family: str | None = None


@dataclass(frozen=True)
class FamilyMetric:
    """A metric only this family defines, for each of its envs: ``fn(task, episode record) ->
    dict`` at ``path`` (docs/architecture.md#metrics: it replays what it needs, NaN where a value
    is undefined). ``keys``: the headline keys it writes (so reports know where a measure such as
    ``coverage`` is defined)."""

    name: str
    path: str
    description: str = ""
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Family:
    """An env family: its envs by registry name, its own metrics, and its suites (name ->
    ``"module:builder"`` with ``builder() -> Suite``; ``superseded``: an old suite version ->
    the one that replaced it)."""

    name: str
    envs: Mapping[str, EnvEntry]
    metrics: tuple[FamilyMetric, ...] = ()
    suites: Mapping[str, str] = field(default_factory=dict)
    superseded: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Suite:
    """A named, versioned list of tasks by split (``train``: seen, ``test``: unseen;
    docs/methods/instances.md)."""

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
