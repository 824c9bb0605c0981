"""Metric registry: which metrics apply to which environments (issue 3 "metrics that travel").

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
    """Add a metric for ``envs`` (or :data:`TRACED`); a family bringing its own measure adds
    one line like those below."""
    METRICS[name] = Metric(name, None if envs is TRACED else frozenset(envs), path,
                           description, frozenset(keys))


register_metric(
    "explore_exploit_error", {"gridmap"},
    "clew.envs.gridmap.metrics:episode_metrics",
    "docs/methods/metric-explore-exploit-error.md: per-step error labels, normalised exploration and exploitation errors",
)
register_metric(
    "optimal_exploitation_gap", {"rooms"},
    "clew.envs.rooms.metrics:rooms_gap_metrics",
    "docs/methods/metric-optimal-exploitation-gap.md#gap-decomposition: R^max, R^exploit, agent return, normalised total/exploration/exploitation "
    "gaps and shares (last episode and mean over episodes)",
    keys=("gap_total", "gap_exploration", "gap_exploitation"),
)
register_metric(
    "rooms_exploration", {"rooms"},
    "clew.envs.rooms.metrics:rooms_exploration_metrics",
    "docs/methods/metric-optimal-exploitation-gap.md#rooms-exploration-statistics: state/room/object coverage, redundancy, sample efficiency, invalid rate",
    keys=("coverage", "redundancy"),
)


register_metric(
    "best_found", {"hillsearch", "treesearch", "maxsatsearch"},
    "clew.envs.oracle_search.metrics:episode_metrics",
    "docs/methods/metric-best-found.md#normalised-reward: normalised best-found reward R/OPT, protocol counts, key-structure found",
)
register_metric(
    "textminigrid", {"textminigrid"},
    "clew.envs.textminigrid.metrics:episode_metrics",
    "docs/methods/metric-textminigrid.md#success-and-steps: success, atomic steps, decision steps, actions per decision step, L* and "
    "per-difficulty success (sr_*); docs/methods/metric-optimal-exploitation-gap.md extensions ext_* (revisits, coverage, no-ops, format)",
)

register_metric(
    "web", {"browsergym"}, "clew.envs.browsergym.metrics:episode_metrics",
    "docs/web.md: success, steps, distinct page states (executed, with simulation), simulated vs "
    "executed steps, replays (reset + replayed prefix) and their cost per simulated step",
    keys=("page_states",),
)


# Issue 3 item 4, "metrics that travel": the rooms measures above, for every family with a trace
# (definitions in each family's trace module; rooms has none and keeps its own functions).
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


def envs_with(key: str) -> set[str]:
    """Environments where some registered metric declares ``key`` (e.g. ``"coverage"``)."""
    return {env for m in METRICS.values() if key in m.keys for env in m.applies_to()}


def metrics_for(env: str) -> list[Metric]:
    return [m for m in METRICS.values() if env in m.applies_to()]


def score_episode(task: Task, episode: dict[str, Any]) -> dict[str, Any]:
    """Every applicable metric on one episode, merged into one dict."""
    out: dict[str, Any] = {}
    for metric in metrics_for(task.env):
        out.update(metric.fn()(task, episode))
    return out
