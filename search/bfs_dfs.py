"""Tree-of-Thought BFS and DFS over the search roles (spec_002 §5.1, §5.3).

A frontier of edges (each standing for the action sequence from the tree root to it) is popped
in FIFO (BFS) or LIFO (DFS) order. Each pop is one budget unit: the simulator is put back at the
root, the sequence is replayed, the last action applied and the reached node evaluated; the best
(score, sequence) over the whole search wins (strict ``>``, so the earlier one keeps ties) and the
agent commits the **whole sequence** (decision kind ``sequence``). The search stops on budget,
empty frontier or a node at the top value.

The frontier search records the same tree JSON as MCTS: each pop is one traversal (the edge ids
from the root to the popped edge), evaluated edges get N = 1 and Q = V(child), and
``expansion_order`` lists the nodes whose children were proposed.

Decisions:

* ``stop_eval="evaluate"`` (D17): a STOP candidate is judged by V like any node; ``"code"``
  reproduces the code's quirk (not evaluated; score = −priority, the parent's value or 0.5).
* ``dfs_order="prior_first"`` (D17): children are pushed in reverse so the highest-prior child is
  explored first; ``"code"`` pushes them in prior order (lowest prior first).
* Horizon / invalid-streak rules and ``max_depth_actions`` bound expansion as in MCTS; horizon
  nodes get value 0 unevaluated in ``horizon_value="zero"`` mode.
* Root expansion is free; one unit per pop (D32); ``max_value_calls`` and ``time_budget_s``
  apply as in MCTS.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from typing import Any

from clew.search.mcts import Limits, MCTSConfig, add_edges, budget_spent, early_stop_reason
from clew.search.tree import Edge, Node, Tree


class FrontierSearch:
    """``order``: ``bfs`` | ``dfs`` | ``best`` (best-first, spec_002 §5.4)."""

    def __init__(self, config: MCTSConfig, order: str = "bfs", stop_eval: str = "evaluate",
                 dfs_order: str = "prior_first", clock=time.perf_counter):
        if order not in ("bfs", "dfs", "best"):
            raise ValueError(f"frontier order must be bfs|dfs|best, got {order!r}")
        if stop_eval not in ("evaluate", "code"):
            raise ValueError(f"stop_eval must be evaluate|code, got {stop_eval!r}")
        if dfs_order not in ("prior_first", "code"):
            raise ValueError(f"dfs_order must be prior_first|code, got {dfs_order!r}")
        self.cfg, self.order, self.stop_eval, self.dfs_order = config, order, stop_eval, dfs_order
        self.clock = clock

    # --- frontier ------------------------------------------------------------------------
    def _push(self, frontier: Any, edges: list[Edge], priority: float, root_rank: dict[int, int],
              counter: list[int]) -> None:
        if self.order == "bfs":
            frontier.extend(edges)
        elif self.order == "dfs":
            frontier.extend(reversed(edges) if self.dfs_order == "prior_first" else edges)
        else:
            for sib_rank, e in enumerate(edges):
                counter[0] += 1
                rr = root_rank.get(e.edge_id, root_rank.get(_root_edge(e).edge_id, 0))
                heapq.heappush(frontier, (-priority, rr, sib_rank, counter[0], e))

    def _pop(self, frontier: Any) -> tuple[Edge, float]:
        if self.order == "bfs":
            e = frontier.popleft()
        elif self.order == "dfs":
            e = frontier.pop()
        else:
            neg, _, _, _, e = heapq.heappop(frontier)
            return e, -neg
        parent_v = e.parent.value
        return e, (0.5 if parent_v is None else parent_v)

    # --- budget --------------------------------------------------------------------------
    def _stop(self, tree: Tree, t0: float) -> str | None:
        return budget_spent(self.cfg, tree.counters, self.clock() - t0)

    async def _expand(self, hooks: Any, tree: Tree, node: Node) -> None:
        proposals: list = []
        for _ in range(self.cfg.max_expand_attempts):
            tree.counters["policy_calls"] += 1
            proposals = list(await hooks.expand(node))
            if proposals:
                break
        add_edges(tree, node, proposals, self.cfg.branching_factor, self.cfg.q_init)

    async def _evaluate(self, hooks: Any, tree: Tree, node: Node) -> float:
        ev = await hooks.evaluate(node)
        node.value, node.value_record = float(ev.value), ev.record
        if not ev.cached:
            tree.counters["value_calls"] += 1
        tree.eval_order.append(node.node_id)
        return node.value

    # --- the search ----------------------------------------------------------------------
    async def plan(self, hooks: Any, root_obs: str | None,
                   limits: Limits | None = None) -> tuple[str, list[Edge], Tree]:
        limits = limits or Limits()
        t0 = self.clock()
        hooks.to_root()
        tree = Tree.with_root(root_obs)
        await self._expand(hooks, tree, tree.root)           # free
        root_rank = {e.edge_id: i for i, e in enumerate(tree.root.edges)}
        counter = [0]
        frontier: Any = deque() if self.order != "best" else []
        self._push(frontier, list(tree.root.edges), 0.5, root_rank, counter)
        best_score, best_edge = None, None
        try:
            while frontier and (stop := self._stop(tree, t0)) is None:
                edge, priority = self._pop(frontier)
                tree.counters["simulations"] += 1
                path = edge.parent.path_edges() + [edge]
                child = tree.new_node(edge.parent, edge)
                expandable = False
                if edge.is_none:
                    child.terminal, child.terminal_reason = True, "invalid"
                    child.needs_eval, child.value = False, 0.0
                    score = 0.0
                elif edge.is_stop:
                    child.terminal, child.terminal_reason, child.obs = True, "stop", edge.parent.obs
                    self._goto(hooks, path[:-1])
                    if self.stop_eval == "evaluate":
                        score = await self._evaluate(hooks, tree, child)
                    else:
                        child.needs_eval = False
                        score = -priority
                else:
                    self._goto(hooks, path[:-1])
                    tr = hooks.apply(edge.parent, edge)
                    child.obs, child.info = tr.obs, {"valid": tr.valid, **tr.info}
                    reason = None if tr.done else early_stop_reason(child, limits)
                    if tr.done:
                        child.terminal, child.terminal_reason = True, "env_done"
                    elif reason:
                        child.terminal, child.terminal_reason = True, reason
                    elif child.depth >= self.cfg.max_depth_actions:
                        child.terminal, child.terminal_reason = True, "depth"
                    else:
                        expandable = True
                    if reason and self.cfg.horizon_value == "zero":
                        child.needs_eval, child.value = False, 0.0
                        score = 0.0
                    else:
                        score = await self._evaluate(hooks, tree, child)
                edge.n, edge.q = 1, float(score)
                edge.v_next = child.value
                edge.parent.ns += 1
                tree.traversals.append([e.edge_id for e in path])
                if best_score is None or score > best_score:
                    best_score, best_edge = score, edge
                if score >= self.cfg.early_stop_value and not edge.is_none:
                    tree.counters["stopped_by"] = "value_one"
                    break
                if expandable:
                    await self._expand(hooks, tree, child)
                    self._push(frontier, list(child.edges), score, root_rank, counter)
            else:
                tree.counters["stopped_by"] = "frontier_empty" if not frontier else stop
        finally:
            hooks.to_root()
            tree.counters["seconds"] = round(self.clock() - t0, 6)
        if best_edge is None:                     # no budget at all: the top-prior root action
            best_edge = tree.root.edges[0]
        edges = best_edge.parent.path_edges() + [best_edge]
        tree.decision_kind = "sequence"
        tree.decision_edges = [e.edge_id for e in edges]
        tree.meta["best_score"] = best_score
        return "sequence", edges, tree

    def _goto(self, hooks: Any, path: list[Edge]) -> None:
        """Root, then replay ``path`` (spec_002 §5.3: restore + replay)."""
        hooks.to_root()
        for e in path:
            hooks.apply(e.parent, e)


def _root_edge(edge: Edge) -> Edge:
    while edge.parent.incoming is not None:
        edge = edge.parent.incoming
    return edge


def make_tot_bfs(**options: Any):
    """``tot-bfs``: Tree-of-Thought BFS with the SA value (spec_002 §5.3)."""
    return _make("tot-bfs", "bfs", options)


def make_tot_dfs(**options: Any):
    """``tot-dfs``: Tree-of-Thought DFS, highest prior first by default (spec_002 §5.3)."""
    return _make("tot-dfs", "dfs", options)


def _make(name: str, order: str, options: dict[str, Any]):
    from clew.search.rmcts import build_search_agent

    opts = dict(options)
    stop_eval = opts.get("stop_eval", "evaluate")
    dfs_order = opts.get("dfs_order", "prior_first")
    agent = build_search_agent(name, opts, defaults={"value": {"kind": "single"},
                                                     "reflection": False})
    agent.algorithm = FrontierSearch(agent.config.search, order, stop_eval, dfs_order)
    return agent
