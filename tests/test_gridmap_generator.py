"""Instance generator (docs/methods/envs.md#grid-map-with-task-dag, D11, D13–D18): determinism, sizes, DAG shape, connectivity."""

import json
import re
from itertools import pairwise

import pytest
from clew.envs.gridmap.generator import (
    DAG_LEVELS,
    EXPLORATION_LEVELS,
    generate_instance,
    generate_task,
    grid_size,
    l_path,
    resolve_presets,
)
from clew.envs.gridmap.instance import Instance, bfs

# docs/methods/envs.md#grid-map-with-task-dag: expected W = H per (density, node count)
SIZES = {("high", "easy"): 7, ("high", "medium"): 8, ("high", "hard"): 9,
         ("medium", "easy"): 4, ("medium", "medium"): 5, ("medium", "hard"): 6,
         ("low", "easy"): 4, ("low", "medium"): 4, ("low", "hard"): 5}
NODES = {"easy": 4, "medium": 6, "hard": 8}
WIDTHS = {"high": {2, 3}, "medium": {1, 2, 3}, "low": {1}}
CONFIGS = [(e, d) for e in EXPLORATION_LEVELS for d in DAG_LEVELS]


def gen(e, d, seed, **kw):
    return generate_instance({"exploration_level": e, "dag_level": d, **kw}, seed)


def reaches_goal(inst):
    children = {n.name: set(n.children) for n in inst.nodes}
    ok = {inst.goal}
    changed = True
    while changed:
        changed = False
        for u, ch in children.items():
            if u not in ok and ch & ok:
                ok.add(u)
                changed = True
    return ok


@pytest.mark.parametrize("e, d", CONFIGS)
def test_instances_keep_every_structural_promise(e, d):
    for seed in range(12):
        inst = gen(e, d, seed)
        assert (inst.width, inst.height) == (SIZES[e, d],) * 2
        assert len(inst.nodes) == NODES[d]
        assert inst.budget == 3 * len(inst.cells)
        assert inst.start not in {n.cell for n in inst.nodes}
        assert bfs(inst.cells, inst.start).keys() == inst.cells  # one connected component
        assert reaches_goal(inst) == set(inst.names)  # D14 repair: every node matters
        for n in inst.nodes:
            assert re.fullmatch(r"[A-Z0-9]{4}", n.name)
            assert re.search(r"[A-Z]", n.name) and re.search(r"[0-9]", n.name)
            assert len(set(n.options)) == len(n.options)  # no duplicate option sets
            if n.name != inst.goal:
                assert len(n.options) <= (1 if d == "easy" else 2)
                assert all(len(o) <= (3 if d == "hard" else 2) for o in n.options)
        assert len(inst.goal_node.options) == 1  # the goal: a single AND option
        assert inst.presets["exploration_level"] == e and inst.presets["dag_level"] == d
        assert set(inst.presets["widths"]) == WIDTHS[e]


def test_generation_is_deterministic_and_seed_dependent():
    a = generate_task({"exploration_level": "high", "dag_level": "hard"}, 2)
    b = generate_task({"exploration_level": "high", "dag_level": "hard"}, 2)
    c = generate_task({"exploration_level": "high", "dag_level": "hard"}, 3)
    assert a.to_json() == b.to_json()
    assert a.params != c.params
    assert a.id == "gridmap-v2-high-hard-s2" and a.env == "gridmap" and a.seed == 2


def test_configurations_of_one_seed_are_different_maps():
    maps = {json.dumps(gen(e, d, 0).to_params()["cells"]) + str(gen(e, d, 0).names)
            for e, d in CONFIGS}
    assert len(maps) == len(CONFIGS)
    # one DAG level + seed gives the same DAG on each map type (a controlled comparison)
    dags = {tuple((n.name, n.options) for n in gen(e, "medium", 4).nodes)
            for e in EXPLORATION_LEVELS}
    assert len(dags) == 1


def test_task_params_round_trip_through_json():
    task = generate_task({"exploration_level": "medium", "dag_level": "hard"}, 5)
    params = json.loads(json.dumps(task.params))
    assert Instance.from_params(params).to_params() == task.params


def test_or_branching_follows_the_presets():
    counts = {"easy": [0, 0], "hard": [0, 0]}
    for d, count in counts.items():
        for seed in range(60):
            inst = gen("medium", d, seed)
            for n in inst.nodes:
                if n.options and n.name != inst.goal:
                    count[0] += 1
                    count[1] += len(n.options) == 2
    assert counts["easy"][1] == 0
    frac = counts["hard"][1] / counts["hard"][0]
    assert 0.2 < frac < 0.5  # 0.4 drawn, minus duplicates dropped


def test_aliases_and_overrides():
    assert (gen("low", "large", 1).to_params()
            == generate_instance({"exploitation_demand": "high", "dag_level": "hard"}, 1)
            .to_params())
    inst = gen("high", "medium", 0, fixed_size=[8, 8])
    assert (inst.width, inst.height) == (8, 8)
    spaced = gen("high", "easy", 0, min_spacing=3)
    pts = [spaced.start] + [n.cell for n in spaced.nodes]
    assert all(abs(a[0] - b[0]) + abs(a[1] - b[1]) >= 3 for i, a in enumerate(pts)
               for b in pts[i + 1:])
    assert gen("high", "easy", 0, alpha=5).budget == 5 * len(gen("high", "easy", 0).cells)


def test_grid_size_rule():
    p = resolve_presets({"exploration_level": "high", "dag_level": "easy"})
    assert grid_size(p, 4) == (7, 7)  # ceil(40) -> 7x7
    wide = dict(p, aspect=2.0)
    w, h = grid_size(wide, 4)
    assert w * h >= 40 and w == 2 * h  # 10x5 = 50 is the smallest area at ratio 2
    assert (w, h) == (10, 5)


@pytest.mark.parametrize("params, word", [
    ({"exploration_level": "extreme"}, "exploration_level"),
    ({"dag_level": "tiny"}, "dag_level"),
    ({"colour": "red"}, "colour"),
    ({"widths": []}, "widths"),
    ({"exploration_level": "low", "exploitation_demand": "low"}, "disagree"),
])
def test_bad_params_are_named(params, word):
    with pytest.raises(ValueError, match=word):
        generate_task(params, 0)


def test_l_paths_are_4_connected():
    for x_first in (True, False):
        path = l_path((0, 3), (4, 0), x_first)
        assert path[0] == (0, 3) and path[-1] == (4, 0) and len(path) == 8
        assert all(abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1 for a, b in pairwise(path))
