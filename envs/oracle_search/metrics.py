"""Normalised best-found reward of HillSearch, TreeSearch and MaxSatSearch (docs/methods/metric-best-found.md#normalised-reward).

The episode is replayed from its actions (invalid attempts included, so the docs/methods/envs.md#query-protocol retry counters
replay too) on a fresh env of the task. Returned keys:

* ``normalized_reward`` — r = R / OPT, the figure every table of the paper reports;
* ``best_value`` (R, the best value any valid query returned; 0 if none) and ``optimum`` (OPT);
* ``valid_queries``, ``invalid_attempts``, ``ended_early`` (1 when the episode ended before the
  budget was spent: retries exhausted or STOP) — protocol health;
* ``simple_regret`` — 1 − r (docs/methods/metric-best-found.md#normalised-reward: not used by the paper, given for convenience);
* one family-specific indicator of having found the instance's key structure [D, not in the
  paper; for diagnosis]: ``needle_found`` (Hill: R > OPT/2; decoy peaks stay below 10 while the
  needle rises to 20), ``good_branch_found`` (Tree: some queried node lies below a good
  gateway), ``gold_satisfied`` (MaxSat: some query satisfied).

For repeated episodes of one task the reported statistic is the mean of r; over a set of
instances, the mean of per-instance means docs/methods/metric-best-found.md#normalised-reward.
"""

from __future__ import annotations

from typing import Any

from clew.envs.base import Task
from clew.envs.oracle_search.trace import make_env
from clew.envs.trace import Replay, classify, step_infos


def replay(task: Task, actions: list[str], infos: list[dict[str, Any]] | None = None):
    """The env after ``actions``; runner steps (a ``backtrack`` these envs refuse, a reply with
    no action) cost one step of the clock, as in the runner (:class:`clew.envs.trace.Replay`)."""
    env = make_env(task)
    env.reset(task)
    steps = classify([str(a) for a in actions], infos)
    runner = Replay(env, steps)
    for step in steps:
        if env.done:
            break
        runner.step(step)
    return env


def episode_metrics(task: Task, episode: dict[str, Any]) -> dict[str, Any]:
    actions = list(episode.get("actions", []))
    env = replay(task, actions, step_infos(episode, len(actions)))
    r = env.grade()
    out: dict[str, Any] = {
        "normalized_reward": r,
        "best_value": env.best_value,
        "optimum": env.optimum,
        "simple_regret": 1.0 - r,
        "valid_queries": env.state.steps,
        "invalid_attempts": env.state.invalid,
        "ended_early": 1.0 if env.ended in ("retries", "stop") else 0.0,
    }
    family = env.family
    if family == "hill":
        out["needle_found"] = 1.0 if env.best_value > env.optimum / 2 else 0.0
    elif family == "tree":
        out["good_branch_found"] = 1.0 if _good_branch(env) else 0.0
    elif family == "maxsat" and task.params.get("gold") is not None:
        gold = env.clauses[0]
        hit = any(all(bits[v] == str(b) for v, b in gold) for bits, _ in env.state.history)
        out["gold_satisfied"] = 1.0 if hit else 0.0
    return out


def _good_branch(env) -> bool:
    good = set((env.task.params.get("gateways") or {}).get("good", []))
    for node, _ in env.state.history:
        while node != env.root and env.parent[node] != env.root:
            node = env.parent[node]
        if node in good:
            return True
    return False
