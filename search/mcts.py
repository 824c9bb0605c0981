"""Monte Carlo tree search: pure helpers and one loop (``docs/methods/mcts.md``).

:func:`search` is the whole algorithm: simulations of select / step / expand / evaluate / backup
until a budget is spent or a leaf reaches the top of the value scale. How an interior edge is
chosen (``select_edge``) and what is executed afterwards (``decide``) are parameters, as in
mctx: :class:`MCTS` composes the loop with PUCT selection (``functools.partial``) and the most
visited root edge.

Decisions (``docs/methods/mcts.md#decisions``):

* Backup is the plain running mean, no discount. A leaf whose value is unknown (every value
  sample unreadable) backs up its parent's estimate (:func:`~clew.search.nodes.estimate`); when
  nothing is known yet the simulation is not backed up (counted in ``counters["unbacked"]``).
* The early stop at the top of the scale needs the leaf's own value from at least
  ``early_stop_min_parsed`` of readable samples.
* ``done`` is checked before the episode rules, so a goal reached on the last allowed step counts.
* The episode rules (step limit, invalid streak, repeat rule) come from the wrapped simulator:
  the tree's horizon is the runner's step limit minus the steps taken.
* Budget: one unit per simulation (the root expansion is free); also ``max_value_calls`` and
  ``time_budget_s``, checked between simulations.
* Observations are recorded when a child is first created; with ``reexecute_edges=True`` later
  simulations step the simulator again (replay) but keep the first text; with ``False`` each node
  keeps a snapshot and a simulation restores it instead (deterministic envs only).
* Ties everywhere go to the first edge in prior-rank order (strict ``>``).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Literal

from clew.search.algorithm import SearchConfig, SearchResult
from clew.search.nodes import (
    SearchHooks,
    budget_spent,
    estimate,
    evaluate_node,
    expand_node,
    may_stop_early,
    step_edge,
)
from clew.search.tree import Edge, Node, Tree
from pydantic import Field

SelectFn = Callable[[Node], Edge]
DecideFn = Callable[[Tree], list[Edge]]


class MCTSConfig(SearchConfig):
    """MCTS: PUCT constant and initial Q on top of :class:`SearchConfig`.

    ``q_init``: the Q an unvisited edge counts with in selection, a number or ``"parent"`` (the
    parent's value estimate, :func:`parent_value`; docs/methods/mcts.md#first-play-urgency).
    """

    algorithm: Literal["mcts"] = "mcts"
    c_puct: float = Field(1.0, ge=0)
    q_init: float | Literal["parent"] = 0.0
    reexecute_edges: bool = True


# --- pure functions ----------------------------------------------------------------------------
def puct_score(edge: Edge, ns: int, c_puct: float) -> float:
    """Q + U with the first-visit rule (U = c·P when the node was never visited)."""
    if ns == 0:
        u = c_puct * edge.prior
    else:
        u = c_puct * edge.prior * math.sqrt(ns) / (1 + edge.n)
    return edge.q + u


def parent_value(node: Node) -> float:
    """What ``q_init="parent"`` gives ``node``'s unvisited edges: V(node), or for the root (never
    evaluated) the mean of the values backed up through it so far."""
    if node.value is not None:
        return node.value
    return sum(e.n * e.q for e in node.edges) / node.ns if node.ns else 0.0


def select(node: Node, c_puct: float, q_init: float | str = 0.0) -> Edge:
    """The edge maximising Q + U; strict ``>`` in edge order, so the first edge wins ties.
    With ``q_init="parent"`` an unvisited edge counts with Q = :func:`parent_value`."""
    best, best_score = None, -math.inf
    fpu = parent_value(node) if q_init == "parent" else None
    for edge in node.edges:
        score = puct_score(edge, node.ns, c_puct)
        if fpu is not None and edge.n == 0:
            score += fpu - edge.q
        if score > best_score:
            best, best_score = edge, score
    if best is None:
        raise ValueError(f"node {node.node_id} has no edges to select from")
    return best


def backup(path: Sequence[Edge], value: float) -> None:
    """Running-mean backup of one leaf value along ``path``."""
    for edge in reversed(path):
        edge.q = (edge.n * edge.q + value) / (edge.n + 1)
        edge.n += 1
        edge.parent.ns += 1
        if edge.child is not None:
            edge.v_next = edge.child.value


def best_root_edge(root: Node) -> Edge:
    """Most visited root edge; ties by higher Q, then edge order ("robust child")."""
    best = None
    for edge in root.edges:
        if best is None or (edge.n, edge.q) > (best.n, best.q):
            best = edge
    if best is None:
        raise ValueError("the root has no edges")
    return best


def most_visited(tree: Tree) -> list[Edge]:
    """The default decision: the most visited root edge."""
    return [best_root_edge(tree.root)]


# --- the loop ----------------------------------------------------------------------------------
async def search(hooks: SearchHooks, root_obs: str | None, cfg: MCTSConfig, *,
                 select_edge: SelectFn, decide: DecideFn = most_visited,
                 clock: Callable[[], float] = time.perf_counter) -> SearchResult:
    """Build one tree from the root and choose (see the module docstring)."""
    t0 = clock()
    cached = not cfg.reexecute_edges
    hooks.to_root()
    tree = Tree.with_root(root_obs)
    if cached:
        tree.root.snap = hooks.snapshot()
    await expand_node(tree, tree.root, hooks, cfg, _stored_q(cfg))    # root expansion: free
    result: SearchResult | None = None
    try:
        while (stop := budget_spent(cfg, tree.counters, clock() - t0)) is None:
            path, leaf = await _simulate(tree, hooks, cfg, select_edge)
            value = estimate(leaf)              # an unknown value is never backed up as 0
            if value is not None:
                backup(path, value)
            else:
                tree.counters["unbacked"] = tree.counters.get("unbacked", 0) + 1
            if leaf.value is None and value is not None:
                leaf.info["backed_up_estimate"] = value
            tree.traversals.append([e.edge_id for e in path])
            tree.counters["simulations"] += 1
            if path and value is not None and may_stop_early(leaf, value, cfg):
                tree.counters["stopped_by"] = "value_one"
                result = SearchResult.of(tree, "path", path)
                break
        else:
            tree.counters["stopped_by"] = stop
        if result is None:
            result = SearchResult.of(tree, "single", decide(tree))
    finally:
        hooks.to_root()
        tree.counters["seconds"] = round(clock() - t0, 6)
    return result


async def _simulate(tree: Tree, hooks: SearchHooks, cfg: MCTSConfig,
                    select_edge: SelectFn) -> tuple[list[Edge], Node]:
    """One selection–expansion–evaluation pass; returns the path and its leaf."""
    cached = not cfg.reexecute_edges
    if not cached:
        hooks.to_root()
    node, path = tree.root, []
    while True:
        if node.terminal:
            if node.needs_eval and node.value is None:
                if cached:
                    hooks.restore(node.snap)
                await evaluate_node(tree, node, hooks)
            return path, node
        if not node.expanded:                         # first arrival at a leaf
            if cached:
                hooks.restore(node.snap)
            await expand_node(tree, node, hooks, cfg, _stored_q(cfg))
            await evaluate_node(tree, node, hooks)
            return path, node
        edge = select_edge(node)
        path.append(edge)
        child = edge.child
        if child is None:
            if cached:
                hooks.restore(node.snap)
            node = step_edge(tree, node, edge, hooks, cfg, keep_snapshot=cached)
        else:
            # a known child: replay its step unless it was never executed or snapshots stand in
            if not cached and not (child.terminal and child.terminal_reason in ("stop",
                                                                                "invalid")):
                hooks.apply(node, edge)
            node = child


def _stored_q(cfg: MCTSConfig) -> float:
    """The Q stored on a new edge (``"parent"`` is applied in :func:`select`)."""
    return 0.0 if cfg.q_init == "parent" else cfg.q_init


class MCTS:
    """The registered ``mcts`` algorithm: :func:`search` with PUCT selection."""

    Config = MCTSConfig

    def __init__(self, config: MCTSConfig, clock: Callable[[], float] = time.perf_counter):
        self.config = config
        self.clock = clock

    async def plan(self, hooks: SearchHooks, root_obs: str | None) -> SearchResult:
        return await search(hooks, root_obs, self.config,
                            select_edge=functools.partial(select, c_puct=self.config.c_puct,
                                                          q_init=self.config.q_init),
                            clock=self.clock)
