"""Frozen Dark Treasure Rooms layouts and suites (docs/methods/envs.md#dark-treasure-rooms)."""

import json
import math

import pytest
from clew.envs.rooms.generator import (
    FAMILY_WALK,
    TYPICAL_WINDOW,
    VERSIONS,
    best_three_reachable,
    build_frozen,
    expected_best,
    frozen_specs,
    random_walk_stats,
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
    version = int(layout_id[1]) if layout_id.startswith("v") else 1
    assert layout.id == layout_id and layout.size == int(layout_id.split("-")[-2][0])
    assert len(layout.distances()) == layout.n_rooms  # every room reachable
    factor = 1.5 if version == 3 else 1  # C set from the distance to the farthest room
    assert layout.door_budget == math.ceil(factor * layout.eccentricity)
    n_balls = VERSIONS[version]["balls"].get(layout.size, 5)
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
    if version >= 2:  # tree-like, centred start, best three collectable, R^max near expected
        assert len(layout.doors) == layout.n_rooms - 1
        door_pairs = [d.rooms for d in layout.doors]
        assert layout.start in centre_rooms(layout.size, door_pairs, data["meta"]["centre_slack"])
        assert data["meta"]["centre_slack"] == {2: 4, 3: 6}[version]
        assert best_three_reachable(layout)
        assert abs(data["rmax"] - expected_best(n_balls)) <= 3
        assert data["meta"]["generator_version"] == version
    else:
        assert "generator_version" not in data["meta"]
    if version == 3:  # a ball per room: N = n² + b observation sets, all rooms within C
        assert len({b.room for b in layout.balls}) == n_balls
        assert data["n_observation_states"] == layout.n_rooms + n_balls


def test_expected_best_three_matches_the_spec():
    # docs/methods/envs.md#dark-treasure-rooms: best 3 of b integer U{1..10} rewards, b = 3..7
    got = [round(expected_best(b), 1) for b in (3, 4, 5, 6, 7)]
    assert got == [16.5, 19.5, 21.5, 22.9, 23.9]


@pytest.mark.parametrize("version", sorted(LAYOUTS_FILES))
def test_frozen_layout_ids_and_seeds(version):
    ids = [lid for lid, _, _ in frozen_specs(version)]
    prefix = {1: "", 2: "v2-", 3: "v3-"}[version]
    assert sorted(ids) == sorted(i for i in frozen_layouts()
                                 if (i[:3] if i.startswith("v") else "") == prefix)
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


def test_v3_test_layouts_are_typical_of_their_family_for_a_random_walk():
    """The v3 test layouts pass the typicality rule, and it is no free pass: layouts of the same
    family fail it (docs/methods/instances.md)."""
    from clew.envs.rooms.generator import make_layout

    tests = [d for lid, d in frozen_layouts().items()
             if lid.startswith("v3-") and "-t" not in lid]
    assert len(tests) == 9
    for d in tests:
        layout = Layout.from_dict(d)
        stats = random_walk_stats(layout)
        assert [round(x, 3) for x in stats] == [d["meta"]["random_walk_gap"],
                                                 d["meta"]["random_walk_coverage"]]
        for x, mean, window in zip(stats, FAMILY_WALK[layout.size], TYPICAL_WINDOW):
            assert abs(x - mean) <= window
    skipped = 0
    for seed in range(7000, 7012):
        stats = random_walk_stats(make_layout(7, seed, generator_version=3))
        skipped += any(abs(x - m) > w for x, m, w in zip(stats, FAMILY_WALK[7], TYPICAL_WINDOW))
    assert skipped >= 3


def test_v3_suites_use_the_v3_layouts_and_supersede_v2():
    from clew.envs.suites import current_suite

    v3 = get_suite("rooms-v3")
    assert v3.version == 3 and len(v3.split("test")) == 90 and len(v3.split("train")) == 30
    assert {t.params["layout"]["id"][:3] for t in v3.split("all")} == {"v3-"}
    assert current_suite("rooms-v1") == current_suite("rooms-v2") == "rooms-v3"
    assert current_suite("rooms-7x7-explore") == "rooms-v3-7x7-explore"
