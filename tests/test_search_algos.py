"""Best-of-N and AB-MCTS on the shared contract (issue 14 item 3; docs/methods/best-of-n.md,
docs/methods/ab-mcts.md): seeded determinism, budgets, what each commits, AB-MCTS widening vs
deepening on scripted values, unknown values, result shape, and runs through `clew eval` /
`clew view` with heuristic and LM roles."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest
from clew.cli.main import main
from clew.runner.registry import build_agent
from clew.search.ab_mcts import ABMCTS, ABMCTSConfig, Posterior
from clew.search.algorithm import Evaluation, SearchResult
from clew.search.best_of_n import BestOfN, BestOfNConfig
from clew.search.registry import make_algorithm
from clew.search.tree import load_tree, tree_from_dict, tree_to_dict
from test_search_mcts import ScriptedHooks

ALGOS = ["best-of-n", "ab-mcts"]


class SeededHooks(ScriptedHooks):
    """Scripted priors and values, plus the seed a search agent's hooks carry."""

    def __init__(self, priors, values, seed=0, **kw):
        super().__init__(priors, values, **kw)
        self.seed = seed


def full_tree(width, depth, value, prior=None):
    """Every state up to ``depth`` has ``width`` actions a0, a1, ... (priors decreasing unless
    given); ``value(state_name)`` scores each state."""
    acts = [f"a{i}" for i in range(width)]
    ps = prior or [(width - i) / sum(range(1, width + 1)) for i in range(width)]
    priors, values = {}, {}
    for d in range(depth + 1):
        for path in itertools.product(acts, repeat=d):
            name = "/".join(path)
            if d < depth:
                priors[name] = list(zip(acts, ps))
            if d:
                values[name] = value(name)
    return priors, values


def spread(name):
    """Deterministic, distinct values in [0.05, 0.85) for every state."""
    return 0.05 + (sum(ord(c) * (i + 1) for i, c in enumerate(name)) % 80) / 100


def plan(algorithm, hooks, **cfg):
    return asyncio.run(make_algorithm({"algorithm": algorithm, **cfg}).plan(hooks, "obs root"))


def dump(res: SearchResult):
    d = tree_to_dict(res.tree)
    d["counters"].pop("seconds")
    return d


# --- determinism and budget ----------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ALGOS)
def test_same_seed_same_tree_other_seed_other_draws(algorithm):
    priors, values = full_tree(3, 3, spread)
    cfg = {"branching_factor": 3, "n_simulations": 12, "max_depth_actions": 3}
    a = dump(plan(algorithm, SeededHooks(priors, values, seed=7), **cfg))
    b = dump(plan(algorithm, SeededHooks(priors, values, seed=7), **cfg))
    assert a == b
    others = [dump(plan(algorithm, SeededHooks(priors, values, seed=s), **cfg))["traversals"]
              for s in range(8, 12)]
    assert any(t != a["traversals"] for t in others)      # the seed reaches the draws


@pytest.mark.parametrize("algorithm", ALGOS)
@pytest.mark.parametrize("n", [1, 5, 17])
def test_the_simulation_budget_is_respected(algorithm, n):
    priors, values = full_tree(4, 4, spread)
    hooks = SeededHooks(priors, values)
    res = plan(algorithm, hooks, branching_factor=4, n_simulations=n, max_depth_actions=4)
    tree = res.tree
    assert tree.counters["simulations"] == n == len(tree.traversals)
    assert tree.counters["stopped_by"] == "simulations"
    assert tree.counters["value_calls"] == len(hooks.evaluated) <= n
    if algorithm == "ab-mcts":                    # every simulation creates exactly one node
        assert len(tree.nodes) == n + 1
        assert tree.counters["value_calls"] == n


@pytest.mark.parametrize("algorithm", ALGOS)
def test_value_call_budget_and_a_top_value_stop(algorithm):
    priors, values = full_tree(3, 2, spread)
    res = plan(algorithm, SeededHooks(priors, values), branching_factor=3, n_simulations=50,
               max_depth_actions=2, max_value_calls=4)
    assert res.tree.counters["stopped_by"] == "value_calls"
    assert res.tree.counters["value_calls"] == 4
    values["a1/a2"] = 1.0                               # a leaf at the top of the scale
    res = plan(algorithm, SeededHooks(priors, values), branching_factor=3, n_simulations=200,
               max_depth_actions=2)
    assert res.stopped_by == "value_one" and res.kind == "path"
    assert [e.key for e in res.decision] == ["a1", "a2"]


# --- best-of-N -------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(5))
def test_best_of_n_commits_the_first_action_of_the_best_episode(seed):
    priors, values = full_tree(3, 3, spread)
    hooks = SeededHooks(priors, values, seed=seed)
    res = plan("best-of-n", hooks, branching_factor=3, n_simulations=8, max_depth_actions=3)
    tree = res.tree
    leaves = [tree.edge(t[-1]).child for t in tree.traversals]
    assert all(leaf.terminal_reason == "depth" and leaf.depth == 3 for leaf in leaves)
    # only the ends of episodes are valued, each once
    assert all(s.count("/") == 2 for s in hooks.evaluated)
    assert len(hooks.evaluated) == len({leaf.node_id for leaf in leaves})
    scores = [leaf.value for leaf in leaves]
    best = scores.index(max(scores))                    # the earlier episode keeps a tie
    assert res.kind == "single" and res.stopped_by == "simulations"
    assert res.decision == [tree.edge(tree.traversals[best][0])]
    assert tree.meta["best_score"] == max(scores)
    # edge statistics: Q is the mean episode score through the edge
    for edge in tree.root.edges:
        through = [s for t, s in zip(tree.traversals, scores) if t[0] == edge.edge_id]
        assert edge.n == len(through)
        if through:
            assert edge.q == pytest.approx(sum(through) / len(through))


def test_best_of_n_draws_root_actions_by_prior():
    priors, values = full_tree(2, 1, lambda s: 0.3, prior=[0.9, 0.1])
    res = plan("best-of-n", SeededHooks(priors, values, seed=3), branching_factor=2,
               n_simulations=200, max_depth_actions=1)
    first = [res.tree.edge(t[0]).key for t in res.tree.traversals]
    assert 0.8 < first.count("a0") / len(first) < 0.97


def test_best_of_n_ends_episodes_at_env_done_and_stop():
    priors = {"": [("a", 0.5), ("s", 0.5)], "a": [("b", 1.0)]}
    values = {"a/b": 0.4, "STOP": 0.7}
    hooks = SeededHooks(priors, values, stops={"s"}, done={"a/b"})
    res = plan("best-of-n", hooks, branching_factor=2, n_simulations=10, max_depth_actions=5)
    reasons = {res.tree.edge(t[-1]).child.terminal_reason for t in res.tree.traversals}
    assert reasons == {"env_done", "stop"}
    assert res.decision[0].key == "s"                   # the stop episode scored higher
    assert sorted(set(hooks.evaluated)) == ["STOP", "a/b"]


# --- AB-MCTS ---------------------------------------------------------------------------------
def shape(res):
    tree = res.tree
    root_width = sum(e.child is not None for e in tree.root.edges)
    return root_width, max(n.depth for n in tree.nodes)


def test_ab_mcts_widens_when_children_are_poor_and_deepens_under_a_good_one():
    cfg = {"branching_factor": 8, "n_simulations": 24, "max_depth_actions": 8}
    widths = {"poor": 0, "good": 0}
    for seed in range(6):
        # all states poor: continuing a child is worth no more than a fresh one
        poor = plan("ab-mcts", SeededHooks(*_lazy_world(lambda s: 0.1), seed=seed), **cfg)
        # the first root child and everything below it is good
        good = plan("ab-mcts", SeededHooks(*_lazy_world(
            lambda s: 0.9 if s.startswith("a0") else 0.1), seed=seed), **cfg)
        under = {name: sum(res.tree.edge(t[0]).key == "a0" for t in res.tree.traversals)
                 for name, res in (("poor", poor), ("good", good))}
        assert under["good"] >= 12 and under["good"] >= 2 * under["poor"], (seed, under)
        assert good.decision[0].key == "a0"
        assert shape(poor)[0] == 8                   # poor children: the root widened fully
        widths["poor"] += shape(poor)[0]
        widths["good"] += shape(good)[0]
    assert widths["poor"] > widths["good"] + 6


class _LazyDict(dict):
    """priors / values of an unbounded full tree, computed on first use."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def __missing__(self, key):
        return self.fn(key)

    def get(self, key, default=None):
        return self.fn(key)


def _lazy_world(value, width=8):
    acts = [f"a{i}" for i in range(width)]
    ps = [(width - i) / sum(range(1, width + 1)) for i in range(width)]
    return _LazyDict(lambda s: list(zip(acts, ps))), _LazyDict(value)


def test_ab_mcts_widens_at_the_root_when_a_new_child_beats_the_old_ones():
    # the root's first children are poor, later ones good: GEN keeps paying off at the root
    ranks = {f"a{i}": i for i in range(8)}
    priors, values = _lazy_world(lambda s: 0.1 if ranks[s.split("/")[0]] < 2 else 0.8)
    res = plan("ab-mcts", SeededHooks(priors, values, seed=1), branching_factor=8,
               n_simulations=20, max_depth_actions=8)
    width, _ = shape(res)
    assert width >= 3 and res.decision[0].key not in ("a0", "a1")


def test_ab_mcts_gen_is_the_next_edge_in_prior_order_and_expansion_is_lazy():
    priors, values = full_tree(3, 3, spread)
    hooks = SeededHooks(priors, values, seed=2)
    res = plan("ab-mcts", hooks, branching_factor=3, n_simulations=9, max_depth_actions=3)
    tree = res.tree
    for node in tree.nodes:
        made = [e.child is not None for e in node.edges]
        assert made == sorted(made, reverse=True)       # children in prior order, no gaps
    # a node is expanded only when something is created under it (the root: free)
    assert set(tree.expansion_order) == {0} | {e.parent.node_id for e in tree.edges
                                               if e.child is not None}
    assert tree.counters["policy_calls"] == len(tree.expansion_order)


def test_ab_mcts_stops_when_the_tree_is_exhausted():
    priors, values = full_tree(2, 2, spread)
    res = plan("ab-mcts", SeededHooks(priors, values), branching_factor=2, n_simulations=50,
               max_depth_actions=2)
    assert res.stopped_by == "tree_exhausted"
    assert res.tree.counters["simulations"] == 6 == len(res.tree.nodes) - 1
    best = max((n for n in res.tree.nodes[1:]), key=lambda n: n.value)
    assert res.decision == [best.path_edges()[0]]


def test_posterior_update_and_draws():
    cfg = ABMCTSConfig()
    prior = Posterior.of([], cfg)
    assert (prior.mean, prior.kappa, prior.nu, prior.tau2) == (0.0, 1.0, 1.0, 0.1)
    post = Posterior.of([0.8, 0.8, 0.8, 0.8], cfg)
    assert post.mean == pytest.approx(0.64) and post.kappa == 5 and post.nu == 5
    assert post.tau2 == pytest.approx((0.1 + 4 / 5 * 0.64) / 5)
    import random

    rng = random.Random(0)
    draws = [post.draw(rng) for _ in range(4000)]
    assert sum(draws) / len(draws) == pytest.approx(0.64, abs=0.03)
    wide = [prior.draw(rng) for _ in range(4000)]
    assert _sd(wide) > _sd(draws)                       # data narrows the posterior


def _sd(xs):
    m = sum(xs) / len(xs)
    return (sum((x - m) ** 2 for x in xs) / len(xs)) ** 0.5


# --- unknown values --------------------------------------------------------------------------
def test_an_unknown_episode_is_never_scored_zero_and_never_wins_by_it():
    priors, values = full_tree(2, 1, lambda s: None, prior=[0.5, 0.5])
    values["a1"] = 0.3
    res = plan("best-of-n", SeededHooks(priors, values, seed=1), branching_factor=2,
               n_simulations=6, max_depth_actions=1)
    tree = res.tree
    a0, a1 = tree.root.edges
    assert a0.child.info["value_unknown"] and a0.child.value is None
    first = tree.edge(tree.traversals[0][0])
    if first is a0:                                # nothing known yet: not backed up
        assert tree.counters["unbacked"] >= 1
    assert a0.n == 0 or a0.q == pytest.approx(0.3)  # the mean so far stands in, not 0
    assert res.decision[0] is a1


def test_ab_mcts_unknown_child_scores_its_parents_value():
    priors, values = full_tree(2, 3, lambda s: 0.6)
    values["a0/a0"] = None
    res = plan("ab-mcts", SeededHooks(priors, values, seed=0), branching_factor=2,
               n_simulations=14, max_depth_actions=3)
    node = next(n for n in res.tree.nodes if n.obs == "obs a0/a0")
    assert node.value is None and node.info["value_unknown"]
    assert node.info["backed_up_estimate"] == 0.6
    assert node.incoming.q == pytest.approx(0.6) or node.incoming.n > 1


@pytest.mark.parametrize("algorithm", ALGOS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "0.5", True])
def test_a_value_that_is_not_a_finite_number_is_an_error(algorithm, bad):
    priors, values = full_tree(2, 1, lambda s: bad)
    with pytest.raises(ValueError, match="value function returned"):
        plan(algorithm, SeededHooks(priors, values), branching_factor=2, n_simulations=3,
             max_depth_actions=1)


# --- result shape ----------------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ALGOS)
def test_result_follows_the_search_result_contract(algorithm):
    priors, values = full_tree(3, 3, spread)
    hooks = SeededHooks(priors, values, seed=4)
    res = plan(algorithm, hooks, branching_factor=3, n_simulations=10, max_depth_actions=3)
    assert isinstance(res, SearchResult) and res.kind == "single" and len(res.decision) == 1
    assert res.decision[0] in res.tree.root.edges
    assert res.stopped_by == res.tree.counters["stopped_by"] == "simulations"
    data = tree_to_dict(res.tree)
    assert data["decision"] == {"kind": "single", "edges": [res.decision[0].edge_id]}
    back = tree_from_dict(json.loads(json.dumps(data)))
    assert tree_to_dict(back) == data
    assert hooks.state == ()                            # the simulator is back at the root
    for node in res.tree.nodes:                         # N bookkeeping as in MCTS
        if node.expanded:
            assert node.ns == sum(e.n for e in node.edges)


def test_options_are_typed_and_unknown_ones_named():
    from clew.agents.options import OptionsError

    assert isinstance(build_agent("ab-mcts").algorithm, ABMCTS)
    assert isinstance(build_agent("best-of-n").algorithm, BestOfN)
    agent = build_agent("ab-mcts", search={"prior_tau2": 0.3})
    assert agent.algorithm.config.prior_tau2 == 0.3
    with pytest.raises(OptionsError, match="search.prior_tau2: unknown option for algorithm "
                                           "'best-of-n'"):
        build_agent("best-of-n", search={"prior_tau2": 0.3})
    with pytest.raises(OptionsError, match="search.c_puct: unknown option for algorithm "
                                           "'ab-mcts'"):
        build_agent("ab-mcts", search={"c_puct": 2.0})
    assert BestOfNConfig().n_simulations == ABMCTSConfig().n_simulations


# --- through the agent, the runner and the viewer -------------------------------------------
@pytest.mark.parametrize("preset", ["best-of-n-heuristic", "ab-mcts-heuristic"])
def test_heuristic_presets_record_trees_that_clew_view_renders(preset, tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["eval", "--agent", preset, "--suite", "gridmap-mini:test", "--limit", "1",
               "--out", str(out), "max_episode_steps=3", "agent_options.search.n_simulations=6",
               "agent_options.seed=3"])
    assert rc == 0
    (record,) = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert record["agent"] == preset and record["outcome"]["steps"] >= 1
    trees = sorted((out / "trees").rglob("*.json.gz"))
    assert trees
    tree = load_tree(trees[0])
    assert tree.meta["search_config"]["algorithm"] == preset.removesuffix("-heuristic")
    assert tree.counters["simulations"] <= 6
    html = tmp_path / "view.html"
    assert main(["view", str(trees[0]), "--out", str(html)]) == 0
    assert "tree view written" in capsys.readouterr().out and html.stat().st_size > 1000
    # same seed, same episode
    again = tmp_path / "again"
    assert main(["eval", "--agent", preset, "--suite", "gridmap-mini:test", "--limit", "1",
                 "--out", str(again), "max_episode_steps=3", "agent_options.search.n_simulations=6",
                 "agent_options.seed=3"]) == 0
    (rec2,) = [json.loads(x) for x in (again / "episodes.jsonl").read_text().splitlines()]
    assert rec2["actions"] == record["actions"]


@pytest.mark.parametrize("algorithm", ALGOS)
@pytest.mark.parametrize("suite", ["rooms-v2:test", "paper-003-main:test",
                                   "textminigrid-v1:test"])
def test_heuristic_roles_run_on_every_env_family(algorithm, suite):
    from clew.envs.suites import resolve
    from clew.runner.episodes import run_episode

    tasks = {}
    for t in resolve(suite):
        tasks.setdefault(t.env, t)
    for task in tasks.values():
        agent = build_agent(algorithm, search={"n_simulations": 3}, seed=0)
        trees = []
        rec = asyncio.run(run_episode(agent, task, max_steps=3,
                                      on_tree=lambda t, d, trees=trees: trees.append(d)))
        assert rec["outcome"]["steps"] >= 1 and trees, (task.env, rec["outcome"])
        assert all(d["counters"]["simulations"] <= 3 for d in trees)


@pytest.mark.parametrize("algorithm", ALGOS)
def test_lm_roles_with_a_fake_model(algorithm):
    from test_search_agents import TASK, FakeLM, play, responder

    agent = build_agent(algorithm, model=FakeLM(responder()),
                        search={"branching_factor": 2, "n_simulations": 4},
                        policy={"n_samples_min": 5}, value={"single": {"n": 2,
                                                                       "rubric": False}})
    assert agent.kind == "lm"
    rec, trees = play(agent, TASK)
    assert trees and {"policy", "value"} <= set(rec["usage"])
    assert all(t["meta"]["search_config"]["algorithm"] == algorithm for _, t in trees)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ALGOS)
def test_lm_roles_with_the_tiny_model(algorithm, lively_model_dir):
    from clew.runner.episodes import run_episode
    from test_search_lm_backends import TASK

    agent = build_agent(algorithm, model=f"hf:{lively_model_dir}",
                        search={"branching_factor": 2, "n_simulations": 2},
                        policy={"n_samples_min": 4, "max_tokens": 12},
                        value={"single": {"n": 2, "max_tokens": 12, "rubric": False}})
    trees = []
    rec = asyncio.run(run_episode(agent, TASK, max_steps=2,
                                  on_tree=lambda t, d: trees.append(d)))
    assert rec["outcome"]["steps"] >= 1 and trees
    assert all(u["prompt_tokens"] > 0 for u in rec["usage"].values())


def test_evaluation_records_reach_the_tree():
    priors, values = full_tree(2, 1, spread)
    hooks = SeededHooks(priors, values)

    async def evaluate(node):
        s = hooks.name(hooks.state)
        hooks.evaluated.append(s)
        return Evaluation(values[s], {"state": s})

    hooks.evaluate = evaluate
    res = plan("ab-mcts", hooks, branching_factor=2, n_simulations=2, max_depth_actions=1)
    assert [n.value_record for n in res.tree.nodes[1:]] == [{"state": "a0"}, {"state": "a1"}]


def test_both_appear_in_the_compute_scaling_report(tmp_path):
    import csv

    from clew.reports.report import write_report

    runs = []
    for preset in ("mcts-heuristic", "best-of-n-heuristic", "ab-mcts-heuristic"):
        for budget in (2, 4):
            out = tmp_path / f"{preset}-{budget}"
            args = ["eval", "--agent", preset, "--suite", "gridmap-mini:test", "--limit", "1",
                    "--out", str(out), "max_episode_steps=2"]
            if budget == 4:                 # one run from the preset's config, one measured
                args.append("agent_options.search.n_simulations=4")
            assert main(args) == 0
            runs.append(out)
    rep = write_report(runs, tmp_path / "report")
    rows = list(csv.DictReader((rep.out / "tables" / "compute.csv").open()))
    by_run = {(r["agent"], r["run"].rsplit("-", 1)[1]): r for r in rows}
    for preset in ("mcts-heuristic", "best-of-n-heuristic", "ab-mcts-heuristic"):
        assert float(by_run[(preset, "4")]["nodes/tree"]) == 4
        assert by_run[(preset, "4")]["from"] == "config"
        # the preset's budget (10) measured on the trees: simulations (fewer after an early
        # stop), not nodes
        assert by_run[(preset, "2")]["from"] == "trees"
        assert 0 < float(by_run[(preset, "2")]["nodes/tree"]) <= 10
    assert (rep.out / "plots" / "scaling_nodes.png").exists()
