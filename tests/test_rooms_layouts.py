"""Frozen Dark Treasure Rooms layouts and suites (docs/methods/envs.md#dark-treasure-rooms)."""

import json

import pytest
from clew.envs.rooms.generator import (
    V2_BALLS,
    best_three_reachable,
    build_frozen,
    expected_best,
    frozen_specs,
)
from clew.envs.rooms.layouts import LAYOUTS_FILES, Layout, centre_rooms, frozen_layouts
from clew.envs.rooms.solver import layout_best_route
from clew.envs.suites import get_suite, resolve


@pytest.mark.parametrize("version", sorted(LAYOUTS_FILES))
def test_frozen_file_equals_what_the_seeds_give(version):
    # if this fails, Python's random or the generator changed: keep the file (it is the data)
    # and find out why before regenerating.
    stored = json.loads(LAYOUTS_FILES[version].read_text())
    assert stored["version"] == version
    assert stored["layouts"] == build_frozen(version)["layouts"]


@pytest.mark.parametrize("layout_id", sorted(frozen_layouts()))
def test_frozen_layout_properties(layout_id):
    data = frozen_layouts()[layout_id]
    layout = Layout.from_dict(data)  # validates names, adjacency and the stored rmax
    v2 = layout_id.startswith("v2-")
    assert layout.id == layout_id and layout.size == int(layout_id.removeprefix("v2-")[0])
    assert len(layout.distances()) == layout.n_rooms  # every room reachable
    assert layout.door_budget == layout.eccentricity  # C = distance to the farthest room
    n_balls = V2_BALLS[layout.size] if v2 else 5
    assert len(layout.balls) == n_balls and all(b.room != layout.start for b in layout.balls)
    assert all(1 <= b.reward <= 10 for b in layout.balls)
    names = [d.name for d in layout.doors] + [b.name for b in layout.balls]
    assert len(set(names)) == len(names)
    door_sets = [frozenset(d.name for d, _ in layout.doors_of[r]) for r in range(layout.n_rooms)]
    assert len(set(door_sets)) == layout.n_rooms  # rooms are distinguishable
    assert 0 < layout_best_route(layout).value <= sum(sorted(b.reward for b in layout.balls)[-3:])
    if max(len(bs) for bs in layout.balls_of.values()) <= 3:
        assert data["n_observation_states"] == layout.n_rooms + sum(
            2 ** len(layout.balls_of[r]) - 1 for r in range(layout.n_rooms))
    if v2:  # tree-like, centred start, the best three collectable, R^max near its expectation
        assert len(layout.doors) == layout.n_rooms - 1
        door_pairs = [d.rooms for d in layout.doors]
        assert layout.start in centre_rooms(layout.size, door_pairs, data["meta"]["centre_slack"])
        assert data["meta"]["centre_slack"] == 4
        assert best_three_reachable(layout)
        assert abs(data["rmax"] - expected_best(n_balls)) <= 3
        assert data["meta"]["generator_version"] == 2
    else:
        assert "generator_version" not in data["meta"]


def test_expected_best_three_matches_the_spec():
    # docs/methods/envs.md#dark-treasure-rooms: best 3 of b integer U{1..10} rewards, b = 3..7
    got = [round(expected_best(b), 1) for b in (3, 4, 5, 6, 7)]
    assert got == [16.5, 19.5, 21.5, 22.9, 23.9]


@pytest.mark.parametrize("version", sorted(LAYOUTS_FILES))
def test_frozen_layout_ids_and_seeds(version):
    ids = [lid for lid, _, _ in frozen_specs(version)]
    assert sorted(ids) == sorted(i for i in frozen_layouts() if i.startswith("v2-") == (version == 2))
    assert len(ids) == 39 and len({seed for _, _, seed in frozen_specs(version)}) == 39


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


def test_v2_suites_use_the_v2_layouts():
    v2 = get_suite("rooms-v2")
    assert v2.version == 2 and len(v2.split("test")) == 90 and len(v2.split("train")) == 30
    assert {t.params["layout"]["id"][:3] for t in v2.split("all")} == {"v2-"}
    assert not {t.id for t in v2.split("all")} & {t.id for t in get_suite("rooms-v1").split("all")}
    explore = resolve("rooms-v2-7x7-explore:test")
    assert [t.params["layout"] for t in explore] == [
        t.params["layout"] for t in resolve("rooms-v2-7x7:test")]
