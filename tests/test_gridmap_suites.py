"""Grid-map suites (docs/methods/envs.md#grid-map-with-task-dag) and the semantic cooking maps with their twins (docs/methods/envs.md#grid-map-with-task-dag)."""

from collections import Counter

from clew.agents.heuristics.gridmap_frontier import oracle_actions
from clew.envs.gridmap.instance import Instance
from clew.envs.gridmap.semantic import MAPS, cooking_instance, symbolic_names
from clew.envs.suites import get_suite, resolve


def test_gridmap_v1_splits():
    suite = get_suite("gridmap-v1")
    test, train = suite.split("test"), suite.split("train")
    assert len(test) == len(train) == 45
    assert all(t.split == "test" for t in test) and all(t.split == "train" for t in train)
    assert {t.seed for t in test} == set(range(5)) and {t.seed for t in train} == set(range(5, 10))
    configs = Counter((t.params["presets"]["exploration_level"], t.params["presets"]["dag_level"])
                      for t in test)
    assert len(configs) == 9 and set(configs.values()) == {5}
    ids = [t.id for t in test + train]
    assert len(set(ids)) == len(ids)
    test_maps = {str(t.params["cells"]) + str(t.params["nodes"]) for t in test}
    assert not test_maps & {str(t.params["cells"]) + str(t.params["nodes"]) for t in train}


def test_gridmap_mini_is_small():
    tasks = resolve("gridmap-mini:all")
    assert 4 <= len(tasks) <= 10
    assert all(t.params["width"] <= 5 and t.params["height"] <= 5 for t in tasks)


def test_semantic_suite_and_twins():
    tasks = resolve("gridmap-semantic:test")
    assert len(tasks) == 4 * 2 * 5
    for map_id in MAPS:
        sem, sym = cooking_instance(map_id, "semantic"), cooking_instance(map_id, "symbolic")
        rename = symbolic_names(map_id)
        assert 60 <= len(sem.cells) <= 90
        assert 5 <= len(sem.nodes) <= 9
        assert (sem.cells, sem.start, sem.budget) == (sym.cells, sym.start, sym.budget)
        assert sym.goal == rename[sem.goal]
        for n in sem.nodes:
            twin = sym.node_by_name[rename[n.name]]
            assert twin.cell == n.cell
            assert twin.options == tuple(tuple(rename[p] for p in o) for o in n.options)
        assert all(" " not in name for name in sym.names)
        assert len(oracle_actions(sem)) <= sem.budget  # D30: feasible within B


def test_semantic_dags_follow_section_4():
    g201 = cooking_instance(201)
    assert g201.goal == "Tomato Pasta with Cheese"
    assert set(g201.goal_node.options[0]) == {"Tomato Pasta", "Cheese"}
    g203 = cooking_instance(203)
    assert g203.node_by_name["Grated Cheese"].options == (("Parmesan",), ("Mozzarella",))
    g204 = cooking_instance(204)
    assert set(g204.node_by_name["Tomato Sauce"].options[0]) == {"Garlic Oil", "Tomato"}


def test_related_items_are_far_apart_in_at_least_two_maps():
    def far(inst, a, b):
        d = inst.distances(inst.node_by_name[a].cell, inst.node_by_name[b].cell)
        return d >= 10
    checks = [far(cooking_instance(201), "Tomato Sauce", "Cheese"),
              far(cooking_instance(203), "Parmesan", "Mozzarella"),
              far(cooking_instance(204), "Garlic", "Olive Oil")]
    assert sum(checks) >= 2


def test_v1_instances_mostly_feasible_for_the_oracle():
    """D30: log-only in the generator; the suite should not be dominated by infeasible maps."""
    tasks = resolve("gridmap-v1:test")
    over = [t.id for t in tasks
            if len(oracle_actions(Instance.from_params(t.params))) > t.params["budget"]]
    assert len(over) <= 2, over
