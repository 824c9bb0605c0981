"""The MCTS core of (R-)MCTS: algorithm only (spec_002 §1.1–§1.13).

It knows nodes, priors, values and a budget, not prompts or environments. Everything that needs a
model or an env goes through a :class:`SearchHooks` object supplied by the agent
(:mod:`clew.search.rmcts`): ``expand`` (policy proposals with priors), ``evaluate`` (value of a
node), ``to_root`` / ``apply`` (move the simulator), ``snapshot`` / ``restore`` (cached nodes).

One call of :func:`run_search` builds one fresh tree for one real step (§1.1) and returns a
:class:`SearchResult`: the executed root edge (most visited, ties by Q, then edge order — §1.10)
or, when a leaf reached the top of the value scale, the whole path to it (§1.8). The tree is then
discarded by the caller (only its JSON form is kept).

Decisions taken here (spec_002 §1 [D] items):

* Backup is the plain running mean, no discount (§1.7, D-2).
* ``horizon_value``: ``"zero"`` leaves horizon / early-stop nodes unevaluated at 0,
  ``"evaluate"`` asks V (for ``graded_at_end`` envs); the agent picks it from the env (D5).
* ``done`` is checked before the horizon rule, so a goal reached on the last allowed step counts.
* ``max_depth_actions`` (default 5) makes a node at that depth terminal ``depth``: evaluated, never
  expanded (D25).
* The early-stop rules of §0.5 applied inside the tree: the step limit (``steps_left``) gives
  reason ``horizon``; the invalid-action streak and the repeat rule give ``early_stop``. Both are
  treated like the horizon (value 0 in zero mode).
* ``max_expand_attempts`` is the number of policy calls tried when nothing parses (the code's
  ``max_retry``; 1 = no second attempt). Still nothing: one NONE edge with prior 0 (§1.3 step 7).
* Budget (§1.9, D32): ``n_simulations`` (one unit per simulation, root expansion free),
  ``max_value_calls`` (optional) and ``time_budget_s`` (optional, checked between simulations);
  the search stops when any limit is reached.
* Observations are recorded when a child is first created; with ``reexecute_edges=True`` later
  simulations step the env again (exact parity with the code's replay) but keep the first text.
* Ties everywhere go to the first edge in prior-rank order (strict ``>``, D24).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from clew.search.tree import Edge, Node, Tree


# --- what the core expects from the agent ------------------------------------------------------
class ProposalLike(Protocol):
    """One candidate action of a policy: already merged, counted and ranked (spec_002 §1.3)."""

    action: str | None
    key: str
    raw: str
    count: int
    prior: float
    is_stop: bool


@dataclass
class Transition:
    """What happened when an edge's action was applied in the simulator (§1.5)."""

    obs: str
    done: bool = False
    valid: bool = True
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Evaluation:
    """A value estimate; ``record`` is the ValueRecord (§2.1) as a dict; ``cached`` = no call."""

    value: float
    record: dict[str, Any] | None = None
    cached: bool = False


class SearchHooks(Protocol):
    """The agent side of the search: model calls and simulator moves."""

    async def expand(self, node: Node) -> Sequence[ProposalLike]:
        """Ranked proposals (prior order) for ``node``; the simulator is at ``node``'s state."""

    async def evaluate(self, node: Node) -> Evaluation:
        """Value of ``node``; the simulator is at ``node``'s state (its parent's for STOP)."""

    def to_root(self) -> None:
        """Put the simulator back in the root (real) state."""

    def apply(self, node: Node, edge: Edge) -> Transition:
        """Step the simulator (at ``node``) with ``edge.action``."""

    def snapshot(self) -> Any: ...

    def restore(self, snap: Any) -> None: ...


# --- configuration -----------------------------------------------------------------------------
@dataclass
class MCTSConfig:
    """Search parameters (spec_002 §1.15, Appendix A ``search``)."""

    branching_factor: int = 5
    c_puct: float = 1.0
    q_init: float = 0.0
    n_simulations: int = 20
    max_value_calls: int | None = None
    time_budget_s: float | None = None
    max_depth_actions: int = 5
    early_stop_value: float = 1.0
    horizon_value: Literal["zero", "evaluate"] = "zero"
    reexecute_edges: bool = True
    max_expand_attempts: int = 1

    def __post_init__(self) -> None:
        if self.branching_factor < 1:
            raise ValueError(f"search.branching_factor must be >= 1, got {self.branching_factor}")
        if self.n_simulations < 1:
            raise ValueError(f"search.n_simulations must be >= 1, got {self.n_simulations}")
        if self.max_depth_actions < 1:
            raise ValueError(f"search.max_depth_actions must be >= 1, got {self.max_depth_actions}")
        if self.horizon_value not in ("zero", "evaluate"):
            raise ValueError(f"search.horizon_value must be zero|evaluate, got {self.horizon_value!r}")
        if self.max_expand_attempts < 1:
            raise ValueError("search.max_expand_attempts must be >= 1")


@dataclass
class Limits:
    """The episode's early-stop rules as they apply inside a tree (spec_002 §0.5, §1.5).

    ``steps_left`` = T_max minus executed steps (None: no limit); ``invalid_streak`` = trailing
    invalid executed steps; ``recent_keys`` = canonical keys of the last executed actions.
    """

    steps_left: int | None = None
    invalid_streak: int = 0
    max_invalid_streak: int | None = 3
    recent_keys: tuple[str, ...] = ()
    repeat_limit: int | None = None   # 5 when env.flags.repeat_rule_applies, else None


# --- pure functions ----------------------------------------------------------------------------
def puct_score(edge: Edge, ns: int, c_puct: float) -> float:
    """Q + U with the first-visit rule (spec_002 §1.4)."""
    if ns == 0:
        u = c_puct * edge.prior
    else:
        u = c_puct * edge.prior * math.sqrt(ns) / (1 + edge.n)
    return edge.q + u


def select(node: Node, c_puct: float) -> Edge:
    """The edge maximising Q + U; strict ``>`` in edge order, so the first edge wins ties."""
    best, best_score = None, -math.inf
    for edge in node.edges:
        score = puct_score(edge, node.ns, c_puct)
        if score > best_score:
            best, best_score = edge, score
    if best is None:
        raise ValueError(f"node {node.node_id} has no edges to select from")
    return best


def backup(path: Sequence[Edge], value: float) -> None:
    """Running-mean backup of one leaf value along ``path`` (spec_002 §1.7)."""
    for edge in reversed(path):
        edge.q = (edge.n * edge.q + value) / (edge.n + 1)
        edge.n += 1
        edge.parent.ns += 1
        if edge.child is not None:
            edge.v_next = edge.child.value


def best_root_edge(root: Node) -> Edge:
    """Most visited root edge; ties by higher Q, then edge order (spec_002 §1.10)."""
    best = None
    for edge in root.edges:
        if best is None or (edge.n, edge.q) > (best.n, best.q):
            best = edge
    if best is None:
        raise ValueError("the root has no edges")
    return best


def add_edges(tree: Tree, node: Node, proposals: Sequence[ProposalLike], b: int,
              q_init: float) -> None:
    """Create ``node``'s edges from ranked proposals, at most ``b`` (spec_002 §1.3 steps 5–8)."""
    kept = list(proposals)[:b]
    if not kept:
        tree.new_edge(node, None, "NONE", raw="", count=0, prior=0.0, q=q_init)
    for p in kept:
        tree.new_edge(node, p.action, p.key, raw=p.raw, count=p.count, prior=p.prior, q=q_init,
                      is_stop=p.is_stop)
    node.expanded = True
    tree.expansion_order.append(node.node_id)


def path_keys(node: Node) -> list[str]:
    return [e.key for e in node.path_edges()]


def early_stop_reason(child: Node, limits: Limits) -> str | None:
    """Does the real prefix plus the path to ``child`` trigger a rule of §0.5?"""
    if limits.steps_left is not None and child.depth >= limits.steps_left:
        return "horizon"
    path = child.path_edges()
    if limits.max_invalid_streak:
        streak = 0
        for edge in reversed(path):
            if edge.child is not None and not edge.child.info.get("valid", True):
                streak += 1
            else:
                break
        if streak == len(path):
            streak += limits.invalid_streak
        if streak >= limits.max_invalid_streak:
            return "early_stop"
    if limits.repeat_limit:
        keys = list(limits.recent_keys) + [e.key for e in path]
        tail = keys[-limits.repeat_limit:]
        if len(tail) == limits.repeat_limit and len(set(tail)) == 1:
            return "early_stop"
    return None


# --- the search --------------------------------------------------------------------------------
@dataclass
class SearchResult:
    """The committed edge(s): kind ``single`` (one root edge) or ``path`` (§1.8)."""

    kind: Literal["single", "path"]
    edges: list[Edge]
    tree: Tree



def budget_spent(cfg: MCTSConfig, counters: dict[str, int], elapsed: float) -> str | None:
    """Which budget of §1.9 is spent (simulations, value calls, wall time), or ``None``."""
    if counters["simulations"] >= cfg.n_simulations:
        return "simulations"
    if cfg.max_value_calls is not None and counters["value_calls"] >= cfg.max_value_calls:
        return "value_calls"
    if cfg.time_budget_s is not None and elapsed >= cfg.time_budget_s:
        return "time"
    return None

class MCTS:
    """One tree per real step over ``hooks``; see the module docstring."""

    def __init__(self, config: MCTSConfig, hooks: SearchHooks, limits: Limits | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.cfg = config
        self.hooks = hooks
        self.limits = limits or Limits()
        self.clock = clock
        self.tree: Tree | None = None

    # budget
    def _budget_left(self, tree: Tree, t0: float) -> str | None:
        return budget_spent(self.cfg, tree.counters, self.clock() - t0)

    async def run(self, root_obs: str | None) -> SearchResult:
        t0 = self.clock()
        self.hooks.to_root()
        tree = self.tree = Tree.with_root(root_obs)
        if not self.cfg.reexecute_edges:
            tree.root.snap = self.hooks.snapshot()
        await self._expand(tree, tree.root)            # root expansion: free (§1.3)
        result: SearchResult | None = None
        try:
            while (stop := self._budget_left(tree, t0)) is None:
                path, leaf = await self._simulate(tree)
                value = float(leaf.value if leaf.value is not None else 0.0)
                backup(path, value)
                tree.traversals.append([e.edge_id for e in path])
                tree.counters["simulations"] += 1
                if path and value >= self.cfg.early_stop_value:     # §1.8
                    tree.counters["stopped_by"] = "value_one"
                    result = SearchResult("path", list(path), tree)
                    break
            else:
                tree.counters["stopped_by"] = stop
            if result is None:
                result = SearchResult("single", [best_root_edge(tree.root)], tree)
        finally:
            self.hooks.to_root()
            tree.counters["seconds"] = round(self.clock() - t0, 6)
        tree.decision_kind = result.kind
        tree.decision_edges = [e.edge_id for e in result.edges]
        return result

    async def _expand(self, tree: Tree, node: Node) -> None:
        proposals: Sequence[ProposalLike] = []
        for _ in range(self.cfg.max_expand_attempts):
            tree.counters["policy_calls"] += 1
            proposals = await self.hooks.expand(node)
            if proposals:
                break
        add_edges(tree, node, proposals, self.cfg.branching_factor, self.cfg.q_init)

    async def _evaluate(self, tree: Tree, node: Node) -> None:
        ev = await self.hooks.evaluate(node)
        if not isinstance(ev.value, (int, float)) or math.isnan(ev.value):
            raise ValueError(f"value function returned {ev.value!r} for node {node.node_id}")
        node.value = float(ev.value)
        node.value_record = ev.record
        if not ev.cached:
            tree.counters["value_calls"] += 1
        tree.eval_order.append(node.node_id)

    def _goto(self, node: Node) -> None:
        """Cached mode: put the simulator at ``node`` from its stored snapshot."""
        self.hooks.restore(node.snap)

    def _transition(self, tree: Tree, node: Node, edge: Edge) -> Node:
        """Apply ``edge`` from ``node`` (spec_002 §1.5); returns the child."""
        child = edge.child
        if child is not None:
            if child.terminal and child.terminal_reason in ("stop", "invalid"):
                return child
            if self.cfg.reexecute_edges:
                self.hooks.apply(node, edge)
            return child
        child = tree.new_node(node, edge)
        if edge.is_none:
            child.terminal, child.terminal_reason = True, "invalid"
            child.needs_eval, child.value = False, 0.0
            return child
        if edge.is_stop:                      # not executed; V judges the stop
            child.terminal, child.terminal_reason = True, "stop"
            child.obs = node.obs
            child.snap = node.snap
            return child
        if not self.cfg.reexecute_edges:
            self._goto(node)
        tr = self.hooks.apply(node, edge)
        child.obs = tr.obs
        child.info = {"valid": tr.valid, **tr.info}
        if not self.cfg.reexecute_edges:
            child.snap = self.hooks.snapshot()
        if tr.done:
            child.terminal, child.terminal_reason = True, "env_done"
        elif (reason := early_stop_reason(child, self.limits)) is not None:
            child.terminal, child.terminal_reason = True, reason
            if self.cfg.horizon_value == "zero":
                child.needs_eval, child.value = False, 0.0
        elif child.depth >= self.cfg.max_depth_actions:
            child.terminal, child.terminal_reason = True, "depth"
        return child

    async def _simulate(self, tree: Tree) -> tuple[list[Edge], Node]:
        """One selection–expansion–evaluation pass (spec_002 §1.13 ``simulate``)."""
        if self.cfg.reexecute_edges:
            self.hooks.to_root()
        node, path = tree.root, []
        while True:
            if node.terminal:
                if node.needs_eval and node.value is None:
                    if not self.cfg.reexecute_edges:
                        self._goto(node)
                    await self._evaluate(tree, node)
                return path, node
            if not node.expanded:                         # first arrival at a leaf
                if not self.cfg.reexecute_edges:
                    self._goto(node)
                await self._expand(tree, node)
                await self._evaluate(tree, node)
                return path, node
            edge = select(node, self.cfg.c_puct)
            path.append(edge)
            node = self._transition(tree, node, edge)


async def run_search(config: MCTSConfig, hooks: SearchHooks, root_obs: str | None,
                     limits: Limits | None = None) -> SearchResult:
    """Build one tree and choose (spec_002 §1.13 ``decide``)."""
    return await MCTS(config, hooks, limits).run(root_obs)
