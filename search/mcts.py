"""Monte Carlo tree search: pure helpers and one loop (``docs/methods/mcts.md``).

:func:`search` is the whole algorithm: waves of simulations until a budget is spent or a leaf
reaches the top of the value scale. A wave selects up to ``wave_size`` (k) leaves one after the
other, each path carrying a virtual loss so the next selection looks elsewhere; steps the
simulator into each; sends all their expansions and evaluations to the model at once; and backs
the values up, in selection order, when they are all back. With k = 1 a wave is one simulation
and this is the sequential algorithm. With ``wave_pipeline`` the next wave is selected as soon as
this wave's expansions are back, and this wave's values are backed up once the next wave's
expansions are (``docs/methods/mcts.md#pipelined-waves``). How an interior edge is chosen
(``select_edge``) and what is executed afterwards (``decide``) are parameters, as in mctx:
:class:`MCTS` composes the loop with PUCT selection (``functools.partial``) and the most visited
root edge.

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
  ``time_budget_s``, checked between waves; a wave never takes more simulations (or, with
  ``max_value_calls``, more leaves) than are left.
* Observations are recorded when a child is first created; with ``reexecute_edges=True`` later
  simulations step the simulator again (replay) but keep the first text; with ``False`` each node
  keeps a snapshot and a simulation restores it instead (deterministic envs only).
* Ties everywhere go to the first edge in prior-rank order (strict ``>``).
* A new leaf's expansion and evaluation are asked at once (they are independent).
* Within a wave a leaf waiting for its calls takes no second simulation: the edge into it is
  closed for the rest of the wave and selection starts again from the root. Virtual loss is
  undone, not subtracted: the statistics get their exact earlier values back before any backup.
* Everything the tree records (node and edge ids, expansion and evaluation order, traversals)
  follows selection order, never the order in which answers return; pipelined too: each
  iteration applies this wave's edges, then the last wave's values, whenever they arrived.
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from clew.search.algorithm import Configured, SearchConfig, SearchHooks, SearchResult
from clew.search.nodes import (
    add_edges,
    cancel_all,
    follow,
    gather_all,
    may_stop_early,
    planning,
    propose,
    set_value,
    settle,
    step_edge,
    value_of,
)
from clew.search.tree import Edge, Node, Tree
from pydantic import Field

#: ``select_edge(node, edges=candidates) -> Edge``: candidates are ``node.edges`` in prior order,
#: less the edges closed in the current wave
SelectFn = Callable[..., Edge]
DecideFn = Callable[[Tree], list[Edge]]


class MCTSConfig(SearchConfig):
    """MCTS: PUCT constant and initial Q on top of :class:`SearchConfig`, and the waves.

    ``q_init``: the Q an unvisited edge counts with in selection, a number or ``"parent"`` (the
    parent's value estimate, :func:`parent_value`; docs/methods/mcts.md#first-play-urgency).
    Waves: ``wave_size`` (k) leaves selected per wave, each selected path adding
    ``virtual_loss`` pending visits to its edges, each counted in Q as ``virtual_value``
    (``None``: Q unchanged, only the visit counts grow) until the wave's selection ends
    (``docs/methods/mcts.md#leaf-parallel-waves``). ``wave_pipeline``: select the next wave
    once this wave's expansions are back, its paths keeping their virtual loss until its values
    are backed up, after the next wave's expansions (``docs/methods/mcts.md#pipelined-waves``)."""

    algorithm: Literal["mcts"] = "mcts"
    c_puct: float = Field(1.0, ge=0)
    q_init: float | Literal["parent"] = 0.0
    reexecute_edges: bool = True
    wave_size: int = Field(1, ge=1)
    wave_pipeline: bool = False
    virtual_loss: int = Field(1, ge=0)
    virtual_value: float | None = None


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


def select(node: Node, c_puct: float, q_init: float | str = 0.0,
           edges: Sequence[Edge] | None = None) -> Edge:
    """The edge maximising Q + U among ``edges`` (default: all of ``node``'s); strict ``>`` in
    edge order, so the first edge wins ties. With ``q_init="parent"`` an unvisited edge counts
    with Q = :func:`parent_value`."""
    best, best_score = None, -math.inf
    fpu = parent_value(node) if q_init == "parent" else None
    for edge in node.edges if edges is None else edges:
        score = puct_score(edge, node.ns, c_puct)
        if fpu is not None and edge.n == 0:
            score += fpu - edge.q
        if score > best_score:
            best, best_score = edge, score
    if best is None:
        raise ValueError(f"node {node.node_id} has no edges to select from")
    return best


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


# --- waves ------------------------------------------------------------------------------------
class VirtualLoss:
    """The paths selected so far in a wave, counted as ``visits`` pending visits on every edge
    (and its parent's Ns), each worth ``value`` in Q (``None``: Q is left alone and only the
    counts grow). :meth:`undo` puts back the exact statistics from before the wave."""

    def __init__(self, visits: int, value: float | None):
        self.visits, self.value = visits, value
        self.edges: dict[Edge, tuple[int, float]] = {}
        self.nodes: dict[Node, int] = {}

    def add(self, path: Sequence[Edge]) -> None:
        if not self.visits:
            return
        for edge in path:
            self.edges.setdefault(edge, (edge.n, edge.q))
            self.nodes.setdefault(edge.parent, edge.parent.ns)
            if self.value is not None:
                edge.q = (edge.n * edge.q + self.visits * self.value) / (edge.n + self.visits)
            edge.n += self.visits
            edge.parent.ns += self.visits

    def undo(self) -> None:
        for edge, (n, q) in self.edges.items():
            edge.n, edge.q = n, q
        for node, ns in self.nodes.items():
            node.ns = ns
        self.edges.clear()
        self.nodes.clear()


@dataclass
class Selected:
    """One simulation of a wave: its path, its leaf, the hooks its calls go through (``None``:
    the leaf's value is already known) and, once started, those calls."""

    path: list[Edge]
    leaf: Node
    hooks: SearchHooks | None = None
    expand: bool = False
    wave: int = 0
    proposals: asyncio.Future | None = None
    evaluation: asyncio.Future | None = None


def descend(root: Node, select_edge: SelectFn, waiting: set[Node],
            closed: set[Edge]) -> list[Edge] | None:
    """The edges from the root to the next leaf, by ``select_edge`` among the open edges of
    each node. An edge into a node in ``waiting`` (its calls are in this wave) is closed and
    the walk starts again; so is the edge into a node whose edges are all closed. ``None``
    when every root edge is closed."""
    node, path = root, []
    while node.expanded and not node.terminal:
        edges = [e for e in node.edges if e not in closed] if closed else node.edges
        if not edges:
            if not path:
                return None
            closed.add(path[-1])
            node, path = root, []
            continue
        edge = select_edge(node, edges=edges)
        path.append(edge)
        if edge.child is None:
            break
        if edge.child in waiting:
            closed.add(edge)
            node, path = root, []
            continue
        node = edge.child
    return path


def reach(tree: Tree, path: Sequence[Edge], hooks: SearchHooks, cfg: MCTSConfig) -> Node:
    """Put the shared simulator at the end of ``path`` and return its leaf, creating the last
    edge's child when it is new. Replays the path from the root, or, with cached snapshots,
    restores the parent's snapshot where a child is created."""
    cached = not cfg.reexecute_edges
    if not cached:
        hooks.to_root()
    for edge in path:
        node, child = edge.parent, edge.child
        if child is None:
            if cached:
                hooks.restore(node.snap)
            return step_edge(tree, node, edge, hooks, cfg, keep_snapshot=cached)
        if not cached:                     # a known child: replay its step (snapshots stand in)
            follow(hooks, edge)
    return path[-1].child


def committed(counters: dict[str, Any], pending: Sequence[Selected]) -> dict[str, Any]:
    """``counters`` with the simulations (and, at most, value calls) of a pipelined wave whose
    values are not back yet counted as spent."""
    if not pending:
        return counters
    return {**counters, "simulations": counters["simulations"] + len(pending),
            "value_calls": counters["value_calls"] + sum(s.hooks is not None for s in pending)}


def wave_width(cfg: MCTSConfig, counters: dict[str, Any]) -> int:
    """Simulations the next wave may select: k, capped by the simulations left and, with
    ``max_value_calls``, by the value calls left (each leaf costs at most one)."""
    width = min(cfg.wave_size, cfg.n_simulations - counters["simulations"])
    if cfg.max_value_calls is not None:
        width = min(width, cfg.max_value_calls - counters["value_calls"])
    return max(width, 1)


def select_wave(tree: Tree, hooks: SearchHooks, cfg: MCTSConfig, select_edge: SelectFn,
                width: int, pending: Sequence[Selected] = ()) -> list[Selected]:
    """Up to ``width`` simulations, selected one after the other under virtual loss; the calls
    of each new leaf get forked hooks when they overlap other calls (the shared simulator moves
    on to the next selection). ``pending``: the pipelined wave before, whose paths keep their
    virtual loss and whose unexpanded leaves wait for their values."""
    wave: list[Selected] = []
    waiting = {s.leaf for s in pending
               if s.hooks is not None and (s.leaf.terminal or not s.leaf.expanded)}
    closed: set[Edge] = set()
    loss = VirtualLoss(cfg.virtual_loss, cfg.virtual_value)
    fork = width > 1 or cfg.wave_pipeline
    try:
        for s in pending:
            loss.add(s.path)
        while len(wave) < width:
            path = descend(tree.root, select_edge, waiting, closed)
            if path is None:
                break
            leaf = reach(tree, path, hooks, cfg)
            expand = not leaf.terminal and not leaf.expanded
            if expand or (leaf.needs_eval and leaf.value is None):
                if not cfg.reexecute_edges:
                    hooks.restore(leaf.snap)
                waiting.add(leaf)
                wave.append(Selected(path, leaf, hooks.fork() if fork else hooks, expand,
                                     tree.wave))
            else:
                wave.append(Selected(path, leaf, wave=tree.wave))
            loss.add(path)
    finally:
        loss.undo()
    return wave


def start_calls(tree: Tree, wave: Sequence[Selected], cfg: MCTSConfig) -> None:
    """Every call of the wave started at once: each new leaf's expansion and evaluation are
    independent (same state; neither moves its simulator)."""
    for s in wave:
        if s.hooks is not None:
            if s.expand:
                s.proposals = asyncio.ensure_future(propose(tree, s.leaf, s.hooks, cfg))
            s.evaluation = asyncio.ensure_future(value_of(s.leaf, s.hooks))


def calls(wave: Sequence[Selected], proposals: bool = True,
          evaluations: bool = True) -> list[asyncio.Future]:
    """The started calls of ``wave``: its expansions, its evaluations, or both."""
    return [f for s in wave for f in ((s.proposals if proposals else None),
                                      (s.evaluation if evaluations else None)) if f is not None]


def add_wave_edges(tree: Tree, wave: Sequence[Selected], cfg: MCTSConfig) -> None:
    """The answered expansions of the wave become edges, in selection order."""
    for s in wave:
        if s.proposals is not None:
            add_edges(tree, s.leaf, s.proposals.result(), cfg.branching_factor, _stored_q(cfg))


def settle_wave(tree: Tree, wave: Sequence[Selected], cfg: MCTSConfig) -> list[Edge] | None:
    """The wave's values stored and backed up in selection order (an unknown value is never
    backed up as 0); the first path whose leaf reaches the top of the scale, if any."""
    top = None
    for s in wave:
        if s.evaluation is not None:
            set_value(tree, s.leaf, s.evaluation.result())
        value = settle(tree, s.path, s.leaf)
        tree.add_traversal(s.path, s.wave)
        tree.counters["simulations"] += 1
        if top is None and s.path and value is not None and may_stop_early(s.leaf, value, cfg):
            top = s.path
    return top


# --- the loop ----------------------------------------------------------------------------------
async def search(hooks: SearchHooks, root_obs: str | None, cfg: MCTSConfig, *,
                 select_edge: SelectFn, decide: DecideFn = most_visited,
                 clock: Callable[[], float] = time.perf_counter) -> SearchResult:
    """Build one tree from the root and choose (see the module docstring)."""
    wave: list[Selected] = []
    pending: list[Selected] = []      # wave_pipeline: the last wave, its values still out
    top: list[Edge] | None = None
    async with planning(hooks, root_obs, cfg, clock, q_init=_stored_q(cfg),
                        wave_size=cfg.wave_size, wave_pipeline=cfg.wave_pipeline,
                        root_snapshot=not cfg.reexecute_edges) as plan:
        tree = plan.tree
        try:
            while top is None:
                spent = committed(tree.counters, pending)
                if (stop := plan.spent(spent)) is not None:
                    break
                tree.wave += 1
                wave = select_wave(tree, hooks, cfg, select_edge, wave_width(cfg, spent), pending)
                start_calls(tree, wave, cfg)
                if cfg.wave_pipeline:
                    # the next wave needs this wave's edges and the last wave's values only
                    await gather_all(*calls(wave, evaluations=False),
                                     *calls(pending, proposals=False))
                    add_wave_edges(tree, wave, cfg)
                    top = settle_wave(tree, pending, cfg)
                    pending, wave = wave, []
                else:
                    await gather_all(*calls(wave))
                    add_wave_edges(tree, wave, cfg)
                    top = settle_wave(tree, wave, cfg)
            if pending:   # the last wave's values (after a value-one stop too: its calls were sent)
                await gather_all(*calls(pending, proposals=False))
                last = settle_wave(tree, pending, cfg)
                top, pending = top or last, []
            if top is not None:
                tree.counters["stopped_by"] = "value_one"
                return SearchResult.of(tree, "path", top)
            tree.counters["stopped_by"] = stop
            return SearchResult.of(tree, "single", decide(tree))
        finally:
            await cancel_all(calls([*wave, *pending]))    # no call outlives its search


def _stored_q(cfg: MCTSConfig) -> float:
    """The Q stored on a new edge (``"parent"`` is applied in :func:`select`)."""
    return 0.0 if cfg.q_init == "parent" else cfg.q_init


class MCTS(Configured):
    """The registered ``mcts`` algorithm: :func:`search` with PUCT selection."""

    Config = MCTSConfig

    async def plan(self, hooks: SearchHooks, root_obs: str | None) -> SearchResult:
        return await search(hooks, root_obs, self.config,
                            select_edge=functools.partial(select, c_puct=self.config.c_puct,
                                                          q_init=self.config.q_init),
                            clock=self.clock)
