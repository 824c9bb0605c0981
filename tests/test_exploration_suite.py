"""The exploration suites (issue 3 item 5; v2: issue 13): four families, small, disjoint
seen/unseen splits."""

import asyncio
import math

import pytest
from clew.envs import make
from clew.envs.exploration_suite import exploration_v1, exploration_v2
from clew.envs.suites import get_suite, resolve
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent

FAMILY = {"gridmap": "gridmap", "rooms": "rooms", "textminigrid": "textminigrid",
          "hillsearch": "oracle_search", "treesearch": "oracle_search",
          "maxsatsearch": "oracle_search"}
AGENT = {"hillsearch": "random-query", "maxsatsearch": "random-query"}


@pytest.fixture(scope="module", params=["exploration-v1", "exploration-v2"])
def suite(request):
    return get_suite(request.param)


def test_registered_and_resolvable(suite):
    assert suite.name in ("exploration-v1", "exploration-v2")
    assert set(suite.splits) == {"train", "test"}
    assert resolve(f"{suite.name}:test") == suite.split("test")


def test_deterministic(suite):
    again = {1: exploration_v1, 2: exploration_v2}[suite.version]()
    for split in ("train", "test"):
        assert [t.to_json() for t in again.split(split)] == [t.to_json() for t in suite.split(split)]


def test_every_family_in_both_splits_small(suite):
    for split in ("train", "test"):
        tasks = suite.split(split)
        per_family = {}
        for t in tasks:
            assert t.split == split
            per_family[FAMILY[t.env]] = per_family.get(FAMILY[t.env], 0) + 1
        assert set(per_family) == {"gridmap", "rooms", "textminigrid", "oracle_search"}
        assert all(2 <= n <= 4 for n in per_family.values()), per_family
        assert {t.env for t in tasks} == set(FAMILY)  # hill, tree and maxsat all present
        for t in tasks:
            if t.env == "textminigrid":
                assert t.params["rooms"] == 1 and t.params["difficulty"] == "easy"
            elif t.env == "rooms":
                assert t.params["layout"]["size"] == 4 and t.params["n_episodes"] <= 5
            elif FAMILY[t.env] == "oracle_search":
                assert t.params["budget"] <= 20
            else:
                assert len(t.params["cells"]) <= 25


def test_splits_are_disjoint_and_ids_unique(suite):
    train, test = suite.split("train"), suite.split("test")
    ids = [t.id for t in train + test]
    assert len(ids) == len(set(ids))
    assert not {(t.env, t.seed) for t in train} & {(t.env, t.seed) for t in test}
    content = {(t.env, repr(sorted(t.params.items()))) for t in train}
    assert not content & {(t.env, repr(sorted(t.params.items()))) for t in test}


@pytest.mark.parametrize("split", ["train", "test"])
def test_every_task_runs_a_random_episode(suite, split):
    for task in suite.split(split):
        agent = build_agent(AGENT.get(task.env, "random"), seed=1)
        rec = asyncio.run(run_episode(agent, task))
        m = rec["metrics"]
        assert "error" not in m, (task.id, m.get("error"))
        assert rec["outcome"]["stopped_by"] == "done", task.id
        assert 0 <= m["coverage"] <= 1
        if not math.isnan(m["gap_total"]):
            assert m["gap_total"] == pytest.approx(m["gap_exploration"] + m["gap_exploitation"])


def test_gridmap_xl_is_new_maps_of_the_same_configurations():
    """exploration-v1-gridmap-xl: 270 grid maps drawn like exploration-v1's, none of which is a
    map of any split of exploration-v1 or of exploration-v1-wide; its test split is theirs."""
    xl = get_suite("exploration-v1-gridmap-xl")
    train = xl.split("train")
    assert len(train) == 270 and {t.env for t in train} == {"gridmap"}
    assert len({repr(sorted(t.params.items())) for t in train}) == 270
    configs = {t.id.split("/")[2] for t in train}
    assert configs == {t.id.split("/")[2] for t in resolve("exploration-v1:test")
                       if t.env == "gridmap"}
    others = [t for s in ("exploration-v1:train", "exploration-v1:test",
                          "exploration-v1-wide:train") for t in resolve(s) if t.env == "gridmap"]
    assert not ({repr(sorted(t.params.items())) for t in train}
                & {repr(sorted(t.params.items())) for t in others})
    assert [t.id for t in xl.split("test")] == [
        t.id for t in resolve("exploration-v1:test") if t.env == "gridmap"]


def test_textminigrid_xl_is_new_tasks_of_the_same_configurations():
    """exploration-v1-textminigrid-xl: 180 distinct TextMiniGrid tasks drawn like
    exploration-v1's (easy one-room missions, 60 per density), none of which is a test task; its
    test split is exploration-v1's. (One-room layouts are few: one of the 180 equals a layout of
    exploration-v1-wide's train split, which is no leak.)"""
    xl = get_suite("exploration-v1-textminigrid-xl")
    train = xl.split("train")
    layouts = {repr(t.params["layout"]) for t in train}
    assert len(train) == 180 and {t.env for t in train} == {"textminigrid"}
    assert len(layouts) == 180 and {t.params["difficulty"] for t in train} == {"easy"}
    configs = [t.id.split("/")[2] for t in train]
    assert {c: configs.count(c) for c in set(configs)} == {
        t.id.split("/")[2]: 60 for t in resolve("exploration-v1:test") if t.env == "textminigrid"}
    assert min(t.seed for t in train) >= 3000
    tests = [t for s in ("exploration-v1:test", "exploration-v2:test", "textminigrid-v1:test")
             for t in resolve(s) if t.env == "textminigrid"]
    assert len(tests) > 3 and not layouts & {repr(t.params["layout"]) for t in tests}
    assert [t.id for t in xl.split("test")] == [
        t.id for t in resolve("exploration-v1:test") if t.env == "textminigrid"]


def test_wide_test_split_holds_thirty_test_tasks_a_family_apart_from_the_train_tasks():
    """exploration-v1-wide-test: 30 test tasks per family, 10 per configuration, starting with
    exploration-v1's test tasks; none is a train task of the suites the CPU experiment searches
    but the one TextMiniGrid layout its docstring names."""
    test = resolve("exploration-v1-wide-test:test")
    fams = {"gridmap": ["gridmap"], "rooms": ["rooms"], "textminigrid": ["textminigrid"],
            "oracle": ["hillsearch", "treesearch", "maxsatsearch"]}
    for envs in fams.values():
        assert len([t for t in test if t.env in envs]) == 30
    assert len({t.id for t in test}) == len(test) and {t.split for t in test} == {"test"}
    small = resolve("exploration-v1:test")
    for env in {t.env for t in small}:
        assert [t.id for t in test if t.env == env][:len([t for t in small if t.env == env])] \
            == [t.id for t in small if t.env == env]

    def task(t):
        return repr(sorted((k, v) for k, v in t.params.items() if k != "seed"))
    train = [t for s in ("exploration-v1-wide:train", "exploration-v1-gridmap-xl:train",
                         "exploration-v1-textminigrid-xl:train") for t in resolve(s)]
    by_task = {task(t): t.id for t in train}
    shared = [(t.id, by_task[task(t)]) for t in test if task(t) in by_task]
    assert shared == [("xv1/textminigrid/r1-low/s235", "xv1/textminigrid/r1-low/s3072")]


def test_pit_suites_are_the_same_grid_maps_under_the_pits_env():
    """docs/methods/envs.md#pits: exploration-v1-wide(-test)-pits hold their suite and its grid
    maps again as gridmap-pits tasks; exploration-v1-gridmap-pits-xl the xl train maps and the
    wide test maps, with pits only. Every pits task plays, with two pits."""
    for name, split in (("exploration-v1-wide", "train"), ("exploration-v1-wide-test", "test")):
        plain, pits = resolve(f"{name}:{split}"), resolve(f"{name}-pits:{split}")
        grid = [t for t in plain if t.env == "gridmap"]
        assert pits[:len(plain)] == plain and len(pits) == len(plain) + len(grid)
        copies = pits[len(plain):]
        assert {t.env for t in copies} == {"gridmap-pits"}
        assert [(t.id, t.params, t.seed) for t in copies] == [
            (f"{t.id}-pits", t.params, t.seed) for t in grid]
    xl = get_suite("exploration-v1-gridmap-pits-xl")
    assert [t.params for t in xl.split("train")] == [
        t.params for t in resolve("exploration-v1-gridmap-xl:train")]
    assert xl.split("test") == resolve("exploration-v1-wide-test-pits:test")[-30:]
    env = make("gridmap-pits")
    for task in xl.split("test"):
        env.reset(task)
        assert len(env.pit_cells) == 2
