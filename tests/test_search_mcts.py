"""MCTS core against hand computations from docs/methods/rmcts.md formulas (docs/methods/mcts.md#puct-selection to docs/methods/mcts.md#decision, docs/methods/mcts.md#worked-example, docs/methods/exploratory-learning.md#worked-example)."""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass

import pytest
from clew.search.algorithm import Evaluation, Transition
from clew.search.mcts import MCTS, MCTSConfig, best_root_edge, select
from clew.search.nodes import backup
from clew.search.tree import Tree
from hypothesis import given, settings
from hypothesis import strategies as st


@dataclass
class P:
    action: str | None
    key: str
    raw: str
    count: int
    prior: float
    is_stop: bool = False


class ScriptedHooks:
    """A deterministic toy world: state = the path of actions; priors and values are scripted
    by state name (the path joined with '/', root = '')."""

    def __init__(self, priors, values, stops=(), done=(), steps_left=None):
        self.priors = priors          # state -> [(action, prior)]
        self.steps_left = steps_left  # the episode's step limit minus the real steps taken
        self.values = values          # state -> value
        self.stops, self.done = set(stops), set(done)
        self.state: tuple[str, ...] = ()
        self.expanded: list[str] = []
        self.evaluated: list[str] = []
        self.steps = 0

    def name(self, state):
        return "/".join(state)

    async def expand(self, node):
        s = self.name(self.state)
        self.expanded.append(s)
        return [P(a, a, f"raw {a}", round(p * 20), p, a in self.stops)
                for a, p in self.priors.get(s, [])]

    async def evaluate(self, node):
        s = self.name(self.state + (("STOP",) if node.terminal_reason == "stop" else ()))
        self.evaluated.append(s)
        return Evaluation(self.values[s], {"state": s})

    def to_root(self):
        self.state = ()

    def apply(self, node, edge):
        self.steps += 1
        self.state = self.state + (edge.action,)
        s = self.name(self.state)
        cut = self.steps_left is not None and len(self.state) >= self.steps_left
        return Transition(obs=f"obs {s}", terminated=s in self.done,
                          truncated_by="max_steps" if cut else None)

    def snapshot(self):
        return self.state

    def restore(self, snap):
        self.state = snap


def run(cfg, hooks):
    return asyncio.run(MCTS(cfg).plan(hooks, "obs root"))


def worked_example_hooks():
    # docs/methods/exploratory-learning.md#worked-example: P(A)=0.6, P(B)=0.4; s1=A: C 0.7 / D 0.3; s2=B: G 0.8 / H 0.2
    priors = {"": [("A", 0.6), ("B", 0.4)], "A": [("C", 0.7), ("D", 0.3)],
              "B": [("G", 0.8), ("H", 0.2)], "A/C": [("X", 1.0)], "B/G": [("X", 1.0)]}
    values = {"A": 0.2, "A/C": 0.1, "B": 0.6, "B/G": 0.9}
    return ScriptedHooks(priors, values)


def test_worked_example_6_11():
    hooks = worked_example_hooks()
    res = run(MCTSConfig(branching_factor=2, n_simulations=4), hooks)
    tree = res.tree
    key = {e.edge_id: e.key for e in tree.edges}
    assert [[key[i] for i in t] for t in tree.traversals] == [["A"], ["A", "C"], ["B"], ["B", "G"]]
    a, b = tree.root.edges
    assert (a.n, b.n) == (2, 2)
    assert a.q == pytest.approx(0.15) and b.q == pytest.approx(0.75)
    c = a.child.edges[0]
    g = b.child.edges[0]
    assert (c.key, c.n, c.q) == ("C", 1, pytest.approx(0.1))
    assert (g.key, g.n, g.q) == ("G", 1, pytest.approx(0.9))
    assert res.kind == "single" and res.decision[0] is b     # tie on N -> higher Q
    assert hooks.evaluated == ["A", "A/C", "B", "B/G"]
    assert tree.root.ns == 4 and a.child.ns == 1
    assert a.v_next == 0.2 and b.v_next == 0.6
    # root, s1, s3, s2, s4 expanded in that order
    names = {n.node_id: "/".join(e.key for e in n.path_edges()) for n in tree.nodes}
    assert [names[i] for i in tree.expansion_order] == ["", "A", "A/C", "B", "B/G"]
    assert tree.counters["simulations"] == 4 and tree.counters["value_calls"] == 4
    assert tree.counters["policy_calls"] == 5      # root expansion is a policy call, not a unit


def test_selection_formula_by_hand():
    tree = Tree.with_root("r")
    root = tree.root
    e1 = tree.new_edge(root, "a", "a", prior=0.5)
    e2 = tree.new_edge(root, "b", "b", prior=0.3)
    e3 = tree.new_edge(root, "c", "c", prior=0.2)
    # first visit: highest prior, whatever Q says (all Q = 0 before any visit)
    assert select(root, 1.0) is e1
    e1.n, e1.q, e2.n, e2.q, root.ns = 3, 0.1, 1, 0.4, 4
    # scores: a 0.1 + 0.5*2/4 = 0.35; b 0.4 + 0.3*2/2 = 0.7; c 0 + 0.2*2/1 = 0.4
    assert select(root, 1.0) is e2
    # with c_puct = 3: a 0.1+0.75*... = 0.1+1.5*2/4=0.85 ; b 0.4+0.9=1.3 ; c 1.2
    assert select(root, 3.0) is e2
    e2.q = 0.1  # b: 1.0, c: 1.2 -> c
    assert select(root, 3.0) is e3


def test_select_ties_go_to_first_edge():
    tree = Tree.with_root("r")
    e1 = tree.new_edge(tree.root, "a", "a", prior=0.5)
    tree.new_edge(tree.root, "b", "b", prior=0.5)
    assert select(tree.root, 1.0) is e1


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=12))
def test_backup_is_mean_of_backed_values(values):
    tree = Tree.with_root("r")
    e = tree.new_edge(tree.root, "a", "a", prior=1.0)
    child = tree.new_node(tree.root, e, "c")
    f = tree.new_edge(child, "b", "b", prior=1.0)
    tree.new_node(child, f, "d")
    for v in values:
        backup([e, f], v)
    assert e.q == pytest.approx(sum(values) / len(values))
    assert f.q == pytest.approx(sum(values) / len(values))
    assert e.n == f.n == tree.root.ns == child.ns == len(values)


def test_best_action_tie_on_n_resolves_by_q_then_order():
    tree = Tree.with_root("r")
    a = tree.new_edge(tree.root, "a", "a")
    b = tree.new_edge(tree.root, "b", "b")
    c = tree.new_edge(tree.root, "c", "c")
    a.n, a.q, b.n, b.q, c.n, c.q = 3, 0.2, 3, 0.5, 2, 0.9
    assert best_root_edge(tree.root) is b
    b.q = 0.2
    assert best_root_edge(tree.root) is a


def test_priors_and_top_b_from_proposals():
    hooks = worked_example_hooks()
    hooks.priors[""] = [("A", 0.5), ("B", 0.3), ("C", 0.2)]
    hooks.values.update({"C": 0.0})
    res = run(MCTSConfig(branching_factor=2, n_simulations=1), hooks)
    assert [e.key for e in res.tree.root.edges] == ["A", "B"]   # top-b kept in order


def test_value_one_stops_search_and_returns_path():
    hooks = worked_example_hooks()
    hooks.values["A/C"] = 1.0
    res = run(MCTSConfig(branching_factor=2, n_simulations=20), hooks)
    assert res.kind == "path" and [e.key for e in res.decision] == ["A", "C"]
    assert res.tree.counters["simulations"] == 2
    assert res.tree.counters["stopped_by"] == "value_one"
    assert res.tree.decision_kind == "path" and len(res.tree.decision_edges) == 2


def test_horizon_child_is_terminal_zero_and_never_evaluated():
    # T_max = 2 with one executed step: steps_left = 1, so a depth-1 child is at the horizon
    hooks = worked_example_hooks()
    hooks.steps_left = 1
    res = run(MCTSConfig(branching_factor=2, n_simulations=5), hooks)
    assert hooks.evaluated == []
    children = [e.child for e in res.tree.root.edges if e.child]
    assert children and all(c.terminal_reason == "horizon" and c.value == 0.0 for c in children)
    # evaluate mode asks V instead
    hooks = worked_example_hooks()
    hooks.steps_left = 1
    res = run(MCTSConfig(branching_factor=2, n_simulations=3, horizon_value="evaluate"), hooks)
    # sims: A (0.2); A again (0.5 > 0.4, known terminal, no call); B (0.483 < 0.566)
    assert hooks.evaluated == ["A", "B"]
    assert res.tree.counters["simulations"] == 3 and res.tree.counters["value_calls"] == 2


def test_done_checked_before_horizon():
    hooks = worked_example_hooks()
    hooks.done, hooks.steps_left = {"A"}, 1
    res = run(MCTSConfig(branching_factor=2, n_simulations=1), hooks)
    assert res.tree.root.edges[0].child.terminal_reason == "env_done"
    assert hooks.evaluated == ["A"]


def test_budget_root_free_and_known_terminal_costs_one_without_v_call():
    priors = {"": [("S", 1.0)]}
    hooks = ScriptedHooks(priors, {"STOP": 0.4}, stops={"S"})
    res = run(MCTSConfig(n_simulations=3), hooks)
    assert res.tree.counters["simulations"] == 3
    assert res.tree.counters["value_calls"] == 1        # only the first arrival asks V
    assert hooks.evaluated == ["STOP"] and hooks.steps == 0  # STOP is never executed
    assert res.tree.root.edges[0].n == 3
    assert res.tree.traversals == [[0], [0], [0]]


def test_unparseable_expansion_gives_none_edge_and_retries():
    hooks = ScriptedHooks({}, {})
    res = run(MCTSConfig(n_simulations=2, max_expand_attempts=2), hooks)
    (edge,) = res.tree.root.edges
    assert edge.is_none and edge.prior == 0.0
    assert edge.child.terminal_reason == "invalid" and edge.child.value == 0.0
    assert hooks.expanded == ["", ""] and hooks.evaluated == []


def test_depth_limit_terminal_is_evaluated_not_expanded():
    priors = {"": [("A", 1.0)], "A": [("B", 1.0)]}
    hooks = ScriptedHooks(priors, {"A": 0.3, "A/B": 0.4})
    res = run(MCTSConfig(n_simulations=4, max_depth_actions=2), hooks)
    b = res.tree.root.edges[0].child.edges[0].child
    assert b.terminal_reason == "depth" and not b.expanded and b.value == 0.4
    assert hooks.expanded == ["", "A"]


def test_invalid_streak_rule_inside_tree():
    tree_priors = {"": [("A", 1.0)], "A": [("B", 1.0)], "A/B": [("C", 1.0)]}
    hooks = ScriptedHooks(tree_priors, {"A": 0.3, "A/B": 0.2, "A/B/C": 0.1})
    orig = hooks.apply

    def invalid_apply(node, edge):
        # one invalid real step before the tree, every simulated step invalid, streak limit 3
        tr = orig(node, edge)
        tr.valid = False
        tr.truncated_by = "invalid_streak" if 1 + len(hooks.state) >= 3 else None
        return tr
    hooks.apply = invalid_apply
    res = run(MCTSConfig(n_simulations=3), hooks)
    b = res.tree.root.edges[0].child.edges[0].child
    assert b.terminal_reason == "early_stop" and b.value == 0.0


def test_time_and_value_call_budgets():
    hooks = worked_example_hooks()
    res = run(MCTSConfig(branching_factor=2, n_simulations=20, max_value_calls=2), hooks)
    assert res.tree.counters["value_calls"] == 2 and res.tree.counters["stopped_by"] == "value_calls"
    ticks = iter(range(100))
    hooks = worked_example_hooks()
    res = asyncio.run(MCTS(MCTSConfig(branching_factor=2, n_simulations=20, time_budget_s=3),
                           clock=lambda: next(ticks)).plan(hooks, "r"))
    assert res.tree.counters["stopped_by"] == "time"
    assert res.tree.counters["simulations"] == 2   # t0=0; checks at 1, 2 pass, 3 stops


def random_hooks(seed):
    rng = random.Random(seed)
    acts = "abcd"
    priors, values = {}, {}

    def build(state, depth):
        name = "/".join(state)
        if depth:
            values[name] = round(rng.random() * 0.9, 3)
        if depth < 4:
            k = rng.randint(1, 3)
            ps = [rng.random() + 0.01 for _ in range(k)]
            priors[name] = [(acts[i], p / sum(ps)) for i, p in enumerate(ps)]
            for i in range(k):
                build(state + (acts[i],), depth + 1)
    build((), 0)
    return ScriptedHooks(priors, values)


@pytest.mark.parametrize("seed", range(6))
def test_cached_snapshots_match_reexecution(seed):
    from clew.search.tree import tree_to_dict
    a = run(MCTSConfig(n_simulations=15, reexecute_edges=True), random_hooks(seed))
    h = random_hooks(seed)
    b = run(MCTSConfig(n_simulations=15, reexecute_edges=False), h)
    da, db = tree_to_dict(a.tree), tree_to_dict(b.tree)
    for d in (da, db):
        d["counters"].pop("seconds")
    assert da == db


@pytest.mark.parametrize("seed", range(6))
def test_invariants_on_random_trees(seed):
    hooks = random_hooks(seed)
    res = run(MCTSConfig(n_simulations=12), hooks)
    tree = res.tree
    for node in tree.nodes:
        if node.expanded:
            assert node.ns == sum(e.n for e in node.edges)
    for edge in tree.edges:   # Q = mean of values of the traversals through the edge
        vals = [tree.edge(t[-1]).child.value for t in tree.traversals if edge.edge_id in t]
        if vals:
            assert edge.q == pytest.approx(sum(vals) / len(vals))
        assert edge.n == len(vals)
    # first-visit rule: the first simulation through any node follows its highest-prior edge
    seen = set()
    for trav in tree.traversals:
        for eid in trav:
            e = tree.edge(eid)
            if e.parent.node_id not in seen:
                seen.add(e.parent.node_id)
                assert e is max(e.parent.edges, key=lambda x: (x.prior, -x.edge_id))
    assert not math.isnan(res.decision[0].q)


@pytest.mark.parametrize("algorithm", ["mcts", "bfs", "dfs", "best-first"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "0.5", True])
def test_every_algorithm_rejects_a_value_that_is_not_a_finite_number(algorithm, bad):
    from clew.search.registry import make_algorithm

    hooks = worked_example_hooks()
    hooks.values["A"] = bad
    with pytest.raises(ValueError, match="value function returned"):
        asyncio.run(make_algorithm({"algorithm": algorithm, "branching_factor": 2,
                                    "n_simulations": 3}).plan(hooks, "obs root"))


def test_unknown_algorithm_and_unread_option_are_named():
    from clew.search.registry import search_config

    with pytest.raises(KeyError, match="unknown search algorithm 'beam'"):
        search_config({"algorithm": "beam"})
    with pytest.raises(ValueError, match="dfs_order"):
        search_config({"algorithm": "mcts", "dfs_order": "code"})
    assert search_config({"algorithm": "dfs", "dfs_order": "code"}).dfs_order == "code"
