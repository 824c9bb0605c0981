"""The node steps every search algorithm is built from (``docs/methods/mcts.md``).

An algorithm only decides *which* node to work on next; what happens to a node is written once,
here, and used by MCTS, BFS/DFS, best-first, best-of-N and AB-MCTS alike:

* :func:`expand_node`: ask the policy (through the hooks) for ranked proposals and make the
  node's edges (at most ``branching_factor``; a NONE edge when nothing parsed);
* :func:`evaluate_node`: ask the value function; anything but a finite number is an error;
* :func:`expand_and_evaluate`: both for a new leaf, the two calls in flight at once;
* :func:`step_edge`: create an edge's child with the simulator at the parent's state: NONE and
  STOP edges are not executed, any other edge steps the simulator; the child becomes terminal
  when the env ends the episode (``env_done``), when the episode rules cut the path
  (``horizon`` for the step limit, ``early_stop`` for the invalid streak and the repeat rule; the
  simulator is wrapped with the runner's rules, so its transitions say so), or at
  ``max_depth_actions`` (``depth``);
* :func:`budget_spent`: which budget of the tree is used up, if any;
* :func:`planning`: the set-up and tear-down of one tree (root expanded; simulator back at the
  root and wall time recorded at the end), and :func:`replay` / :func:`follow`: the simulator
  moved along known edges, STOP and NONE edges skipped (they never step it).

Each of the first three is a model call (:func:`propose`, :func:`value_of`: they only ask)
followed by a bookkeeping step (:func:`add_edges`, :func:`set_value`: they change the tree), so
an algorithm that has several calls in flight (MCTS waves) applies the answers in an order of its
choosing, not in the order they return: the tree does not depend on the backend's timing.

The search core knows nodes, priors, values and a budget, never prompts or environments:
everything that needs a model or an env goes through a :class:`SearchHooks` object.

**The simulator during a call.** ``expand`` and ``evaluate`` read the state of the simulator
they are given and never move it, so the two calls of one node may run together on the same
simulator. Calls on *different* nodes at once need a simulator each: :meth:`SearchHooks.fork`
gives hooks over a copy of the simulator at its current state, and the shared simulator is then
free to move on (``docs/methods/mcts.md#leaf-parallel-waves``).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from clew.search.algorithm import Evaluation, ProposalLike, SearchConfig, SearchHooks
from clew.search.tree import Edge, Node, Tree

#: truncation reasons of the episode rules that count as the step limit (terminal ``horizon``)
STEP_LIMIT = "max_steps"


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


async def propose(tree: Tree, node: Node, hooks: SearchHooks,
                  cfg: SearchConfig) -> Sequence[ProposalLike]:
    """Policy proposals for ``node`` (the hooks' simulator is at its state); up to
    ``cfg.max_expand_attempts`` policy calls while nothing parses. The tree is not changed
    beyond its ``policy_calls`` counter."""
    proposals: Sequence[ProposalLike] = []
    for _ in range(cfg.max_expand_attempts):
        tree.counters["policy_calls"] += 1
        proposals = await hooks.expand(node)
        if proposals:
            break
    return proposals


async def value_of(node: Node, hooks: SearchHooks) -> Evaluation:
    """V(node) (the hooks' simulator is at its state); ``None`` when the value is unknown (every
    sample unreadable); anything else that is not a finite number raises. The tree is not
    changed."""
    ev = await hooks.evaluate(node)
    value = ev.value
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not math.isfinite(value)):
        raise ValueError(f"value function returned {value!r} for node {node.node_id}")
    return ev


def set_value(tree: Tree, node: Node, ev: Evaluation) -> float | None:
    """Store an evaluation on ``node``: its value (``None`` when unknown: marked
    ``info["value_unknown"]``, see :func:`estimate`), its record, the evaluation order and the
    count of uncached value calls."""
    value = ev.value
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


def backup(path: Sequence[Edge], value: float) -> None:
    """Running-mean backup of one leaf value along ``path``."""
    for edge in reversed(path):
        edge.q = (edge.n * edge.q + value) / (edge.n + 1)
        edge.n += 1
        edge.parent.ns += 1
        if edge.child is not None:
            edge.v_next = edge.child.value


def settle(tree: Tree, path: Sequence[Edge], leaf: Node) -> float | None:
    """The end of one simulation: :func:`estimate` of its leaf backed up along ``path`` (and
    marked on the leaf when it is not the leaf's own value); None, counted in
    ``counters["unbacked"]``, when nothing is known: an unknown value is never backed up as 0."""
    score = estimate(leaf)
    if score is None:
        tree.counters["unbacked"] = tree.counters.get("unbacked", 0) + 1
        return None
    if leaf.value is None:
        leaf.info["backed_up_estimate"] = score
    backup(path, score)
    return score


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


async def expand_node(tree: Tree, node: Node, hooks: SearchHooks, cfg: SearchConfig,
                      q_init: float = 0.0) -> None:
    """Policy proposals for ``node`` (the simulator is at its state) become its edges."""
    add_edges(tree, node, await propose(tree, node, hooks, cfg), cfg.branching_factor, q_init)


@dataclass
class Planning:
    """One tree being built for one real step: the tree and the clock its budget runs on."""

    tree: Tree
    cfg: SearchConfig
    clock: Callable[[], float]
    started: float

    def spent(self, counters: dict[str, Any] | None = None) -> str | None:
        """Which budget is used up (:func:`budget_spent`), counting ``counters`` (default: the
        tree's) and the time since the tree began."""
        return budget_spent(self.cfg, self.tree.counters if counters is None else counters,
                            self.clock() - self.started)


@asynccontextmanager
async def planning(hooks: SearchHooks, root_obs: str | None, cfg: SearchConfig,
                   clock: Callable[[], float], *, q_init: float = 0.0,
                   wave_size: int | None = None, wave_pipeline: bool = False,
                   root_snapshot: bool = False) -> AsyncIterator[Planning]:
    """Set-up and tear-down of every algorithm's tree: the simulator at the root, a tree with its
    root expanded (the root expansion is free; ``root_snapshot`` keeps the root's snapshot for
    algorithms that restore instead of replaying); at the end, whatever happened, the simulator
    back at the root and the tree's wall time in ``counters["seconds"]``. ``wave_size`` is
    recorded in the tree (``None``: the tree has no waves)."""
    started = clock()
    hooks.to_root()
    tree = Tree.with_root(root_obs)
    tree.wave_size, tree.wave_pipeline = wave_size, wave_pipeline
    if root_snapshot:
        tree.root.snap = hooks.snapshot()
    await expand_node(tree, tree.root, hooks, cfg, q_init)
    try:
        yield Planning(tree, cfg, clock, started)
    finally:
        hooks.to_root()
        tree.counters["seconds"] = round(clock() - started, 6)


def executed(edge: Edge) -> bool:
    """Whether taking ``edge`` steps the simulator: STOP and NONE edges never do."""
    return not (edge.is_stop or edge.is_none)


def follow(hooks: SearchHooks, edge: Edge) -> None:
    """Move the simulator (at ``edge``'s parent) along a known edge, as the search did when it
    created the child."""
    if executed(edge):
        hooks.apply(edge.parent, edge)


def replay(hooks: SearchHooks, path: Sequence[Edge]) -> None:
    """Root, then the edges of ``path``: the simulator ends at the last edge's child."""
    hooks.to_root()
    for edge in path:
        follow(hooks, edge)


async def evaluate_node(tree: Tree, node: Node, hooks: SearchHooks) -> float | None:
    """V(node) (the simulator is at its state), stored on the node; ``None`` when unknown."""
    return set_value(tree, node, await value_of(node, hooks))


async def expand_and_evaluate(tree: Tree, node: Node, hooks: SearchHooks, cfg: SearchConfig,
                              q_init: float = 0.0) -> float | None:
    """A new leaf's expansion and evaluation with both calls in flight at once (they are
    independent: same state, neither moves the simulator); expanded first, then valued, as if
    one after the other."""
    proposals, ev = await gather_all(propose(tree, node, hooks, cfg), value_of(node, hooks))
    add_edges(tree, node, proposals, cfg.branching_factor, q_init)
    return set_value(tree, node, ev)


async def cancel_all(tasks: Sequence[asyncio.Future]) -> None:
    """Cancel the tasks still running and wait until each has ended, so none outlives its
    caller; their exceptions are collected (the caller is already unwinding, or done)."""
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def gather_all(*calls: Awaitable[Any]) -> list[Any]:
    """The results of ``calls`` run concurrently, in argument order. On the first failure the
    others are cancelled (and awaited) before it propagates, so no call outlives its search."""
    tasks = [asyncio.ensure_future(c) for c in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        await cancel_all(tasks)
        raise


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
    if tr.terminated:                      # checked first: the goal on the last step counts
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
