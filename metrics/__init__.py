"""Metric registry: which metrics apply to which environments (docs/architecture.md#metrics).

A metric is ``fn(task, episode) -> dict`` where ``episode`` is an episode record as written to
``episodes.jsonl`` (at least ``{"actions": [...]}``; ``steps``, ``outcome`` and ``interactions``
when the runner wrote it). Metrics recompute what they need by replaying the task, so the same
function scores trajectories produced anywhere (``clew score``). Keys of the returned dict are
prefixed by nothing; values are numbers, NaN for undefined, or JSON-able details (lists/dicts)
that aggregation skips.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clew.envs import registry
from clew.envs.base import Task

#: ``envs`` of a metric computed from the family's trace: every environment whose registry entry
#: names one (:class:`clew.envs.registry.EnvEntry`), including families registered later
TRACED = None


@dataclass(frozen=True)
class Metric:
    name: str
    envs: frozenset[str] | None  # None (TRACED): the environments that have a trace
    path: str  # "module:function"
    description: str = ""
    #: headline keys it writes (optional; lets ``envs_with`` say where a measure is defined)
    keys: frozenset[str] = frozenset()

    def fn(self) -> Callable[[Task, dict[str, Any]], dict[str, Any]]:
        return registry.load_object(self.path)

    def applies_to(self) -> set[str]:
        """The environments this metric scores, now."""
        return set(self.envs) if self.envs is not TRACED else registry.traced_envs()


METRICS: dict[str, Metric] = {}


def register_metric(name: str, envs: set[str] | frozenset[str] | None, path: str,
                    description: str = "", keys: tuple[str, ...] | frozenset[str] = ()):
    """Add a metric for ``envs`` (or :data:`TRACED`). A family's own metrics are named in its
    :class:`~clew.envs.family.Family` instead; this is for measures beyond one family."""
    METRICS[name] = Metric(name, None if envs is TRACED else frozenset(envs), path,
                           description, frozenset(keys))


# The metrics that travel (docs/methods/metric-travel.md): rooms' coverage, redundancy and gap
# decomposition for every family with a trace (definitions in each family's trace module; rooms
# has none and keeps its own, registered in its family).
register_metric(
    "coverage", TRACED, "clew.metrics.travel:coverage_metrics",
    "fraction of the finite state/query space reached (rooms: rooms_exploration)",
    keys=("coverage",),
)
register_metric(
    "redundancy", TRACED, "clew.metrics.travel:redundancy_metrics",
    "share of steps returning to a state/query already reached (rooms: rooms_exploration)",
    keys=("redundancy",),
)
register_metric(
    "exploitation_gap", TRACED, "clew.metrics.travel:gap_metrics",
    "docs/methods/metric-optimal-exploitation-gap.md#gap-decomposition gap decomposition of one episode, R^exploit = best return reachable from "
    "what was known, within the budget left (rooms: optimal_exploitation_gap)",
    keys=("gap_total", "gap_exploration", "gap_exploitation"),
)


def family_metric(env: str, spec: registry.FamilyMetric) -> Metric:
    """A metric a family registers (:class:`clew.envs.family.FamilyMetric`), for the envs of
    that family."""
    fam = registry.family_of(env)
    envs = frozenset(fam.envs) if fam is not None else frozenset({env})
    return Metric(spec.name, envs, spec.path, spec.description, frozenset(spec.keys))


def all_metrics() -> list[Metric]:
    """The families' own metrics, then the registered ones (the metrics that travel first)."""
    seen = {}
    for env in registry.ENVS:
        for spec in registry.family_metrics(env):
            seen.setdefault(spec.name, family_metric(env, spec))
    return [*seen.values(), *METRICS.values()]


def envs_with(key: str) -> set[str]:
    """Environments where some metric declares ``key`` (e.g. ``"coverage"``)."""
    return {env for m in all_metrics() if key in m.keys for env in m.applies_to()}


def metrics_for(env: str) -> list[Metric]:
    """The metrics that score ``env``'s episodes: its family's own, then the registered ones
    that apply."""
    own = [family_metric(env, spec) for spec in registry.family_metrics(env)]
    return own + [m for m in METRICS.values() if env in m.applies_to()]


def score_episode(task: Task, episode: dict[str, Any]) -> dict[str, Any]:
    """Every applicable metric on one episode, merged into one dict."""
    out: dict[str, Any] = {}
    for metric in metrics_for(task.env):
        out.update(metric.fn()(task, episode))
    return out
