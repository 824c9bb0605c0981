"""What a family gives the metrics that travel: one replayed episode, summarised (a Trace).

Coverage, redundancy and the optimal-exploitation gap decomposition have one meaning everywhere
but a different definition per family (docs/methods/metric-travel.md): what the "state space"
is, what counts as returning to a known state, what a perfect exploiter could have done with
what the agent knew. Each family answers those questions in a trace function,
``trace(task, episode) -> Trace``, in its own folder (``clew.envs.gridmap.trace``, ...), named
by its registry entry (:class:`clew.envs.registry.EnvEntry`). ``clew.eval.metrics.travel`` turns
a trace into the reported keys; a new family with a trace gets those metrics with no change
there.

The type lives here, in ``envs``, because envs may not import ``eval`` (the layering of
docs/architecture.md) while eval reads what envs return; it is kept out of
:mod:`clew.envs.base` because only families that define these measures need it, not every env.

The ``episode`` a trace reads is an episode record as ``episodes.jsonl`` holds it, or as
``clew score`` builds it: ``actions`` (list of strings; required), and when present ``steps``
(each with the env's step ``info``) and ``env_options`` (the env's constructor options). A
trace replays the actions on a fresh env of the task, so it scores trajectories produced
anywhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from clew.envs.base import Task

NAN = math.nan


@dataclass
class Trace:
    """One episode as the metrics that travel need it. A value a family cannot define is NaN,
    and the family's trace docstring says why (e.g. the gap of non-PickUp TextMiniGrid
    missions); NaN is reported as "undefined", never as 0.

    * ``coverage`` in [0, 1]: the share of a finite state (or query) space the agent reached.
    * ``redundancy`` in [0, 1] = ``repeats`` / ``steps``: the share of counted steps that led
      back to something already reached (NaN when no step counted).
    * ``rmax`` (R^max: the best return with full knowledge), ``agent`` (R^agent, the return
      obtained) and ``exploit`` (R^exploit: the best return a perfect exploiter could get from
      what the agent knew); ``exploitable_at``: the first decision point at which that return
      was within reach (NaN if never).
    """

    coverage: float
    redundancy: float
    repeats: int
    steps: int
    rmax: float
    agent: float
    exploit: float
    exploitable_at: float = NAN


def record_actions(task: Task, episode: Mapping[str, Any]) -> list[str]:
    """The actions of an episode record (``actions``, else each step's ``action``)."""
    actions = episode.get("actions")
    if actions is None and isinstance(episode.get("steps"), list):
        actions = [s.get("action") for s in episode["steps"]]
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise ValueError(f"travel metrics: the episode of task {task.id!r} needs 'actions', "
                         "a list of strings")
    return actions


def ratio(num: int, den: int) -> float:
    """``num / den``, NaN when nothing was counted."""
    return num / den if den else NAN
