"""docs/methods/metric-best-found.md#explore-exploit-baselines: the explore–exploit baselines follow their algorithms and reach sensible rewards."""

from __future__ import annotations

import asyncio
import math

import pytest
from clew.agents.heuristics.query_baselines import (
    ExploreExploit,
    HillBaseline,
    MaxSatBaseline,
    RandomQuery,
    TreeBaseline,
    n_explore,
)
from clew.envs.oracle_search import hill, maxsat, treesearch
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent


def play(agent, task, key="k"):
    return asyncio.run(run_episode(agent, task, key=key, max_invalid_streak=None))


def rewards(agent, task, runs):
    return [play(agent, task, f"{task.id}#{r}")["metrics"]["normalized_reward"]
            for r in range(runs)]


def queries(record):
    return [s["info"]["query"] for s in record["steps"]]


def test_n_explore_matches_the_spec():
    assert [n_explore(0.8, n) for n in (36, 48, 60)] == [28, 38, 48]
    assert [n_explore(0.5, n) for n in (36, 48)] == [18, 24]


def test_hill_baseline_strata_then_window():
    task = hill.generate_task({"instance": "H-B2", "budget": 36}, 0)
    rec = play(HillBaseline(), task)
    assert rec["outcome"]["steps"] == 36 and rec["outcome"]["invalid"] == 0
    xs = [float(q[2:]) for q in queries(rec)]
    delta = 10 / 28
    for t, x in enumerate(xs[:28]):  # stratum t, left to right
        assert t * delta <= x <= (t + 1) * delta
    values = [hill.hill_value(x, hill.H_B2) for x in xs]
    for t in range(28, 36):
        best = xs[max(range(t), key=lambda i: (round(values[i], 4), -i))]
        assert abs(xs[t] - best) <= 0.25 + 1e-12 and 0 <= xs[t] <= 10


def test_hill_alpha_zero_first_query_uniform_then_window():
    task = hill.generate_task({"instance": "H-B2", "budget": 10}, 0)
    xs = [float(q[2:]) for q in queries(play(HillBaseline(alpha=0.0), task))]
    assert all(abs(x - xs[0]) <= 0.25 + 1e-12 for x in xs[1:])


def test_tree_baseline_greedy_follows_parent_values():
    task = treesearch.generate_task({"instance": "T-main", "budget": 48}, 0)
    rec = play(TreeBaseline(tau=0), task)
    values, parent = task.params["values"], task.params["parent"]
    known = {task.params["root"]: 0}
    for q in queries(rec):
        node = int(q.split("=")[1])
        frontier = [v for v in range(len(parent)) if v not in known and parent[v] in known]
        assert known[parent[node]] == max(known[parent[v]] for v in frontier)
        known[node] = values[node]


def test_tree_softmax_probabilities():
    """P(u) ∝ exp(parent value / τ): a node under a parent worth 4 more is e times as likely."""
    from clew.agents.base import Episode
    from clew.envs.registry import make

    task = treesearch.generate_task({"r_trap": 1, "r_good": 1, "b": 1, "d_trap": 3, "d_good": 3,
                               "budget": 5}, 0)
    counts = {"trap": 0, "good": 0}
    trap = task.params["gateways"]["trap"][0]
    good = task.params["gateways"]["good"][0]
    runs = 4000
    for r in range(runs):
        env = make("treesearch")
        ep = Episode(task, env, env.reset(task), key=f"r{r}")
        env.step(f"node={good}")   # value 1
        env.step(f"node={trap}")   # value 2: frontier = child of good (score 1), child of trap (2)
        node = TreeBaseline(tau=1.0).next_node(ep)
        counts["trap" if env.parents()[node] == trap else "good"] += 1
    expected = math.e / (1 + math.e)
    assert counts["trap"] / runs == pytest.approx(expected, abs=0.03)


def test_maxsat_baseline_random_then_single_flips():
    task = maxsat.generate_task({"instance": "M-main", "budget": 36}, 0)
    rec = play(MaxSatBaseline(), task)
    bits = [q[5:] for q in queries(rec)]
    scores = [s["info"]["value"] for s in rec["steps"]]
    for t in range(18, 36):
        best = bits[max(range(t), key=lambda i: (scores[i], -i))]
        assert sum(a != b for a, b in zip(best, bits[t])) == 1


def test_dispatch_and_registry():
    assert isinstance(build_agent("explore-exploit"), ExploreExploit)
    assert isinstance(build_agent("random-query"), RandomQuery)
    with pytest.raises(ValueError, match="plays treesearch"):
        play(TreeBaseline(), hill.generate_task({"instance": "H-B2", "budget": 3}, 0))
    with pytest.raises(ValueError, match="tau"):
        build_agent("tree-baseline", tau=-1)


def test_episodes_are_reproducible_and_repeats_differ():
    task = hill.generate_task({"instance": "H-B2", "budget": 12}, 0)
    a, b = play(ExploreExploit(), task, "x#0"), play(ExploreExploit(), task, "x#0")
    assert queries(a) == queries(b)
    assert queries(play(ExploreExploit(), task, "x#1")) != queries(a)


@pytest.mark.parametrize("env,params,runs", [
    ("hill", {"instance": "H-B2", "budget": 48}, 60),
    ("tree", {"instance": "T-main", "budget": 48}, 40),
    ("maxsat", {"instance": "M-main", "budget": 48}, 60),
])
def test_baselines_beat_random_queries(env, params, runs):
    """docs/methods/metric-best-found.md#aggregation: the explore–exploit baseline is the yardstick; it must beat uniform queries and
    clear the level reachable without the key structure (needle / good chain / gold clause)."""
    gen = {"hill": hill, "tree": treesearch, "maxsat": maxsat}[env].generate_task
    task = gen(params, 0)
    base = rewards(ExploreExploit(), task, runs)
    rand = rewards(RandomQuery(), task, runs)
    mean_b, mean_r = sum(base) / runs, sum(rand) / runs
    assert mean_b > mean_r
    cap = {"hill": 5.001 / 21.018, "tree": 17 / 45, "maxsat": 40 / 120}[env]
    assert mean_b > cap  # on average the baseline finds what a no-structure policy cannot
    assert all(0 <= r <= 1 + 1e-12 for r in base + rand)
