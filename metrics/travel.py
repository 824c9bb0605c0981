"""Metrics that travel: coverage, redundancy and the optimal-exploitation gap for every family.

docs/methods/envs.md#dark-treasure-rooms (docs/methods/metric-optimal-exploitation-gap.md#gap-decomposition, docs/methods/metric-optimal-exploitation-gap.md#rooms-exploration-statistics) defines state-space coverage, memory redundancy and the
gap decomposition for Dark Treasure Rooms; this module reports them, with the same key names,
for every other environment whose family defines them (its trace, below), so a report can set
the families side by side. Rooms itself keeps its own functions
(:mod:`clew.envs.rooms.metrics`), which already produce these keys.

Common shape (every family). Each registered function replays the episode record from its
actions, like the other metrics, so ``clew score`` works on trajectories produced anywhere:

* ``coverage`` in [0, 1]: the fraction of a finite state or query space the agent reached;
* ``redundancy`` in [0, 1]: the share of the agent's steps that led back to something it had
  already reached (NaN when it took no step);
* the gap decomposition of docs/methods/metric-optimal-exploitation-gap.md#gap-decomposition for one episode: ``rmax`` (R^max, best return with full
  knowledge), ``agent_return`` (R^agent), ``exploit_return`` (R^exploit, the best return a
  perfect exploiter could get from what the agent had found), ``gap_total = (R^max −
  R^agent) / R^max`` = ``gap_exploration`` (R^max − R^exploit) / R^max + ``gap_exploitation``
  (R^exploit − R^agent) / R^max, and ``share_exploration`` / ``share_exploitation`` (NaN when
  the total gap is 0). Gaps are NaN when R^max = 0 (nothing to gain).

Single-episode families [D]. In rooms the exploiter starts a fresh episode with the whole
history; the other families have one episode, so the exploiter is asked at every moment of it:
R^exploit = max over decision points t of V_t, where V_t is the best return reachable from the
agent's state at t, *within the budget left at t*, moving only through what was known at t.
A gap is then exploitation error exactly when at some moment the agent knew enough to finish in
time and did not; ``exploitable_at`` says when that first happened (NaN if never). The state
just before a successful last action always qualifies, so R^exploit >= R^agent by construction.

Per family, the definitions live with the family: each registry entry names a trace function
(:class:`clew.envs.registry.EnvEntry`, returning :class:`clew.envs.trace.Trace`), and its module
docstring defines coverage, redundancy and V_t there: :mod:`clew.envs.gridmap.trace`,
:mod:`clew.envs.textminigrid.trace`, :mod:`clew.envs.oracle_search.trace`. The metrics below
apply to every environment whose entry names a trace, a family registered from outside clew
included.

Each registered function returns only its own keys; the replay behind them is shared through a
one-entry cache, so scoring one episode replays it once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from clew.envs import registry
from clew.envs.base import Task
from clew.envs.measures import gap_decomposition
from clew.envs.trace import Trace

#: the keys taken from gap_decomposition (its *_mean and normalized_reward keys are left out:
#: one episode, and the families' own metrics report their reward)
GAP_KEYS = ("gap_total", "gap_exploration", "gap_exploitation", "share_exploration",
            "share_exploitation")


# =========================== registered functions ==========================================


def coverage_metrics(task: Task, episode: Mapping[str, Any]) -> dict[str, Any]:
    """``coverage`` (each family's definition is in its trace module)."""
    return {"coverage": trace(task, episode).coverage}


def redundancy_metrics(task: Task, episode: Mapping[str, Any]) -> dict[str, Any]:
    """``redundancy``, with its numerator and denominator."""
    t = trace(task, episode)
    return {"redundancy": t.redundancy, "redundant_steps": t.repeats, "counted_steps": t.steps}


def gap_metrics(task: Task, episode: Mapping[str, Any]) -> dict[str, Any]:
    """The one-episode gap decomposition (docs/methods/metric-optimal-exploitation-gap.md#gap-decomposition) with R^exploit as defined above."""
    t = trace(task, episode)
    gaps = gap_decomposition(t.rmax, [t.agent], [t.exploit])
    out: dict[str, Any] = {"rmax": t.rmax, "agent_return": t.agent, "exploit_return": t.exploit,
                           "exploitable_at": t.exploitable_at}
    out.update({key: gaps[key] for key in GAP_KEYS})
    return out


_cache: dict[str, Trace] = {}


def trace(task: Task, episode: Mapping[str, Any]) -> Trace:
    """The family's trace of ``episode`` on ``task`` (cached for the last episode asked for)."""
    if not isinstance(episode, Mapping):
        raise TypeError(f"travel metrics: the episode of task {task.id!r} must be a record "
                         f"(a dict), got {type(episode).__name__}")
    key = _cache_key(task, episode)
    if key not in _cache:
        fn = registry.trace_function(task.env)
        if fn is None:
            raise ValueError(f"travel metrics: no definition for environment {task.env!r} "
                             f"(defined for {', '.join(sorted(registry.traced_envs()))})")
        result = fn(task, episode)
        _cache.clear()
        _cache[key] = result
    return _cache[key]


def _cache_key(task: Task, episode: Mapping[str, Any]) -> str:
    steps = episode.get("steps")
    # what a replay reads of each step's info: TextMiniGrid's executed actions, runner steps
    executed = ([[(s.get("info") or {}).get(k) for k in
                  ("executed", "backtrack", "backtrack_error", "no_action")]
                 if isinstance(s, dict) else None for s in steps]
                if isinstance(steps, list) else None)
    return json.dumps([task.to_dict(), episode.get("actions"), episode.get("env_options"),
                       executed], sort_keys=True, default=str)
