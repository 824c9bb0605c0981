"""AB-MCTS-A: adaptive-branching tree search with Thompson sampling between widening a node and
going deeper into one of its children (``docs/methods/ab-mcts.md``).

Every simulation (one budget unit) adds exactly one node to the tree. It starts at the root; at
each node it chooses between

* **GEN** (wider): create the node's next child, i.e. step its highest-prior edge that has no
  child yet (expanding the node with one policy call the first time), and score the child by V;
* **CONT** (deeper): move into one of the node's existing children and choose again there.

Each node keeps three kinds of score sets, all made of the scores of the nodes created since the
tree began: GEN(s) = the scores of the children created at s; CONT(s) = the scores of the nodes
created anywhere below the children of s; and, for each child c, its own score plus the scores
created below c. Each set has a Gaussian posterior with unknown mean and variance (a
normal-inverse-chi-squared prior: ``prior_mean``, ``prior_kappa``, ``prior_nu``,
``prior_tau2``). The choice is Thompson sampling: one draw of the mean from GEN's posterior and
one from CONT's, the larger wins (CONT needs a strict ``>``); after CONT, one draw per child
picks the child. GEN is unavailable once all of a node's edges have children; a child is
unavailable once its subtree has nothing left to create (terminal, or every edge below used).
When the root has nothing left the search stops (``tree_exhausted``).

Decision: the first edge toward the node with the highest own value found (kind ``single``;
ties go to the earlier node); a new node at ``early_stop_value`` (from enough readable value
samples) stops the search and its path is the decision (kind ``path``), as in MCTS.

Decisions (``docs/methods/ab-mcts.md#what-differs-from-the-paper``):

* "Generate a new answer" is the next distinct action of the node's policy call in prior order
  (one call samples many completions and merges them by action), so a node has at most
  ``branching_factor`` children.
* A node's value replaces the paper's answer score; an unknown value (every sample unreadable)
  is replaced by the estimate MCTS backs up (:func:`~clew.search.nodes.estimate`), never 0; with
  nothing known yet the score is left out of every posterior (``counters["unbacked"]``).
* Edge N and Q are kept as in MCTS (running mean of the scores created below the edge) so the
  viewer and the EL exporter read the tree as usual; they play no part in the choice.
* The draws come from :func:`~clew.search.algorithm.search_rng`, so a seeded agent replays.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from clew.search.algorithm import Configured, SearchConfig, SearchHooks, SearchResult, search_rng
from clew.search.nodes import (
    evaluate_node,
    expand_node,
    may_stop_early,
    planning,
    replay,
    settle,
    step_edge,
)
from clew.search.tree import Edge, Node, Tree
from pydantic import Field


class ABMCTSConfig(SearchConfig):
    """AB-MCTS-A: the normal-inverse-chi-squared prior of every score set (TreeQuest's default
    Gaussian prior: mean 0, kappa 1, nu 1, tau^2 0.1)."""

    algorithm: Literal["ab-mcts"] = "ab-mcts"
    prior_mean: float = 0.0
    prior_kappa: float = Field(1.0, gt=0)
    prior_nu: float = Field(1.0, gt=0)
    prior_tau2: float = Field(0.1, gt=0)


# --- pure functions ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Posterior:
    """Normal-inverse-chi-squared posterior of a score set (conjugate update, e.g. Murphy,
    *Probabilistic Machine Learning: Advanced Topics*, section 3.4.3)."""

    mean: float
    kappa: float
    nu: float
    tau2: float

    @classmethod
    def of(cls, scores: Sequence[float], cfg: ABMCTSConfig) -> Posterior:
        m0, k0, v0, t0 = cfg.prior_mean, cfg.prior_kappa, cfg.prior_nu, cfg.prior_tau2
        n = len(scores)
        if n == 0:
            return cls(m0, k0, v0, t0)
        avg = sum(scores) / n
        spread = sum((x - avg) ** 2 for x in scores)
        kappa, nu = k0 + n, v0 + n
        tau2 = (v0 * t0 + spread + n * k0 / (k0 + n) * (m0 - avg) ** 2) / nu
        return cls((k0 * m0 + n * avg) / kappa, kappa, nu, tau2)

    def draw(self, rng: random.Random) -> float:
        """One Thompson draw of the mean: sigma^2 ~ scaled-inv-chi^2(nu, tau2), then
        mu ~ N(mean, sigma^2 / kappa)."""
        chi2 = 2.0 * rng.gammavariate(self.nu / 2.0, 1.0)
        var = self.nu * self.tau2 / max(chi2, 1e-300)
        return rng.gauss(self.mean, math.sqrt(var / self.kappa))


@dataclass
class Scores:
    """The scores of one search: each node's own score and those created below it."""

    own: dict[int, float]
    below: dict[int, list[float]]

    def record(self, node: Node, score: float) -> None:
        self.own[node.node_id] = score
        anc = node.parent
        while anc is not None:
            self.below.setdefault(anc.node_id, []).append(score)
            anc = anc.parent

    def child_set(self, child: Node) -> list[float]:
        own = self.own.get(child.node_id)
        return ([] if own is None else [own]) + self.below.get(child.node_id, [])

    def gen_set(self, node: Node) -> list[float]:
        return [self.own[e.child.node_id] for e in node.edges
                if e.child is not None and e.child.node_id in self.own]

    def cont_set(self, node: Node) -> list[float]:
        return [x for e in node.edges if e.child is not None
                for x in self.below.get(e.child.node_id, [])]


def can_widen(node: Node) -> bool:
    """GEN is available: the node is not terminal and has an edge without a child (or has not
    been expanded yet)."""
    return not node.terminal and (not node.expanded or any(e.child is None for e in node.edges))


def is_open(node: Node) -> bool:
    """Something can still be created in ``node``'s subtree."""
    if node.terminal:
        return False
    return can_widen(node) or any(e.child is not None and is_open(e.child) for e in node.edges)


def choose(node: Node, scores: Scores, cfg: ABMCTSConfig,
           rng: random.Random) -> Edge | None:
    """At an open node: ``None`` for GEN, else the edge into the child to continue in."""
    deeper = [e for e in node.edges if e.child is not None and is_open(e.child)]
    if not deeper:
        return None
    if can_widen(node):
        gen = Posterior.of(scores.gen_set(node), cfg).draw(rng)
        cont = Posterior.of(scores.cont_set(node), cfg).draw(rng)
        if not cont > gen:
            return None
    best, best_draw = None, -math.inf
    for e in deeper:                          # strict >: the earlier child keeps a tie
        d = Posterior.of(scores.child_set(e.child), cfg).draw(rng)
        if d > best_draw:
            best, best_draw = e, d
    return best


def best_first_edge(tree: Tree) -> Edge:
    """The root edge toward the node with the highest own value (the earlier node on ties);
    the top-prior root edge when nothing has a value."""
    best: Node | None = None
    for node in tree.nodes[1:]:
        if node.value is not None and (best is None or node.value > best.value):
            best = node
    return tree.root.edges[0] if best is None else best.path_edges()[0]


# --- the loop ----------------------------------------------------------------------------------
async def _simulate(tree: Tree, hooks: SearchHooks, cfg: ABMCTSConfig, scores: Scores,
                    rng: random.Random) -> tuple[list[Edge], Node]:
    """Descend by Thompson sampling, then create and score one child; returns its path."""
    node, path = tree.root, []
    while (edge := choose(node, scores, cfg, rng)) is not None:
        path.append(edge)
        node = edge.child
    replay(hooks, path)                       # the simulator at the node to widen
    if not node.expanded:
        await expand_node(tree, node, hooks, cfg)
    edge = next(e for e in node.edges if e.child is None)
    path.append(edge)
    child = step_edge(tree, node, edge, hooks, cfg)
    if child.needs_eval:
        await evaluate_node(tree, child, hooks)
    return path, child


async def ab_mcts(hooks: SearchHooks, root_obs: str | None, cfg: ABMCTSConfig,
                  clock: Callable[[], float] = time.perf_counter) -> SearchResult:
    """Simulate until a budget is spent or the tree is exhausted (see the module docstring)."""
    rng = search_rng(hooks, cfg.algorithm, root_obs)
    scores = Scores({}, {})
    async with planning(hooks, root_obs, cfg, clock) as plan:
        tree = plan.tree
        while (stop := plan.spent()) is None:
            if not is_open(tree.root):
                stop = "tree_exhausted"
                break
            path, child = await _simulate(tree, hooks, cfg, scores, rng)
            tree.add_traversal(path)
            tree.counters["simulations"] += 1
            score = settle(tree, path, child)    # unknown is never 0 (module docstring)
            if score is None:
                continue
            scores.record(child, score)
            if may_stop_early(child, score, cfg):
                tree.counters["stopped_by"] = "value_one"
                return SearchResult.of(tree, "path", path)
        tree.counters["stopped_by"] = stop
        return SearchResult.of(tree, "single", [best_first_edge(tree)])


class ABMCTS(Configured):
    """The registered ``ab-mcts`` algorithm (AB-MCTS-A, Thompson sampling)."""

    Config = ABMCTSConfig

    async def plan(self, hooks: SearchHooks, root_obs: str | None) -> SearchResult:
        return await ab_mcts(hooks, root_obs, self.config, self.clock)
