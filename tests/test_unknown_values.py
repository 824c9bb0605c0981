"""A value whose samples all fail to parse is unknown, never 0 (issue 11 item 4): what the search
backs up instead, how the tree marks it, and the early stop's minimum share of readable samples
(docs/methods/debate.md#unknown-values)."""

from __future__ import annotations

import asyncio

import pytest
from clew.agents.lm.fake import FakeLM
from clew.agents.options import ValueOptions
from clew.agents.prompts import Context
from clew.agents.usage import UsageByRole
from clew.agents.value import SingleValue
from clew.search.algorithm import Evaluation
from clew.search.mcts import MCTS, MCTSConfig
from clew.search.nodes import estimate
from clew.search.registry import make_algorithm
from clew.search.tree import tree_to_dict
from test_search_mcts import ScriptedHooks, worked_example_hooks


class RecordHooks(ScriptedHooks):
    """Values as (value, readable samples, samples) per state."""

    async def evaluate(self, node):
        s = self.name(self.state + (("STOP",) if node.terminal_reason == "stop" else ()))
        self.evaluated.append(s)
        v, ok, n = self.values.get(s, (0.3, 20, 20))  # states the script leaves out
        letters = ["A"] * ok + [None] * (n - ok)
        return Evaluation(v, {"samples": [[x, "t"] for x in letters], "n_parse_fail": n - ok,
                              "all_failed": ok == 0})


def test_an_all_failed_single_value_is_unknown_and_flagged():
    usage = UsageByRole()
    vf = SingleValue(FakeLM(["I cannot tell.", "Hmm, hard to say."] * 2),
                     ValueOptions(single={"n": 4, "rubric": False}))
    rec = asyncio.run(vf.evaluate(Context(task="t", observations=["o"]), usage=usage))
    assert rec.v is None and rec.all_failed and rec.n_parse_fail == 4
    assert usage.parses["value"].failures == 4 and usage.parses["value"].outputs == 4


def test_unknown_leaf_backs_up_its_parents_value_and_is_marked():
    hooks = worked_example_hooks()
    hooks.values["A/C"] = None                       # every sample of A/C unreadable
    res = asyncio.run(MCTS(MCTSConfig(branching_factor=2, n_simulations=3, c_puct=1.0))
                      .plan(hooks, "obs root"))
    tree = res.tree
    node = next(n for n in tree.nodes if n.obs == "obs A/C")
    assert node.value is None and node.info["value_unknown"]
    assert node.info["backed_up_estimate"] == hooks.values["A"]    # the parent's V, not 0
    edge = node.incoming
    assert edge.n == 1 and edge.q == pytest.approx(hooks.values["A"])
    data = tree_to_dict(tree)
    saved = data["nodes"][node.node_id]
    assert saved["value"] is None and saved["info"]["value_unknown"] is True


def test_with_nothing_known_the_simulation_is_not_backed_up():
    hooks = worked_example_hooks()
    hooks.values["A"] = None                         # a child of the root: no ancestor value
    res = asyncio.run(MCTS(MCTSConfig(branching_factor=2, n_simulations=1)).plan(hooks, "r"))
    root = res.tree.root
    assert root.ns == 0 and all(e.n == 0 and e.q == 0.0 for e in root.edges)
    assert res.tree.counters["unbacked"] == 1 and res.tree.counters["simulations"] == 1


def test_estimate_walks_up_to_the_root_mean():
    hooks = worked_example_hooks()
    res = asyncio.run(MCTS(MCTSConfig(branching_factor=2, n_simulations=2)).plan(hooks, "r"))
    root = res.tree.root
    child = root.edges[0].child
    child.value = None
    mean = sum(e.n * e.q for e in root.edges) / root.ns
    assert estimate(child) == pytest.approx(mean)


@pytest.mark.parametrize("algorithm", ["mcts", "best-first"])
@pytest.mark.parametrize("readable, stops", [(1, False), (9, False), (10, True), (20, True)])
def test_early_stop_needs_a_share_of_readable_samples(algorithm, readable, stops):
    hooks = worked_example_hooks()
    hooks.__class__ = RecordHooks
    hooks.values = {k: (v, 20, 20) for k, v in hooks.values.items()}
    hooks.values["A"] = (1.0, readable, 20)         # the top of the scale from few samples
    res = asyncio.run(make_algorithm({"algorithm": algorithm, "branching_factor": 2,
                                      "n_simulations": 6}).plan(hooks, "obs root"))
    assert (res.tree.counters["stopped_by"] == "value_one") is stops


def test_the_minimum_share_is_configurable():
    hooks = worked_example_hooks()
    hooks.__class__ = RecordHooks
    hooks.values = {k: (v, 20, 20) for k, v in hooks.values.items()}
    hooks.values["A"] = (1.0, 1, 20)
    res = asyncio.run(make_algorithm({"algorithm": "mcts", "branching_factor": 2,
                                      "n_simulations": 6, "early_stop_min_parsed": 0.05})
                      .plan(hooks, "obs root"))
    assert res.tree.counters["stopped_by"] == "value_one"
