"""A search algorithm that lives outside the package: one-step lookahead, built from the shared
node steps. Registered by tests/test_external_algorithm.py with one line."""

from __future__ import annotations

from typing import Literal

from clew.search.algorithm import SearchConfig, SearchResult
from clew.search.nodes import evaluate_node, expand_node, step_edge
from clew.search.tree import Tree


class GreedyConfig(SearchConfig):
    algorithm: Literal["greedy"] = "greedy"
    prefer_stop: bool = False        # an option only this algorithm reads


class Greedy:
    """Evaluate every child of the root once; execute the best."""

    Config = GreedyConfig

    def __init__(self, config: GreedyConfig):
        self.config = config

    async def plan(self, hooks, root_obs):
        hooks.to_root()
        tree = Tree.with_root(root_obs)
        await expand_node(tree, tree.root, hooks, self.config)
        best = None
        for edge in tree.root.edges:
            hooks.to_root()
            child = step_edge(tree, tree.root, edge, hooks, self.config)
            value = child.value if not child.needs_eval else \
                await evaluate_node(tree, child, hooks)
            edge.n, edge.q = 1, value
            tree.root.ns += 1
            tree.traversals.append([edge.edge_id])
            tree.counters["simulations"] += 1
            if best is None or value > best.q or (self.config.prefer_stop and edge.is_stop):
                best = edge
        hooks.to_root()
        tree.counters["stopped_by"] = "children_done"
        return SearchResult.of(tree, "single", [best])
