"""Frozen Dark Treasure Rooms layouts and suites (spec_001 §2.1-2.2, §3.2)."""

import json

import pytest
from clew.envs.rooms.generator import build_frozen, frozen_specs
from clew.envs.rooms.layouts import LAYOUTS_FILE, Layout, frozen_layouts
from clew.envs.rooms.solver import layout_best_route
from clew.envs.suites import get_suite, resolve


def test_frozen_file_equals_what_the_seeds_give():
    # if this fails, Python's random or the generator changed: keep the file (it is the data)
    # and find out why before regenerating.
    stored = json.loads(LAYOUTS_FILE.read_text())
    assert stored["layouts"] == build_frozen()["layouts"]


@pytest.mark.parametrize("layout_id", sorted(frozen_layouts()))
def test_frozen_layout_properties(layout_id):
    data = frozen_layouts()[layout_id]
    layout = Layout.from_dict(data)  # validates names, adjacency and the stored rmax
    assert layout.id == layout_id and layout.size == int(layout_id[0])
    assert len(layout.distances()) == layout.n_rooms  # every room reachable
    assert layout.door_budget == layout.eccentricity  # C = distance to the farthest room
    assert len(layout.balls) == 5 and all(b.room != layout.start for b in layout.balls)
    assert all(1 <= b.reward <= 10 for b in layout.balls)
    names = [d.name for d in layout.doors] + [b.name for b in layout.balls]
    assert len(set(names)) == len(names)
    door_sets = [frozenset(d.name for d, _ in layout.doors_of[r]) for r in range(layout.n_rooms)]
    assert len(set(door_sets)) == layout.n_rooms  # rooms are distinguishable
    assert 0 < layout_best_route(layout).value <= sum(sorted(b.reward for b in layout.balls)[-3:])
    assert data["n_observation_states"] == layout.n_rooms + sum(
        2 ** len(layout.balls_of[r]) - 1 for r in range(layout.n_rooms))  # ≤ 3 balls per room


def test_frozen_layout_ids_and_seeds():
    ids = [lid for lid, _, _ in frozen_specs()]
    assert sorted(ids) == sorted(frozen_layouts())
    assert len(ids) == 39 and len({seed for _, _, seed in frozen_specs()}) == 39


def test_suites_have_train_and_test_splits_with_ten_runs_per_test_layout():
    v1 = get_suite("rooms-v1")
    test, train = v1.split("test"), v1.split("train")
    assert len(test) == 90 and len(train) == 30
    assert {t.seed for t in test} == set(range(10))
    test_layouts = {t.params["layout"]["id"] for t in test}
    train_layouts = {t.params["layout"]["id"] for t in train}
    assert len(test_layouts) == 9 and not test_layouts & train_layouts
    assert len({t.id for t in test + train}) == 120
    assert all(t.split == "test" for t in test) and all(t.split == "train" for t in train)
    seven = resolve("rooms-7x7:test")
    assert len(seven) == 30 and all(t.params["layout"]["size"] == 7 for t in seven)
    explore = resolve("rooms-7x7-explore:test")
    assert {t.params["instruction"] for t in explore} == {"explore"}
    assert [t.params["layout"] for t in explore] == [t.params["layout"] for t in seven]
