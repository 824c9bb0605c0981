"""Best-of-N: sample N episodes in the simulator, execute the first action of the best one
(``docs/methods/best-of-n.md``).

Each simulation (one budget unit) walks from the root to a terminal node, drawing at every node
one of its edges with probability proportional to its prior, i.e. one of the policy's sampled
completions; the walk ends where the shared node steps (:mod:`clew.search.nodes`) make a node
terminal: the env ends the episode, an episode rule cuts it, a STOP or NONE edge, or
``max_depth_actions``. Only that last node is scored by V. The best episode by that score wins
(strict ``>``: the earlier episode keeps a tie) and its first edge is the decision (kind
``single``); the agent searches again at the next real step.

Walks share the tree: a node is expanded (one policy call) the first time a walk reaches it and
later walks draw from its stored edges, and a terminal node already scored is not asked again
(a duplicate episode still costs its unit, as in plain best-of-N). Edge statistics are the
running mean of the episode scores through the edge (:func:`clew.search.nodes.backup`), so the
viewer and the EL exporter read the tree like an MCTS tree.

Decisions (``docs/methods/best-of-n.md#decisions``):

* An episode whose final value is unknown (every value sample unreadable) scores the estimate
  MCTS would back up (:func:`~clew.search.nodes.estimate`: here the mean of the episodes scored
  so far, since walks value only their last node), so it never beats a known better one; with
  nothing known yet it is not scored (``counters["unbacked"]``).
* An episode whose final node reaches ``early_stop_value`` (from enough readable samples) stops
  the search; its whole path is the decision (kind ``path``), as in MCTS.
* The draws come from :func:`~clew.search.algorithm.search_rng`, so a seeded agent replays.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Literal

from clew.search.algorithm import Configured, SearchConfig, SearchHooks, SearchResult, search_rng
from clew.search.nodes import (
    evaluate_node,
    expand_node,
    follow,
    may_stop_early,
    planning,
    settle,
    step_edge,
)
from clew.search.tree import Edge, Node, Tree


class BestOfNConfig(SearchConfig):
    """Best-of-N: ``n_simulations`` is N, the number of sampled episodes."""

    algorithm: Literal["best-of-n"] = "best-of-n"


def draw_edge(node: Node, rng: random.Random) -> Edge:
    """One edge of ``node``, with probability proportional to its prior (the first edge when
    no prior is positive, e.g. a lone NONE edge)."""
    weights = [max(e.prior, 0.0) for e in node.edges]
    if not node.edges:
        raise ValueError(f"node {node.node_id} has no edges to draw from")
    if sum(weights) <= 0:
        return node.edges[0]
    return rng.choices(node.edges, weights=weights)[0]


async def sample_episode(tree: Tree, hooks: SearchHooks, cfg: SearchConfig,
                         rng: random.Random) -> tuple[list[Edge], Node]:
    """One walk from the root to a terminal node, expanding what it meets; the last node is
    evaluated (unless its value is known). Returns the path and that node."""
    hooks.to_root()
    node, path = tree.root, []
    while not node.terminal:
        if not node.expanded:
            await expand_node(tree, node, hooks, cfg)
        edge = draw_edge(node, rng)
        path.append(edge)
        if edge.child is None:
            node = step_edge(tree, node, edge, hooks, cfg)
            continue
        follow(hooks, edge)
        node = edge.child
    if node.needs_eval and node.value is None:
        await evaluate_node(tree, node, hooks)
    return path, node


async def best_of_n(hooks: SearchHooks, root_obs: str | None, cfg: BestOfNConfig,
                    clock: Callable[[], float] = time.perf_counter) -> SearchResult:
    """Sample episodes until a budget is spent; see the module docstring."""
    rng = search_rng(hooks, cfg.algorithm, root_obs)
    best: tuple[float, list[Edge]] | None = None
    async with planning(hooks, root_obs, cfg, clock) as plan:
        tree = plan.tree
        while (stop := plan.spent()) is None:
            path, leaf = await sample_episode(tree, hooks, cfg, rng)
            tree.add_traversal(path)
            tree.counters["simulations"] += 1
            score = settle(tree, path, leaf)    # unknown is never 0 (module docstring)
            if score is None:
                continue
            if best is None or score > best[0]:
                best = (score, path)
            if may_stop_early(leaf, score, cfg):
                tree.counters["stopped_by"] = "value_one"
                result = SearchResult.of(tree, "path", path)
                break
        else:
            tree.counters["stopped_by"] = stop
            first = best[1][0] if best is not None else tree.root.edges[0]
            result = SearchResult.of(tree, "single", [first])
    tree.meta["best_score"] = None if best is None else best[0]
    return result


class BestOfN(Configured):
    """The registered ``best-of-n`` algorithm."""

    Config = BestOfNConfig

    async def plan(self, hooks: SearchHooks, root_obs: str | None) -> SearchResult:
        return await best_of_n(hooks, root_obs, self.config, self.clock)
