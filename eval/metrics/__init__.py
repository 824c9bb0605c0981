"""Metric registry: which metrics apply to which environments (issue 3 "metrics that travel").

A metric is ``fn(task, episode) -> dict`` where ``episode`` is an episode record as written to
``episodes.jsonl`` (at least ``{"actions": [...]}``; ``steps``, ``outcome`` and ``interactions``
when the runner wrote it). Metrics recompute what they need by replaying the task, so the same
function scores trajectories produced anywhere (``clew score``). Keys of the returned dict are
prefixed by nothing; values are numbers, NaN for undefined, or JSON-able details (lists/dicts)
that aggregation skips.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any, Callable

from clew.envs.base import Task


@dataclass(frozen=True)
class Metric:
    name: str
    envs: frozenset[str]
    path: str  # "module:function"
    description: str = ""

    def fn(self) -> Callable[[Task, dict[str, Any]], dict[str, Any]]:
        module, _, attr = self.path.partition(":")
        return getattr(importlib.import_module(module), attr)


METRICS: dict[str, Metric] = {}


def register_metric(name: str, envs: set[str] | frozenset[str], path: str, description: str = ""):
    METRICS[name] = Metric(name, frozenset(envs), path, description)


register_metric(
    "explore_exploit_error", {"gridmap"},
    "clew.eval.metrics.explore_exploit:episode_metrics",
    "spec_000 §1.6: per-step error labels, normalised exploration and exploitation errors",
)


def metrics_for(env: str) -> list[Metric]:
    return [m for m in METRICS.values() if env in m.envs]


def score_episode(task: Task, episode: dict[str, Any]) -> dict[str, Any]:
    """Every applicable metric on one episode, merged into one dict."""
    out: dict[str, Any] = {}
    for metric in metrics_for(task.env):
        out.update(metric.fn()(task, episode))
    return out


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def mean_and_stderr(values: list[float]) -> tuple[float, float, int]:
    """Mean and standard error over the finite values (NaN = undefined, left out; spec_000 D7)."""
    xs = [float(v) for v in values if is_number(v) and math.isfinite(v)]
    n = len(xs)
    if n == 0:
        return math.nan, math.nan, 0
    mean = sum(xs) / n
    if n == 1:
        return mean, math.nan, 1
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    return mean, math.sqrt(var / n), n
