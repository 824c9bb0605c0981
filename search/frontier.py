"""Frontier searches: Tree-of-Thought BFS and DFS, and best-first (``docs/methods/baselines.md``).

One loop, :func:`frontier_search`, over a frontier of edges, each standing for the action
sequence from the root to it; the three algorithms differ only in the frontier they pass:
FIFO (BFS), LIFO (DFS) or a max-priority queue (best-first: priority = the value of the state
the edge would be applied in; the root's edges start at 0.5; ties go to the lower rank of the
root action the edge descends from, then the lower rank among its siblings, then insertion
order).

Each pop is one budget unit: the simulator is put back at the root, the sequence is replayed and
the popped edge's child is made and evaluated with the shared node steps
(:mod:`clew.search.nodes`). The best (score, sequence) over the whole search wins (strict ``>``,
so the earlier one keeps ties) and the **whole sequence** is the decision (kind ``sequence``).
The search stops on budget, an empty frontier, or a node at the top value.

The tree JSON is the same as for MCTS: each pop is one traversal, evaluated edges get N = 1 and
Q = the score, ``expansion_order`` lists the nodes whose children were proposed.

Decisions (``docs/methods/baselines.md#stop-candidates``):

* ``stop_eval="evaluate"``: a STOP candidate is judged by V like any node; ``"code"`` reproduces
  the original code's quirk (not evaluated; score = −priority: the parent's value, or 0.5).
* A node whose value is unknown (every value sample unreadable) scores its parent's estimate,
  the priority it was popped with (docs/methods/debate.md#unknown-values); the top of the scale
  stops the search only with enough readable samples (``early_stop_min_parsed``).
* DFS ``dfs_order="prior_first"``: children are pushed in reverse so the highest-prior child is
  explored first; ``"code"`` pushes them in prior order (lowest prior first).
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable
from typing import Literal, Protocol

from clew.search import nodes
from clew.search.algorithm import Configured, SearchConfig, SearchHooks, SearchResult
from clew.search.tree import Edge

ROOT_PRIORITY = 0.5    # priority of the root's edges, whose parent (the root) is never valued


class FrontierConfig(SearchConfig):
    """What the three frontier searches share."""

    stop_eval: Literal["evaluate", "code"] = "evaluate"


class BFSConfig(FrontierConfig):
    algorithm: Literal["bfs"] = "bfs"


class DFSConfig(FrontierConfig):
    algorithm: Literal["dfs"] = "dfs"
    dfs_order: Literal["prior_first", "code"] = "prior_first"


class BestFirstConfig(FrontierConfig):
    algorithm: Literal["best-first"] = "best-first"


# --- frontiers ---------------------------------------------------------------------------------
class Frontier(Protocol):
    def push(self, edges: list[Edge], priority: float) -> None: ...

    def pop(self) -> tuple[Edge, float]:
        """The next edge and its priority."""

    def __len__(self) -> int: ...


class QueueFrontier:
    """FIFO (BFS) or LIFO (DFS); ``reverse_push`` pushes siblings last-first, so a LIFO pops
    the highest-prior child first. An edge's priority is its parent's value."""

    def __init__(self, lifo: bool = False, reverse_push: bool = False) -> None:
        self.edges: deque[Edge] = deque()
        self.lifo, self.reverse_push = lifo, reverse_push

    def push(self, edges: list[Edge], priority: float) -> None:
        self.edges.extend(reversed(edges) if self.reverse_push else edges)

    def pop(self) -> tuple[Edge, float]:
        e = self.edges.pop() if self.lifo else self.edges.popleft()
        v = e.parent.value
        return e, (ROOT_PRIORITY if v is None else v)

    def __len__(self) -> int:
        return len(self.edges)


class PriorityFrontier:
    """Max-priority queue; ties: root-action rank, sibling rank, insertion order."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, int, int, Edge]] = []
        self.counter = itertools.count(1)
        self.root_rank: dict[int, int] = {}

    def push(self, edges: list[Edge], priority: float) -> None:
        for sib_rank, e in enumerate(edges):
            if e.parent.parent is None:
                self.root_rank[e.edge_id] = sib_rank
            heapq.heappush(self.heap, (-priority, self.root_rank.get(_root_edge(e).edge_id, 0),
                                       sib_rank, next(self.counter), e))

    def pop(self) -> tuple[Edge, float]:
        neg, _, _, _, e = heapq.heappop(self.heap)
        return e, -neg

    def __len__(self) -> int:
        return len(self.heap)


def _root_edge(edge: Edge) -> Edge:
    while edge.parent.incoming is not None:
        edge = edge.parent.incoming
    return edge


# --- the loop ----------------------------------------------------------------------------------
async def frontier_search(hooks: SearchHooks, root_obs: str | None, cfg: FrontierConfig,
                          frontier: Frontier,
                          clock: Callable[[], float] = time.perf_counter) -> SearchResult:
    """Pop, step, evaluate, push until a budget is spent (see the module docstring)."""
    best_score, best_edge = None, None
    # one pop at a time: each pop is a wave of its own
    async with nodes.planning(hooks, root_obs, cfg, clock, wave_size=1) as plan:
        tree = plan.tree
        frontier.push(list(tree.root.edges), ROOT_PRIORITY)
        while frontier and (stop := plan.spent()) is None:
            edge, priority = frontier.pop()
            tree.wave += 1
            tree.counters["simulations"] += 1
            path = edge.parent.path_edges()
            if not edge.is_none:
                nodes.replay(hooks, path)
            child = nodes.step_edge(tree, edge.parent, edge, hooks, cfg)
            if not child.needs_eval:
                score = child.value
            elif child.terminal_reason == "stop" and cfg.stop_eval == "code":
                child.needs_eval = False
                score = -priority
            else:
                score = await nodes.evaluate_node(tree, child, hooks)
                if score is None:           # unknown: the parent's estimate (the priority)
                    score = priority
                    child.info["backed_up_estimate"] = score
            edge.n, edge.q = 1, float(score)
            edge.v_next = child.value
            edge.parent.ns += 1
            tree.add_traversal(path + [edge])
            if best_score is None or score > best_score:
                best_score, best_edge = score, edge
            top = nodes.may_stop_early(child, score, cfg) if child.needs_eval else \
                score >= cfg.early_stop_value
            if top and not edge.is_none:
                tree.counters["stopped_by"] = "value_one"
                break
            if not child.terminal:
                await nodes.expand_node(tree, child, hooks, cfg)
                frontier.push(list(child.edges), score)
        else:
            tree.counters["stopped_by"] = "frontier_empty" if not frontier else stop
    if best_edge is None:                     # no budget at all: the top-prior root action
        best_edge = tree.root.edges[0]
    tree.meta["best_score"] = best_score
    return SearchResult.of(tree, "sequence", best_edge.parent.path_edges() + [best_edge])


class _FrontierAlgorithm(Configured):
    Config: type[FrontierConfig] = FrontierConfig

    def frontier(self) -> Frontier:
        raise NotImplementedError

    async def plan(self, hooks: SearchHooks, root_obs: str | None) -> SearchResult:
        return await frontier_search(hooks, root_obs, self.config, self.frontier(), self.clock)


class BFS(_FrontierAlgorithm):
    """Tree-of-Thought BFS (registered as ``bfs``)."""

    Config = BFSConfig

    def frontier(self) -> Frontier:
        return QueueFrontier()


class DFS(_FrontierAlgorithm):
    """Tree-of-Thought DFS (registered as ``dfs``)."""

    Config = DFSConfig

    def frontier(self) -> Frontier:
        return QueueFrontier(lifo=True, reverse_push=self.config.dfs_order == "prior_first")


class BestFirst(_FrontierAlgorithm):
    """Best-first search (registered as ``best-first``)."""

    Config = BestFirstConfig

    def frontier(self) -> Frontier:
        return PriorityFrontier()
