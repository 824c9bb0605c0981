"""Explore–exploit baselines of HillSearch, TreeSearch and MaxSatSearch (docs/methods/metric-best-found.md#explore-exploit-baselines).

A baseline sees what a model sees (docs/methods/metric-best-found.md#explore-exploit-baselines): the budget N, the public structure (TreeSearch: the
graph and its root, hence the parent relation) and the history of its own queries with the values
*as printed*. It reads them through the env's public accessors (``budget()``, ``history()``,
``frontier()``, ``known_values()``, ``parents()``, ``n``), never ``oracle()``. One query per
round, no early stop; the same oracle and budget as the models.

Randomness: one ``random.Random`` per episode, seeded from (agent seed, task seed, episode key),
so repeats of a task (keys ``id#0``, ``id#1``, ...) differ and every run is reproducible.

Decisions recorded here ([D] of docs/methods/metric-best-found.md#explore-exploit-baselines and docs/methods/metric-best-found.md#decisions):
* argmax ties: first occurrence (earliest query);
* Hill: the exploitation window is clipped to [0, 10]; with ``floor(α·N) = 0`` the first query
  (no best point yet) is uniform on [0, 10]; ``floor`` is taken with a 1e-9 tolerance so that
  0.8·60 gives 48 whatever the float rounding;
* Tree: τ = 0 is the greedy argmax of the parent value with a random tie-break;
* MaxSat: with ``floor(α·N) = 0`` the first query is uniform; a flip may re-query a seen
  assignment (allowed, it costs budget).
"""

from __future__ import annotations

import math
import random

from clew.agents.base import BaseAgent, Decision, Episode
from clew.agents.seeds import keyed_rng
from clew.envs.base import Env

#: the env families (Env.family) of the oracle-search envs these baselines play
FAMILIES = ("hill", "tree", "maxsat")


def episode_rng(agent_seed: int, episode: Episode, slot: str = "rng") -> random.Random:
    rng = episode.scratch.get(slot)
    if rng is None:
        rng = episode.scratch[slot] = keyed_rng(agent_seed, episode.task.seed, episode.key)
    return rng


def n_explore(alpha: float, budget: int) -> int:
    return math.floor(alpha * budget + 1e-9)


def first_argmax(history: list[tuple[object, float]]) -> object:
    best_q, best_v = history[0]
    for q, v in history[1:]:
        if v > best_v:
            best_q, best_v = q, v
    return best_q


def _check_env(episode: Episode, env_name: str, agent: str) -> None:
    if episode.task.env != env_name:
        raise ValueError(f"{agent} plays {env_name}, not {episode.task.env!r} "
                         f"(use 'explore-exploit' to dispatch by env)")


class HillBaseline(BaseAgent):
    """Algorithm 1: stratified exploration of floor(α·N) strata left to right, then uniform
    samples in a window of width (R − L)·β around the best point so far."""

    name = "hill-baseline"
    kind = "heuristic"

    def __init__(self, alpha: float = 0.8, beta: float = 0.05, seed: int = 0,
                 lo: float = 0.0, hi: float = 10.0):
        if not 0 <= alpha <= 1 or beta < 0:
            raise ValueError(f"hill-baseline: need 0 <= alpha <= 1 and beta >= 0, got "
                             f"alpha={alpha}, beta={beta}")
        self.alpha, self.beta, self.seed, self.lo, self.hi = alpha, beta, seed, lo, hi

    async def act(self, episode: Episode) -> Decision:
        _check_env(episode, "hillsearch", self.name)
        return Decision(f"x={self.next_x(episode)!r}")

    def next_x(self, episode: Episode) -> float:
        env, rng = episode.env, episode_rng(self.seed, episode)
        history = env.history()
        t, explore = len(history), n_explore(self.alpha, env.budget())
        lo, hi = self.lo, self.hi
        if t < explore:
            delta = (hi - lo) / explore
            return rng.uniform(lo + t * delta, lo + (t + 1) * delta)
        if not history:
            return rng.uniform(lo, hi)
        x_best = float(first_argmax(history))
        half = (hi - lo) * self.beta / 2
        return min(hi, max(lo, rng.uniform(x_best - half, x_best + half)))


class TreeBaseline(BaseAgent):
    """Algorithm 2: sample a frontier node with probability ∝ exp(parent value / τ)."""

    name = "tree-baseline"
    kind = "heuristic"

    def __init__(self, tau: float = 4.0, seed: int = 0):
        if tau < 0:
            raise ValueError(f"tree-baseline: tau must be >= 0, got {tau}")
        self.tau, self.seed = tau, seed

    async def act(self, episode: Episode) -> Decision:
        _check_env(episode, "treesearch", self.name)
        return Decision(f"node={self.next_node(episode)}")

    def next_node(self, episode: Episode) -> int:
        env, rng = episode.env, episode_rng(self.seed, episode)
        frontier = env.frontier()
        if not frontier:
            raise RuntimeError(f"tree-baseline: no queryable node in task {episode.task.id!r}")
        known, parent = env.known_values(), env.parents()
        scores = [known[parent[u]] for u in frontier]
        top = max(scores)
        if self.tau == 0:
            return rng.choice([u for u, s in zip(frontier, scores) if s == top])
        weights = [math.exp((s - top) / self.tau) for s in scores]
        return rng.choices(frontier, weights=weights)[0]


class MaxSatBaseline(BaseAgent):
    """Algorithm 3: floor(α·N) uniform assignments, then one random bit flip of the best."""

    name = "maxsat-baseline"
    kind = "heuristic"

    def __init__(self, alpha: float = 0.5, seed: int = 0):
        if not 0 <= alpha <= 1:
            raise ValueError(f"maxsat-baseline: alpha must be in [0, 1], got {alpha}")
        self.alpha, self.seed = alpha, seed

    async def act(self, episode: Episode) -> Decision:
        _check_env(episode, "maxsatsearch", self.name)
        return Decision(f"bits={self.next_bits(episode)}")

    def next_bits(self, episode: Episode) -> str:
        env, rng = episode.env, episode_rng(self.seed, episode)
        history = env.history()
        if len(history) < n_explore(self.alpha, env.budget()) or not history:
            return "".join(rng.choice("01") for _ in range(env.n))
        bits = list(str(first_argmax(history)))
        k = rng.randrange(env.n)
        bits[k] = "1" if bits[k] == "0" else "0"
        return "".join(bits)


class ExploreExploit(BaseAgent):
    """The docs/methods/metric-best-found.md#explore-exploit-baselines baseline of whichever family the episode belongs to, with the paper's parameters
    unless given (``hill_alpha``, ``hill_beta``, ``tree_tau``, ``maxsat_alpha``)."""

    name = "explore-exploit"
    kind = "heuristic"

    def __init__(self, hill_alpha: float = 0.8, hill_beta: float = 0.05, tree_tau: float = 4.0,
                 maxsat_alpha: float = 0.5, seed: int = 0):
        self.by_env = {
            "hillsearch": HillBaseline(hill_alpha, hill_beta, seed),
            "treesearch": TreeBaseline(tree_tau, seed),
            "maxsatsearch": MaxSatBaseline(maxsat_alpha, seed),
        }

    async def act(self, episode: Episode) -> Decision:
        try:
            agent = self.by_env[episode.task.env]
        except KeyError:
            raise ValueError(f"explore-exploit has no baseline for env {episode.task.env!r}; "
                             f"it plays {', '.join(self.by_env)}") from None
        return await agent.act(episode)


class RandomQuery(BaseAgent):
    """Uniformly random valid queries: x ~ U[0, 10], a uniform frontier node, uniform bits."""

    name = "random-query"
    kind = "heuristic"

    def __init__(self, seed: int = 0):
        self.seed = seed

    async def act(self, episode: Episode) -> Decision:
        return Decision(random_query(episode.env, episode_rng(self.seed, episode)))


def random_query(env: Env, rng: random.Random) -> str:
    """One uniformly random valid query of an oracle-search env (``Env.random_action``)."""
    query = env.random_action(rng)
    if query is None:
        raise ValueError(f"random-query plays envs that draw random queries (the oracle-search "
                         f"families {', '.join(FAMILIES)}), not {env.name!r}")
    return query
