"""Leaf-parallel MCTS waves (issue 12, docs/methods/mcts.md#leaf-parallel-waves): k = 1 is the
sequential algorithm tree for tree; wider waves spread under virtual loss, never give one waiting
leaf two simulations, keep their calls in flight together, and record k and every node's wave."""

from __future__ import annotations

import asyncio
import copy

import pytest
from clew.search.algorithm import Evaluation, Transition
from clew.search.mcts import MCTS, MCTSConfig, VirtualLoss, descend, select
from clew.search.tree import Tree, tree_from_dict, tree_to_dict
from golden_trees import case_options, comparable, load, run_case
from hypothesis import given, settings
from hypothesis import strategies as st
from report_fixtures import RandomHooks


@pytest.mark.parametrize("case", sorted(case_options()))
def test_k1_reproduces_the_trees_pinned_before_waves(case):
    golden = load()[case]
    keys = set(golden[0]["meta"]["search_config"])
    search = {"wave_size": 1} if case_options()[case][0] == "mcts" else {}
    got = [comparable(t, keys) for t in run_case(case, search)]
    assert len(got) == len(golden)
    for i, (a, b) in enumerate(zip(got, golden)):
        assert a == b, f"{case}: tree {i} differs"


class Flight:
    def __init__(self):
        self.now = self.peak = self.forks = 0


class SlowRandomHooks(RandomHooks):
    """RandomHooks whose calls take ``latency`` seconds (reading the state after the wait, so a
    call on a moved simulator would answer for the wrong node); ``flight`` counts calls in
    flight and forks."""

    def __init__(self, seed, latency=0.0):
        super().__init__(seed)
        self.latency, self.flight = latency, Flight()

    async def _call(self):
        self.flight.now += 1
        self.flight.peak = max(self.flight.peak, self.flight.now)
        try:
            await asyncio.sleep(self.latency)
        finally:
            self.flight.now -= 1

    async def expand(self, node):
        await self._call()
        return await super().expand(node)

    async def evaluate(self, node):
        await self._call()
        return await super().evaluate(node)

    def fork(self):
        self.flight.forks += 1
        return super().fork()


def plan(cfg, hooks):
    return asyncio.run(MCTS(cfg).plan(hooks, "root obs")).tree


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 30), st.sampled_from([1, 2, 3, 4, 8]),
       st.sampled_from([0, 1, 3]), st.sampled_from([None, 0.0]), st.booleans())
def test_wave_invariants(seed, sims, k, visits, vvalue, pipeline):
    cfg = MCTSConfig(branching_factor=3, n_simulations=sims, max_depth_actions=4, wave_size=k,
                     virtual_loss=visits, virtual_value=vvalue, wave_pipeline=pipeline)
    tree = plan(cfg, RandomHooks(seed))
    d = tree_to_dict(tree)
    waves = d["waves"]["traversals"]
    assert d["waves"]["size"] == k and len(waves) == len(d["traversals"]) == sims
    assert d["waves"].get("pipeline", False) is pipeline
    assert waves == sorted(waves) and waves[0] == 1
    sizes = [waves.count(w) for w in set(waves)]
    assert max(sizes) <= k and sum(sizes) == sims
    # a leaf whose calls are in a wave is the end of exactly one traversal of that wave
    called = set(tree.eval_order)
    for w in set(waves):
        ends = [d["edges"][t[-1]]["child"] for t, tw in zip(d["traversals"], waves) if tw == w]
        for leaf in {i for i in called if tree.node(i).wave == w}:
            assert ends.count(leaf) == 1
    # each node was created by the wave of the first traversal that reached it
    for trav, w in zip(d["traversals"], waves):
        for eid in trav:
            child = tree.edge(eid).child
            assert child.wave <= w
    # virtual loss leaves nothing behind: N is the traversal count, Q the mean of backed values
    counts = [0] * len(tree.edges)
    for trav in d["traversals"]:
        for eid in trav:
            counts[eid] += 1
    assert [e.n for e in tree.edges] == counts
    for node in tree.nodes:
        assert node.ns == sum(e.n for e in node.edges)
    # selection order: ids and orders increase with the wave
    assert [tree.node(i).wave for i in tree.expansion_order] == \
        sorted(tree.node(i).wave for i in tree.expansion_order)
    again = tree_from_dict(d)
    assert tree_to_dict(again) == d


def test_k1_is_the_sequential_search_on_random_trees():
    for seed in range(40):
        cfg = MCTSConfig(branching_factor=3, n_simulations=15, max_depth_actions=4)
        one = tree_to_dict(plan(cfg, RandomHooks(seed)))
        assert one["waves"] == {"size": 1, "traversals": list(range(1, 16))}
        assert [n["wave"] for n in one["nodes"]] == \
            [0] + [next(w for t, w in zip(one["traversals"], one["waves"]["traversals"])
                        if n["incoming"] in t) for n in one["nodes"][1:]]


def test_wave_calls_are_in_flight_together_and_forked():
    hooks = SlowRandomHooks(1, latency=0.002)
    tree = plan(MCTSConfig(branching_factor=4, n_simulations=8, wave_size=4), hooks)
    # root expansion alone, then every call of a wave at once (a STOP leaf: evaluation only)
    calls = {w: sum(tree.node(i).wave == w for i in tree.expansion_order + tree.eval_order)
             for w in (1, 2)}
    assert hooks.flight.peak == max(calls.values()) >= 7
    assert hooks.flight.forks == len({i for i in tree.eval_order})
    assert tree.traversal_waves == [1] * 4 + [2] * 4
    # the slow calls answered for their own nodes: the same tree as instant calls
    fast = plan(MCTSConfig(branching_factor=4, n_simulations=8, wave_size=4), RandomHooks(1))
    strip = lambda t: {**tree_to_dict(t), "counters": None}
    assert strip(tree) == strip(fast)
    seq = SlowRandomHooks(1, latency=0.002)
    plan(MCTSConfig(branching_factor=4, n_simulations=8), seq)
    assert seq.flight.peak == 2 and seq.flight.forks == 0   # k = 1: expand + evaluate together


def test_first_wave_spreads_over_root_edges():
    # all four root edges are new leaves; a waiting leaf is never selected twice in a wave
    tree = plan(MCTSConfig(branching_factor=4, n_simulations=4, wave_size=4), RandomHooks(3))
    assert sorted(t[0] for t in tree.traversals) == [e.edge_id for e in tree.root.edges]
    assert {n.wave for n in tree.nodes[1:]} == {1}


def _root_with_children(priors):
    tree = Tree.with_root("r")
    tree.root.expanded = True
    for i, p in enumerate(priors):
        e = tree.new_edge(tree.root, f"a{i}", f"a{i}", prior=p)
        child = tree.new_node(tree.root, e, f"c{i}")
        child.expanded = True
        for j in range(2):
            tree.new_edge(child, f"b{j}", f"b{j}", prior=0.5)
    return tree


def test_virtual_loss_moves_the_next_selection_and_is_undone_exactly():
    tree = _root_with_children([0.5, 0.4])
    a, b = tree.root.edges
    a.n, a.q, b.n, b.q, tree.root.ns = 3, 0.1 + 0.2, 1, 0.3, 4
    before = [(e.n, e.q) for e in tree.edges] + [n.ns for n in tree.nodes]
    sel = lambda node, edges=None: select(node, 1.0, edges=edges)
    # a: 0.3 + 0.5*2/4 = 0.55; b: 0.3 + 0.4*2/2 = 0.7 -> b
    path = descend(tree.root, sel, set(), set())
    assert path[0] is b
    loss = VirtualLoss(3, 0.0)
    loss.add(path)
    # b: 4 visits, Q = 0.3/4 = 0.075, U = 0.4*sqrt(7)/5 = 0.21 -> 0.287; a: 0.3 + 0.5*sqrt(7)/4
    assert b.n == 4 and b.q == pytest.approx(0.075) and tree.root.ns == 7
    assert descend(tree.root, sel, set(), set())[0] is a
    loss.undo()
    assert [(e.n, e.q) for e in tree.edges] + [n.ns for n in tree.nodes] == before
    # value None: only the counts grow
    loss = VirtualLoss(1, None)
    loss.add(path)
    assert (b.n, b.q) == (2, 0.3)
    loss.undo()


def test_descend_closes_waiting_leaves_and_gives_up_when_all_are_closed():
    tree = _root_with_children([0.6, 0.4])
    sel = lambda node, edges=None: select(node, 1.0, edges=edges)
    a, b = tree.root.edges
    waiting = {a.child.edges[0].parent}          # node a is waiting (as if new this wave)
    closed: set = set()
    path = descend(tree.root, sel, waiting, closed)
    assert path[0] is b and a in closed
    waiting.add(b.child)
    assert descend(tree.root, sel, waiting, closed) is None


def test_a_failing_call_cancels_the_rest_of_the_wave():
    class Failing(SlowRandomHooks):
        async def evaluate(self, node):
            if node.node_id == 2:
                raise RuntimeError("judge down")
            return await super().evaluate(node)

    hooks = Failing(5, latency=0.01)
    with pytest.raises(RuntimeError, match="judge down"):
        plan(MCTSConfig(branching_factor=4, n_simulations=8, wave_size=4), hooks)
    assert hooks.flight.now == 0                # nothing left running after the search


@pytest.mark.parametrize("pipeline", [False, True])
def test_budgets_cap_the_wave(pipeline):
    # pipelined, the simulations and value calls of the wave still out count as spent
    tree = plan(MCTSConfig(branching_factor=4, n_simulations=6, wave_size=4,
                           wave_pipeline=pipeline), RandomHooks(2))
    assert tree.traversal_waves == [1, 1, 1, 1, 2, 2]
    tree = plan(MCTSConfig(branching_factor=4, n_simulations=20, wave_size=4,
                           max_value_calls=3, wave_pipeline=pipeline), RandomHooks(2))
    assert tree.counters["value_calls"] == 3 and tree.counters["stopped_by"] == "value_calls"


@pytest.mark.parametrize("pipeline", [False, True])
def test_value_one_in_a_wave_commits_the_first_such_path(pipeline):
    hooks = RandomHooks(4)
    orig = hooks.evaluate

    async def top(node):
        ev = await orig(node)
        return Evaluation(1.0 if node.node_id in (2, 3) else min(ev.value, 0.5), ev.record)
    hooks.evaluate = top
    res = asyncio.run(MCTS(MCTSConfig(branching_factor=4, n_simulations=20, wave_size=4,
                                      wave_pipeline=pipeline)).plan(hooks, "root obs"))
    tree = res.tree
    assert res.kind == "path" and tree.counters["stopped_by"] == "value_one"
    # the whole wave was backed up; pipelined, wave 1's top is known once wave 2 was sent, and
    # wave 2 is finished and kept too
    assert tree.counters["simulations"] == (8 if pipeline else 4)
    assert res.decision[-1].child.node_id == 2           # the first in selection order


def test_cached_snapshots_match_reexecution_in_waves():
    for seed in range(10):
        a = tree_to_dict(plan(MCTSConfig(branching_factor=3, n_simulations=12, wave_size=4),
                              RandomHooks(seed)))
        b = tree_to_dict(plan(MCTSConfig(branching_factor=3, n_simulations=12, wave_size=4,
                                         reexecute_edges=False), RandomHooks(seed)))
        for t in (a, b):
            t["counters"].pop("seconds")
            t["meta"] = {}
        assert a == b


class PendingHooks(SlowRandomHooks):
    """SlowRandomHooks whose evaluations take ``eval_latency`` (varying by node when a list),
    noting for each expansion whether the value of the node's parent (not the root) was out."""

    def __init__(self, seed, latency=0.0, eval_latency=0.0):
        super().__init__(seed, latency)
        self.eval_latency, self.below_pending = eval_latency, []
        self.evaluating: set[int] = set()
        self.overlapped: list[bool] = []  # per expansion: another node's evaluation was out

    async def expand(self, node):
        self.overlapped.append(bool(self.evaluating - {node.node_id}))
        parent = node.parent
        self.below_pending.append(parent is not None and parent.parent is not None
                                  and parent.value is None)
        return await super().expand(node)

    async def evaluate(self, node):
        lat = self.eval_latency
        self.evaluating.add(node.node_id)
        try:
            await asyncio.sleep(lat[node.node_id % len(lat)] if isinstance(lat, list) else lat)
            return await super().evaluate(node)
        finally:
            self.evaluating.discard(node.node_id)


def test_a_pipelined_wave_goes_below_leaves_whose_values_are_out():
    # waves: every node is evaluated before a later wave expands it; pipelined: the next wave
    # is selected once the expansions are back, so it expands some nodes still being evaluated
    for pipeline, expect in ((False, False), (True, True)):
        hooks = PendingHooks(7)
        plan(MCTSConfig(branching_factor=3, n_simulations=16, wave_size=4,
                        wave_pipeline=pipeline), hooks)
        assert any(hooks.below_pending) is expect


def test_pipelined_trees_do_not_depend_on_timing():
    # the order of application is fixed (this wave's edges, then the last wave's values), so
    # slow, uneven evaluations give the tree instant ones give
    cfg = MCTSConfig(branching_factor=3, n_simulations=14, wave_size=3, wave_pipeline=True)
    strip = lambda t: {**tree_to_dict(t), "counters": None}
    for seed in range(3):
        slow = PendingHooks(seed, latency=0.001, eval_latency=[0.004, 0.0, 0.002])
        assert strip(plan(cfg, slow)) == strip(plan(cfg, RandomHooks(seed)))
        assert slow.flight.now == 0
    # k = 1 pipelined: the next leaf's expansion overlaps the last leaf's evaluation; k = 1
    # alone: never (and no forks: the shared simulator is not moved while calls are out)
    for pipeline in (False, True):
        hooks = PendingHooks(1, latency=0.001, eval_latency=0.004)
        tree = plan(MCTSConfig(branching_factor=3, n_simulations=8, wave_pipeline=pipeline),
                    hooks)
        assert any(hooks.overlapped) is pipeline
        assert hooks.flight.forks == (len(tree.eval_order) if pipeline else 0)
        assert tree.traversal_waves == list(range(1, 9))


def test_a_failing_call_cancels_the_pipelined_waves_too():
    class Failing(PendingHooks):
        async def evaluate(self, node):
            if node.node_id == 6:
                raise RuntimeError("judge down")
            return await super().evaluate(node)

    hooks = Failing(5, latency=0.001, eval_latency=0.02)
    with pytest.raises(RuntimeError, match="judge down"):
        plan(MCTSConfig(branching_factor=4, n_simulations=16, wave_size=4,
                        wave_pipeline=True), hooks)
    assert hooks.flight.now == 0


def test_old_trees_without_waves_still_load():
    d = tree_to_dict(plan(MCTSConfig(n_simulations=3), RandomHooks(0)))
    old = copy.deepcopy(d)
    del old["waves"]
    for n in old["nodes"]:
        del n["wave"]
    t = tree_from_dict(old)
    assert t.wave_size is None and t.nodes[1].wave is None
    bad = copy.deepcopy(d)
    bad["waves"]["traversals"].pop()
    with pytest.raises(ValueError, match="waves.traversals"):
        tree_from_dict(bad)


def test_transition_contract_unchanged():
    assert Transition("x").terminated is False
