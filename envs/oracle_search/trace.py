"""The oracle-search families' trace for the metrics that travel (HillSearch, TreeSearch,
MaxSatSearch; docs/methods/metric-travel.md).

* ``coverage`` = the queried share of a finite query space: TreeSearch, distinct queried nodes /
  (|V| − 1) (the root's value is given, it is not a query); MaxSatSearch, distinct assignments /
  2^n (tiny by design); HillSearch's query space [0, 10] is continuous [D]: coverage = the share
  of the :data:`HILL_BINS` intervals of width 0.1 (about one standard deviation of the
  instance's hills) holding a valid query.
* ``redundancy`` = repeated queries / well-formed query attempts, a repeat being a query whose
  answer was already known (TreeSearch: a queried node or the root, which the env refuses
  without charge; HillSearch and MaxSatSearch: the same x or bitstring again, which costs
  budget).
* Gap: R^max = OPT, R^agent = the best value found (the best-found score), and R^exploit =
  the best value observed: the episode's return *is* the best observed value, so whatever was
  observed has been exploited. The exploitation gap is 0 by definition and the whole gap is
  exploration (``gap_exploration = 1 − normalised reward``); ``exploitable_at`` is NaN (these
  tasks have no moment at which the agent "knew enough").
* These envs have no backtrack: a ``backtrack S<k>`` step is a refused runner step (one step
  of the clock, as in the runner), not a query attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clew.envs.base import Task
from clew.envs.oracle_search.hill import HillSearchEnv
from clew.envs.oracle_search.maxsat import MaxSatSearchEnv
from clew.envs.oracle_search.treesearch import TreeSearchEnv
from clew.envs.trace import Replay, Trace, ratio, record_steps

HILL_BINS = 100  # intervals of width 0.1 over [0, 10]


def trace(task: Task, episode: Mapping[str, Any]) -> Trace:
    env = make_env(task)
    env.reset(task)
    family = env.family
    asked: set[str] = {f"node={env.root}"} if family == "tree" else set()
    attempts = repeats = 0
    steps = record_steps(task, episode)
    replay = Replay(env, steps)
    for record_step in steps:
        if env.done:
            break
        canon = env.parse_action(record_step.action) if record_step.kind == "env" else None
        query = canon is not None and not env.is_stop(canon)
        if query:
            attempts += 1
            repeats += canon in asked
        step = replay.step(record_step)
        if query and step.valid:
            asked.add(canon)
    queries = [q for q, _ in env.state.history]
    if family == "tree":
        coverage = len(set(queries)) / (len(env.parent) - 1)
    elif family == "maxsat":
        coverage = len(set(queries)) / 2 ** env.n
    else:  # hill: share of the width-0.1 intervals of [0, 10] holding a query
        coverage = len({min(HILL_BINS - 1, int(x * HILL_BINS / 10)) for x in queries}) / HILL_BINS
    best = float(env.best_value)
    return Trace(coverage=coverage, redundancy=ratio(repeats, attempts), repeats=repeats,
                 steps=attempts, rmax=float(env.optimum), agent=best, exploit=best)


#: the family's envs by registry name (a replay builds its own: this module is named by the
#: registry, so it does not go through it)
ENV_CLASSES = {"hillsearch": HillSearchEnv, "treesearch": TreeSearchEnv,
               "maxsatsearch": MaxSatSearchEnv}


def make_env(task: Task):
    """A fresh env of ``task``'s kind."""
    return ENV_CLASSES[task.env]()
