"""The node steps every search algorithm is built from (``docs/methods/mcts.md``).

An algorithm only decides *which* node to work on next; what happens to a node is written once,
here, and used by MCTS, BFS/DFS and best-first alike:

* :func:`expand_node`: ask the policy (through the hooks) for ranked proposals and make the
  node's edges (at most ``branching_factor``; a NONE edge when nothing parsed);
* :func:`evaluate_node`: ask the value function; anything but a finite number is an error;
* :func:`step_edge`: create an edge's child with the simulator at the parent's state: NONE and
  STOP edges are not executed, any other edge steps the simulator; the child becomes terminal
  when the env ends the episode (``env_done``), when the episode rules cut the path
  (``horizon`` for the step limit, ``early_stop`` for the invalid streak and the repeat rule; the
  simulator is wrapped with the runner's rules, so its transitions say so), or at
  ``max_depth_actions`` (``depth``);
* :func:`budget_spent`: which budget of the tree is used up, if any.

The search core knows nodes, priors, values and a budget, never prompts or environments:
everything that needs a model or an env goes through a :class:`SearchHooks` object.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from clew.search.tree import Edge, Node, Tree

if TYPE_CHECKING:
    from clew.search.algorithm import SearchConfig

#: truncation reasons of the episode rules that count as the step limit (terminal ``horizon``)
STEP_LIMIT = "max_steps"


# --- what the core expects from the agent ------------------------------------------------------
class ProposalLike(Protocol):
    """One candidate action of a policy: already merged, counted and ranked."""

    action: str | None
    key: str
    raw: str
    count: int
    prior: float
    is_stop: bool


@dataclass
class Transition:
    """What happened when an edge's action was applied in the simulator.

    ``done``: the task ended the episode (Gymnasium's *terminated*); ``truncated_by``: the
    episode rule that cut it (``max_steps``, ``invalid_streak``, ``repeated_action``) or None.
    """

    obs: str
    done: bool = False
    valid: bool = True
    truncated_by: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Evaluation:
    """A value estimate; ``record`` is the value record as a dict; ``cached`` = no model call."""

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


# --- node steps --------------------------------------------------------------------------------
def add_edges(tree: Tree, node: Node, proposals: Sequence[ProposalLike], b: int,
              q_init: float = 0.0) -> None:
    """Create ``node``'s edges from ranked proposals, at most ``b``; one NONE edge with prior 0
    when there are none. Marks the node expanded and records the expansion order."""
    kept = list(proposals)[:b]
    if not kept:
        tree.new_edge(node, None, "NONE", raw="", count=0, prior=0.0, q=q_init)
    for p in kept:
        tree.new_edge(node, p.action, p.key, raw=p.raw, count=p.count, prior=p.prior, q=q_init,
                      is_stop=p.is_stop)
    node.expanded = True
    tree.expansion_order.append(node.node_id)


async def expand_node(tree: Tree, node: Node, hooks: SearchHooks, cfg: SearchConfig,
                      q_init: float = 0.0) -> None:
    """Policy proposals for ``node`` (the simulator is at its state) become its edges; up to
    ``cfg.max_expand_attempts`` policy calls while nothing parses."""
    proposals: Sequence[ProposalLike] = []
    for _ in range(cfg.max_expand_attempts):
        tree.counters["policy_calls"] += 1
        proposals = await hooks.expand(node)
        if proposals:
            break
    add_edges(tree, node, proposals, cfg.branching_factor, q_init)


async def evaluate_node(tree: Tree, node: Node, hooks: SearchHooks) -> float | None:
    """V(node) (the simulator is at its state); ``None`` when the value is unknown (every
    sample unreadable: marked ``info["value_unknown"]``, see :func:`estimate`); anything else
    that is not a finite number raises."""
    ev = await hooks.evaluate(node)
    value = ev.value
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not math.isfinite(value)):
        raise ValueError(f"value function returned {value!r} for node {node.node_id}")
    node.value = None if value is None else float(value)
    node.value_record = ev.record
    if value is None:
        node.info["value_unknown"] = True
    if not ev.cached:
        tree.counters["value_calls"] += 1
    tree.eval_order.append(node.node_id)
    return node.value


def estimate(node: Node) -> float | None:
    """The value a simulation ending at ``node`` backs up: its own value, else (unknown) the
    nearest ancestor's, else at the root the mean of the values backed up there so far; None
    when nothing is known yet (docs/methods/debate.md#unknown-values)."""
    n: Node | None = node
    while n is not None:
        if n.value is not None:
            return n.value
        if n.parent is None:
            return sum(e.n * e.q for e in n.edges) / n.ns if n.ns else None
        n = n.parent
    return None


def parsed_share(node: Node) -> float:
    """The share of the value samples of ``node`` that could be read (1 without samples)."""
    record = node.value_record or {}
    samples = len(record.get("samples") or ())
    return 1.0 - record.get("n_parse_fail", 0) / samples if samples else 1.0


def may_stop_early(node: Node, value: float, cfg: SearchConfig) -> bool:
    """Whether a leaf worth ``value`` ends the search at the top of the scale: its own value
    (not an estimate) from enough readable samples (``cfg.early_stop_min_parsed``)."""
    return (value >= cfg.early_stop_value and node.value is not None
            and parsed_share(node) >= cfg.early_stop_min_parsed)


def terminal_zero(node: Node, reason: str) -> None:
    """Make ``node`` terminal with value 0, never evaluated."""
    node.terminal, node.terminal_reason = True, reason
    node.needs_eval, node.value = False, 0.0


def step_edge(tree: Tree, node: Node, edge: Edge, hooks: SearchHooks, cfg: SearchConfig,
              keep_snapshot: bool = False) -> Node:
    """Create ``edge``'s child; the simulator must be at ``node``'s state (see module docstring).

    With ``keep_snapshot`` the child stores the simulator's snapshot after the step, so a later
    visit can restore it instead of replaying the path.
    """
    child = tree.new_node(node, edge)
    if edge.is_none:                       # nothing parsed: a certain invalid step, worth 0
        terminal_zero(child, "invalid")
        return child
    if edge.is_stop:                       # not executed; V judges the stop itself
        child.terminal, child.terminal_reason = True, "stop"
        child.obs, child.snap = node.obs, node.snap
        return child
    tr = hooks.apply(node, edge)
    child.obs = tr.obs
    child.info = {"valid": tr.valid, **tr.info}
    if keep_snapshot:
        child.snap = hooks.snapshot()
    if tr.done:                            # checked first: the goal on the last step counts
        child.terminal, child.terminal_reason = True, "env_done"
    elif tr.truncated_by is not None:
        child.info["truncated_by"] = tr.truncated_by
        reason = "horizon" if tr.truncated_by == STEP_LIMIT else "early_stop"
        if cfg.horizon_value == "zero":
            terminal_zero(child, reason)
        else:
            child.terminal, child.terminal_reason = True, reason
    elif child.depth >= cfg.max_depth_actions:
        child.terminal, child.terminal_reason = True, "depth"
    return child


def budget_spent(cfg: SearchConfig, counters: dict[str, Any], elapsed: float) -> str | None:
    """Which budget is used up (simulations, value calls, wall time), or ``None``."""
    if counters["simulations"] >= cfg.n_simulations:
        return "simulations"
    if cfg.max_value_calls is not None and counters["value_calls"] >= cfg.max_value_calls:
        return "value_calls"
    if cfg.time_budget_s is not None and elapsed >= cfg.time_budget_s:
        return "time"
    return None
