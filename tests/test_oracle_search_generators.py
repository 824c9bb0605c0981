"""docs/methods/envs.md#oracle-search-tasks: generators against their parameters, optima against brute force, fixed instances."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from clew.envs.base import Task
from clew.envs.oracle_search import hill, maxsat, treesearch
from clew.envs.oracle_search.suites import BUDGETS, e4_params
from clew.envs.registry import generate, make
from clew.envs.suites import resolve
from hypothesis import given, settings
from hypothesis import strategies as st

# --- HillSearch -------------------------------------------------------------------------------


def test_hill_fixed_instance_vectors():
    """Appendix A.1 and the docs/methods/envs.md#hillsearch table (both denominators)."""
    b2 = hill.FIXED["H-B2"]
    assert hill.hill_value(1.3, b2, "w") == pytest.approx(20.991142, abs=1e-6)
    assert hill.hill_value(1.25, b2, "w") == pytest.approx(16.514069, abs=1e-6)
    assert hill.hill_value(1.4, b2, "w") == pytest.approx(8.310190, abs=1e-6)
    assert hill.hill_value(2.77, b2, "w") == pytest.approx(5.0, abs=1e-6)
    assert hill.hill_value(5.0, b2, "w") == pytest.approx(0.382621, abs=1e-6)
    assert hill.hill_value(0.0, b2, "w") == pytest.approx(0.0, abs=1e-6)
    assert hill.hill_value(1.25, b2, "2w") == pytest.approx(18.63395, abs=1e-5)
    assert hill.hill_value(1.4, b2, "2w") == pytest.approx(13.152241, abs=1e-6)
    assert hill.hill_value(5.0, b2, "2w") == pytest.approx(0.633434, abs=1e-6)
    for name, denom, x_star, opt in [("H-B2", "w", 1.300148, 20.991186),
                                     ("H-B2", "2w", 1.300231, 21.018096),
                                     ("H-E3", "w", 6.201350, 21.127935),
                                     ("H-E3", "2w", 6.201781, 21.505502)]:
        x, y = hill.hill_optimum(hill.FIXED[name], denom)
        assert x == pytest.approx(x_star, abs=2e-6)
        assert y == pytest.approx(opt, abs=1e-6)


def test_hill_fixed_lists_are_verbatim():
    b2 = hill.FIXED["H-B2"]
    assert [c for c, _, _ in b2] == [1.33, 2.77, 4.01, 5.31, 6.45, 7.82, 8.95, 1.3]
    assert [h for _, _, h in b2] == [1, 5, 2, 1, 2, 3, 4, 20]
    e3 = hill.FIXED["H-E3"]
    assert [w for _, w, _ in e3[:7]] == [0.1] * 7 and e3[7] == (6.2, 0.01, 20)


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 5), dk=st.integers(0, 2), seed=st.integers(0, 10**6),
       jd=st.floats(0, 0.9), jn=st.floats(0, 0.9), ad=st.floats(0.001, 0.2),
       an=st.floats(0.001, 0.2))
def test_hill_generator_follows_b1(k, dk, seed, jd, jn, ad, an):
    kn = k + dk
    task = hill.generate_task({"k": k, "k_needle": kn, "j_decoy": jd, "j_needle": jn,
                               "alpha_decoy": ad, "alpha_needle": an}, seed)
    hills = task.params["hills"]
    assert len(hills) == 2 ** k  # 2^k − 1 decoys + the needle
    delta = 10 / 2 ** k
    for m, (c, w, h) in enumerate(hills[:-1], start=1):
        assert abs(c - 10 * m / 2 ** k) <= jd * delta + 1e-12
        assert w == pytest.approx(ad * delta)
        assert h in (1, 2, 3, 4, 5)
    c, w, h = hills[-1]
    fine = 10 / 2 ** kn
    base = [10 * m / 2 ** kn for m in range(1, 2 ** kn, 2)]
    assert min(abs(c - b) for b in base) <= jn * fine + 1e-12
    assert w == pytest.approx(an * fine) and h == 20
    assert 0 < c < 10


@settings(max_examples=40, deadline=None)
@given(hills=st.lists(st.tuples(st.floats(-0.5, 10.5), st.floats(0.002, 2.0),
                                st.floats(0.1, 25.0)), min_size=1, max_size=6),
       denom=st.sampled_from(["w", "2w"]))
def test_hill_optimum_matches_brute_force(hills, denom):
    x_star, opt = hill.hill_optimum(hills, denom)
    xs = np.linspace(0, 10, 1_000_001)
    grid_max = hill.hill_values(xs, hills, denom).max()
    assert 0 <= x_star <= 10
    assert hill.hill_value(x_star, hills, denom) == pytest.approx(opt, rel=1e-12)
    assert opt >= grid_max - 1e-9  # never below a dense grid
    assert opt <= grid_max * (1 + 1e-4) + 1e-9  # and the grid step (1e-5) leaves almost nothing


def test_hill_generator_rejects_bad_parameters():
    with pytest.raises(ValueError, match="k_needle"):
        hill.generate_task({"k": 3, "k_needle": 2}, 0)
    with pytest.raises(ValueError, match="unknown parameter"):
        hill.generate_task({"kk": 3}, 0)
    with pytest.raises(ValueError, match="denominator"):
        hill.generate_task({"denominator": "3w"}, 0)
    with pytest.raises(ValueError, match="budget"):
        make("hillsearch").reset(hill.generate_task({"budget": 0}, 0))


# --- TreeSearch -------------------------------------------------------------------------------


@pytest.mark.parametrize("name,count,top", [("T-main", 772, 45), ("T-alt1", 323, 53),
                                            ("T-alt2", 889, 61)])
def test_tree_paper_instances(name, count, top):
    """Appendix A.2: |V| and max, gateway values 2/1, a trap leaf is worth 16."""
    p = treesearch.generate_task({"instance": name}, 0).params
    parent, values, root = p["parent"], p["values"], p["root"]
    assert len(parent) == count and max(values) == top
    assert sorted(parent).count(-1) == 1 and parent[root] == -1 and values[root] == 0
    assert all(abs(values[v] - values[parent[v]]) <= 4 for v in range(count) if v != root)
    assert all(values[g] == 2 for g in p["gateways"]["trap"])
    assert all(values[g] == 1 for g in p["gateways"]["good"])
    leaves = [v for v in range(count) if v not in set(parent)]
    below_trap = [v for v in leaves if _gateway(parent, root, v) in p["gateways"]["trap"]]
    assert below_trap and all(values[v] == 16 for v in below_trap)


def _gateway(parent, root, v):
    while parent[v] != root:
        v = parent[v]
    return v


@settings(max_examples=40, deadline=None)
@given(rt=st.integers(0, 3), rg=st.integers(0, 3), b=st.integers(1, 3), dt=st.integers(1, 12),
       dg=st.integers(2, 9), seed=st.integers(0, 10**6))
def test_tree_generator_structure(rt, rg, b, dt, dg, seed):
    if rt + rg == 0:
        return
    params = {"r_trap": rt, "r_good": rg, "b": b, "d_trap": dt, "d_good": dg}
    p = treesearch.generate_task(params, seed).params
    parent, values = p["parent"], p["values"]
    assert len(parent) == treesearch.node_count({**treesearch.DEFAULTS, **params})
    assert len(parent) == 1 + rt * (1 + b * dt) + rg * (1 + b * (dg - 1))
    root = p["root"]
    gates = [v for v in range(len(parent)) if parent[v] == root]
    assert sorted(gates) == sorted(p["gateways"]["trap"] + p["gateways"]["good"])
    assert len(p["gateways"]["trap"]) == rt and len(p["gateways"]["good"]) == rg
    # chains: every non-root, non-gateway node has at most one child below its gateway
    kids: dict[int, int] = {}
    for v, u in enumerate(parent):
        if u >= 0:
            kids[u] = kids.get(u, 0) + 1
    assert kids.get(root, 0) == rt + rg
    assert all(kids.get(g, 0) == b for g in gates)
    assert all(n <= 1 for v, n in kids.items() if v != root and v not in gates)
    # values: good chains climb by 4, trap chains by the sparse schedule; OPT closed form
    for v in range(len(parent)):
        if v != root and v not in gates:
            g = _gateway(parent, root, v)
            step = values[v] - values[parent[v]]
            assert step == 4 if g in p["gateways"]["good"] else step in (0, 1)
    good_leaf = 1 + 4 * (dg - 1) if rg else 0
    trap_leaf = 2 + sum(treesearch.chain_increments("trap", dt, treesearch.DEFAULTS)) if rt else 0
    assert max(values) == max(good_leaf, trap_leaf)


def test_tree_ids_are_relabelled():
    roots = {treesearch.generate_task({"instance": "T-alt1"}, seed).params["root"] for seed in range(8)}
    assert len(roots) > 1  # the root is not always node 0: ids carry no structure


def test_tree_chain_length_offsets_are_parameters():
    p = treesearch.generate_task({"r_trap": 1, "r_good": 1, "b": 1, "d_trap": 5, "d_good": 5,
                            "trap_len_offset": -1, "good_len_offset": 0}, 0).params
    assert len(p["parent"]) == 1 + (1 + 4) + (1 + 5)
    assert max(p["values"]) == 1 + 4 * 5


def test_tree_trap_schedule():
    cfg = dict(treesearch.DEFAULTS)
    incs = treesearch.chain_increments("trap", 40, cfg)
    ones = [j for j, inc in enumerate(incs, 1) if inc]
    assert ones == [1, 2, 3, 4, 5, 6, 10, 14, 18, 22, 26, 30, 34, 38]


# --- MaxSatSearch -----------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 10), data=st.data(), seed=st.integers(0, 10**6))
def test_maxsat_generator_and_optimum(n, data, seed):
    kg = data.draw(st.integers(1, n - 1))
    ko = data.draw(st.integers(1, n - kg))
    wg = data.draw(st.integers(1, 20))
    m = wg + data.draw(st.integers(0, 15))
    task = maxsat.generate_task({"n": n, "m": m, "k_gold": kg, "k_other": ko, "w_gold": wg}, seed)
    p = task.params
    clauses, weights = p["clauses"], p["weights"]
    assert sum(weights) == m and weights[0] == wg and all(w == 1 for w in weights[1:])
    assert len(clauses) == 1 + m - wg
    gold = {v for v, _ in clauses[0]}
    assert sorted(gold) == p["gold"] and len(gold) == kg
    for c in clauses[1:]:
        vs = [v for v, _ in c]
        assert len(vs) == ko == len(set(vs)) and not gold & set(vs)
    assert maxsat.score(p["planted"], clauses, weights) == m
    brute = max(maxsat.score(bits, clauses, weights)
                for bits in itertools.product("01", repeat=n))
    assert brute == m
    env = make("maxsatsearch")
    env.reset(Task("maxsatsearch", {**p, "budget": 3}, seed))
    assert env.optimum == m


def test_maxsat_optimum_without_planted_is_brute_force():
    clauses = [[[0, 1], [1, 1]], [[0, 0]], [[1, 0]]]
    env = make("maxsatsearch")
    env.reset(Task("maxsatsearch", {"n": 2, "clauses": clauses, "weights": [3, 2, 2],
                                    "budget": 2}))
    assert env.optimum == 4  # x=00 satisfies the two unit clauses, 11 only the first


@pytest.mark.parametrize("name,m,wg", [("M-main", 120, 80), ("M-alt1", 135, 90),
                                       ("M-alt2", 150, 100), ("M-alt3", 165, 110)])
def test_maxsat_paper_instances(name, m, wg):
    p = maxsat.generate_task({"instance": name}, 0).params
    assert p["n"] == 15 and sum(p["weights"]) == m and p["weights"][0] == wg
    assert len(p["clauses"][0]) == 4 and all(len(c) == 2 for c in p["clauses"][1:])
    assert len(p["clauses"]) - 1 == m - wg


def test_maxsat_generator_rejects_bad_parameters():
    with pytest.raises(ValueError, match="k_gold"):
        maxsat.generate_task({"n": 3, "k_gold": 4}, 0)
    with pytest.raises(ValueError, match="w_gold"):
        maxsat.generate_task({"m": 10, "w_gold": 20}, 0)
    with pytest.raises(ValueError, match="k_other"):
        maxsat.generate_task({"n": 5, "k_gold": 4, "k_other": 2}, 0)


# --- determinism, registry, suites ------------------------------------------------------------


@pytest.mark.parametrize("env,params", [("hillsearch", {"k": 3, "k_needle": 5}),
                                        ("treesearch", {"instance": "T-alt1"}),
                                        ("maxsatsearch", {"instance": "M-alt2"})])
def test_generators_are_pure_and_tasks_round_trip(env, params):
    a, b = generate(env, params, 7), generate(env, params, 7)
    assert a.to_json() == b.to_json()
    assert generate(env, params, 8).to_json() != a.to_json()
    back = Task.from_dict(json.loads(a.to_json()))
    assert back == Task.from_dict(a.to_dict())
    assert make(env).reset(back).text == make(env).reset(a).text


def test_paper_main_suite():
    test = resolve("paper-003-main:test")
    got = sorted((t.env, t.params.get("instance"), t.params["budget"]) for t in test)
    # version 2: the needle-at-6.2 list (H-E3) is the one behind the paper's Table 1 (docs/methods/envs.md#hillsearch)
    want = sorted([("hillsearch", "H-E3", 36), ("hillsearch", "H-E3", 48)]
                  + [("treesearch", "T-main", n) for n in (36, 48, 60)]
                  + [("maxsatsearch", "M-main", n) for n in (36, 48)])
    assert got == want
    assert all(t.params["denominator"] == "2w" for t in test if t.env == "hillsearch")
    train = resolve("paper-003-main:train")
    assert {t.split for t in train} == {"train"} and not {t.id for t in train} & {t.id for t in test}
    paper_trees = [tuple(p.values()) for p in treesearch.FIXED.values()]
    for t in train:
        if t.env == "treesearch":
            g = t.params["generator"]
            key = tuple(g[k] for k in ("r_trap", "r_good", "b", "d_trap", "d_good"))
            assert key not in paper_trees
    budgets = {t.params["budget"] for t in train if t.env == "treesearch"}
    assert budgets == set(BUDGETS["tree"])


def test_hill_instances_swapped_between_versions():
    def hills(name):
        return {t.params["instance"] for t in resolve(f"{name}:test") if t.env == "hillsearch"}
    assert hills("paper-003-main") == hills("paper-003-additional-v1") == {"H-E3"}
    assert hills("paper-003-additional") == hills("paper-003-main-v1") == {"H-B2"}
    rest = [t.to_json() for t in resolve("paper-003-main:test") if t.env != "hillsearch"]
    assert rest == [t.to_json() for t in resolve("paper-003-main-v1:test")
                    if t.env != "hillsearch"]


def test_additional_and_general_suites():
    extra = resolve("paper-003-additional:test")
    assert {t.params.get("instance") for t in extra} == {
        "H-B2", "T-alt1", "T-alt2", "M-alt1", "M-alt2", "M-alt3"}
    assert len(extra) == 2 + 3 * 2 + 2 * 3
    general = resolve("paper-003-general:test")
    for env in ("hillsearch", "treesearch", "maxsatsearch"):
        assert sum(t.env == env for t in general) == 50
    assert all(t.params["budget"] == 48 for t in general)
    train_ids = {t.id for t in resolve("paper-003-general:train")}
    assert not train_ids & {t.id for t in general}


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_e4_parameter_ranges(seed):
    h = e4_params("hill", seed)
    assert h["k"] in (2, 3, 4) and h["k_needle"] in (h["k"] + 1, h["k"] + 2)
    t = e4_params("tree", seed)
    assert 1 <= t["r_trap"] <= 4 and 1 <= t["r_good"] <= 4 and 3 <= t["b"] <= 5
    assert 20 <= t["d_trap"] <= 40 and 10 <= t["d_good"] <= 16
    m = e4_params("maxsat", seed)
    assert 12 <= m["n"] <= 24 and m["k_gold"] in (3, 4) and 2 <= m["k_other"] <= 6
    assert 60 <= m["w_gold"] <= 160 and 30 <= m["m"] - m["w_gold"] <= 80


def test_difficulty_suite_levels():
    tasks = resolve("paper-003-difficulty:test")
    hills = sorted(len(t.params["hills"]) for t in tasks if t.env == "hillsearch")
    assert hills == [2 ** k for k in range(1, 8)]  # k = k' − 1 = 1..7
    widths = sorted((t.params["hills"][-1][1] for t in tasks if t.env == "hillsearch"),
                    reverse=True)
    assert widths == pytest.approx([0.02 / 2 ** i for i in range(7)])
    goods = sorted(len(t.params["gateways"]["good"]) for t in tasks if t.env == "treesearch")
    assert goods == list(range(1, 8))
    kg = sorted(len(t.params["clauses"][0]) for t in tasks if t.env == "maxsatsearch")
    assert kg == list(range(1, 8))
    assert all(t.params["budget"] == 36 for t in tasks)
