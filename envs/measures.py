"""The measures that the families' own metrics and the metrics that travel share.

The optimal exploiter (docs/methods/metric-optimal-exploitation-gap.md#generic-solver), for any deterministic, budgeted,
episodic MDP.
Describe what a history revealed as an explicit graph and ask for the best return a perfect
exploiter could get in one episode:

    graph = {state: [Edge(action, next, reward, cost={"doors": 1}, once=None), ...], ...}
    plan = optimal_exploitation(graph, start, budget={"doors": 8, "pickups": 3})
    plan.value, plan.actions          # R^exploit and one optimal action sequence

* ``state``: any hashable; states absent from ``graph`` have no known actions.
* ``Edge.cost``: resources the action uses (names must appear in ``budget``); an edge is
  allowed while every remaining amount covers its cost (``cost <= remaining``, so the last unit
  of budget can still be spent).
* ``Edge.once``: key of a one-time reward (a ball, a treasure): an edge whose key was already
  consumed in this episode is unavailable. Every edge must use some resource or have a
  ``once`` key, so plans are finite.
* ``terminal(state, remaining)`` (optional): states where the episode ends (e.g. pickups used up).
* Rewards are assumed >= 0: stopping is always allowed and worth 0.

It is a memoised DFS over (state, remaining budget, consumed once-keys), i.e. exact backward DP
on the acyclic augmented state space. :func:`known_graph` builds the graph from observed
transitions (s, a, r, s'). :func:`gap_decomposition` turns R^max, per-episode agent returns and
per-episode R^exploit into the normalised gaps and shares of docs/methods/metric-optimal-exploitation-gap.md#gap-decomposition, for any environment.

Aggregation over episodes: :func:`mean_and_stderr` (docs/methods/metric-explore-exploit-error.md#aggregation).

These live in ``envs`` so that a family's metric (in its folder) and ``clew.metrics`` both use
them: the layering of docs/architecture.md lets every layer import ``envs``, and ``envs`` nothing.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# --- the optimal exploiter on a known graph (docs/methods/metric-optimal-exploitation-gap.md#generic-solver) ---


@dataclass(frozen=True)
class Edge:
    """One known action: from its state, ``action`` leads to ``next`` with ``reward``."""

    action: Hashable
    next: Hashable
    reward: float = 0.0
    cost: Mapping[str, int] = field(default_factory=dict)
    once: Hashable | None = None


@dataclass(frozen=True)
class Plan:
    value: float
    actions: tuple = ()


def optimal_exploitation(
    graph: Mapping[Hashable, Sequence[Edge]],
    start: Hashable,
    budget: Mapping[str, int],
    terminal: Callable[[Hashable, Mapping[str, int]], bool] | None = None,
) -> Plan:
    """Best one-episode return on the known graph from ``start`` within ``budget`` (docs/methods/metric-optimal-exploitation-gap.md#generic-solver)."""
    names = tuple(sorted(budget))
    for state, edges in graph.items():
        for e in edges:
            extra = set(e.cost) - set(names)
            if extra:
                raise ValueError(f"edge {e.action!r} from {state!r} uses resource(s) "
                                 f"{sorted(extra)} that the budget {dict(budget)} lacks")
            if any(c < 0 for c in e.cost.values()):
                raise ValueError(f"edge {e.action!r} from {state!r} has a negative cost")
            if e.once is None and not any(e.cost.values()):
                raise ValueError(f"edge {e.action!r} from {state!r} uses no resource and is "
                                 "not one-time: plans could loop forever")
            if e.reward < 0:
                raise ValueError(f"edge {e.action!r} from {state!r} has a negative reward")
    costs = {id(e): tuple(e.cost.get(n, 0) for n in names)
             for edges in graph.values() for e in edges}
    memo: dict[tuple, Plan] = {}

    def value(state: Hashable, remaining: tuple[int, ...], used: frozenset) -> Plan:
        key = (state, remaining, used)
        if key in memo:
            return memo[key]
        best = Plan(0.0)
        if terminal is None or not terminal(state, dict(zip(names, remaining))):
            for e in graph.get(state, ()):
                if e.once is not None and e.once in used:
                    continue
                cost = costs[id(e)]
                if any(c > r for c, r in zip(cost, remaining)):
                    continue
                rest = value(e.next, tuple(r - c for r, c in zip(remaining, cost)),
                             used | {e.once} if e.once is not None else used)
                total = e.reward + rest.value
                if total > best.value:
                    best = Plan(total, (e.action, *rest.actions))
        memo[key] = best
        return best

    return value(start, tuple(int(budget[n]) for n in names), frozenset())


def known_graph(
    transitions: Iterable[tuple[Hashable, Hashable, float, Hashable]],
    cost: Callable[[Hashable, Hashable], Mapping[str, int]],
    once: Callable[[Hashable, Hashable], Hashable | None] = lambda s, a: None,
) -> dict[Hashable, list[Edge]]:
    """The known sub-MDP of observed transitions (s, a, r, s'); repeated ones are merged.

    A deterministic environment never shows two outcomes for one (s, a); if it does, the state
    is not Markov for this graph and that is an error naming the pair.
    """
    seen: dict[tuple, tuple] = {}
    graph: dict[Hashable, list[Edge]] = {}
    for s, a, r, s2 in transitions:
        if (s, a) in seen:
            if seen[(s, a)] != (r, s2):
                raise ValueError(f"known_graph: ({s!r}, {a!r}) was seen with two outcomes "
                                 f"{seen[(s, a)]} and {(r, s2)}; the environment is not "
                                 "deterministic in this state")
            continue
        seen[(s, a)] = (r, s2)
        graph.setdefault(s, []).append(Edge(a, s2, r, dict(cost(s, a)), once(s, a)))
    return graph


# --- the decomposition (docs/methods/metric-optimal-exploitation-gap.md#gap-decomposition) ---


def _mean(xs: Sequence[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return sum(xs) / len(xs) if xs else math.nan


def gap_decomposition(rmax: float, agent: Sequence[float],
                      exploit: Sequence[float]) -> dict[str, Any]:
    """Normalised gaps and shares per episode, at the last episode and averaged (docs/methods/metric-optimal-exploitation-gap.md#gap-decomposition).

    Keys without a suffix are the last episode ("Last Episode" columns); ``*_mean`` keys are
    means over the episodes ("Mean" columns; shares over the episodes where they are defined).

    ``agent[i]`` = R_i^LLM, ``exploit[i]`` = R_i^exploit after episode i (episode i included).
    Δ_total = Δ_explore + Δ_exploit holds by construction; shares are NaN where Δ_total = 0.
    """
    if len(agent) != len(exploit):
        raise ValueError(f"gap_decomposition: {len(agent)} agent returns but {len(exploit)} "
                         "exploitation returns")
    norm = rmax if rmax > 0 else math.nan
    total = [(rmax - a) / norm for a in agent]
    explore = [(rmax - x) / norm for x in exploit]
    exploit_gap = [(x - a) / norm for a, x in zip(agent, exploit)]
    d_total = [rmax - a for a in agent]
    share_exploit = [(x - a) / d if d > 0 else math.nan
                     for a, x, d in zip(agent, exploit, d_total)]
    share_explore = [(rmax - x) / d if d > 0 else math.nan for x, d in zip(exploit, d_total)]
    last = (lambda xs: xs[-1] if xs else math.nan)
    reward = [a / norm for a in agent]
    return {
        # headline = the last episode, the end of exploration (what π*_explore maximises)
        "gap_total": last(total), "gap_exploration": last(explore),
        "gap_exploitation": last(exploit_gap),
        "share_exploration": last(share_explore), "share_exploitation": last(share_exploit),
        "normalized_reward": last(reward),
        "gap_total_mean": _mean(total), "gap_exploration_mean": _mean(explore),
        "gap_exploitation_mean": _mean(exploit_gap),
        "share_exploration_mean": _mean(share_explore),
        "share_exploitation_mean": _mean(share_exploit),
        "normalized_reward_mean": _mean(reward),
        "share_undefined_episodes": sum(1 for d in d_total if d <= 0),
        "per_episode": {"gap_total": total, "gap_exploration": explore,
                        "gap_exploitation": exploit_gap},
    }


def redundancy(pairs: Sequence[Hashable], repeats: int = 0) -> float:
    """1 − distinct / total over (state, action) pairs (docs/methods/metric-optimal-exploitation-gap.md#rooms-exploration-statistics); NaN for an empty memory.
    ``repeats``: further steps that are repeats by definition (backtracks to a known state)."""
    total = len(pairs) + repeats
    return 1 - len(set(pairs)) / total if total else math.nan


def sample_efficiency(curve: Sequence[float], final: float, fraction: float = 0.9) -> float:
    """1-based step where ``curve`` first reaches ``fraction`` × ``final`` (NaN if final <= 0)."""
    if final <= 0:
        return math.nan
    for i, value in enumerate(curve, 1):
        if value >= fraction * final:
            return float(i)
    return math.nan


# --- distances --------------------------------------------------------------------------------
def distances(source: Hashable, neighbours: Callable[[Any], Iterable[Any]]) -> dict[Any, int]:
    """Breadth-first path lengths from ``source`` to every node it reaches, ``neighbours(node)``
    giving the next nodes in the order they are tried (the grid map's cells, the rooms' doors)."""
    dist = {source: 0}
    queue = deque([source])
    while queue:
        node = queue.popleft()
        for nxt in neighbours(node):
            if nxt not in dist:
                dist[nxt] = dist[node] + 1
                queue.append(nxt)
    return dist


# --- aggregation --------------------------------------------------------------------------------
def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def mean_and_stderr(values: list[float]) -> tuple[float, float, int]:
    """Mean and standard error over the finite values (NaN = undefined, left out; docs/methods/metric-explore-exploit-error.md#aggregation)."""
    xs = [float(v) for v in values if is_number(v) and math.isfinite(v)]
    n = len(xs)
    if n == 0:
        return math.nan, math.nan, 0
    mean = sum(xs) / n
    if n == 1:
        return mean, math.nan, 1
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    return mean, math.sqrt(var / n), n
