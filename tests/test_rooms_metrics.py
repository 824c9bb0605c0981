"""Gap decomposition and exploration statistics of rooms runs (docs/methods/metric-optimal-exploitation-gap.md#gap-decomposition)."""

import asyncio
import math

import pytest
from clew.envs.base import Task
from clew.envs.measures import gap_decomposition, redundancy, sample_efficiency
from clew.envs.rooms.env import RoomsEnv
from clew.envs.rooms.explorer import frontier_action
from clew.envs.rooms.generator import SIZES, TEST_IDS
from clew.envs.rooms.layouts import frozen_layouts
from clew.envs.rooms.metrics import rooms_exploration_metrics, rooms_gap_metrics, rooms_trace
from clew.metrics import score_episode
from clew.runner.registry import build_agent
from hypothesis import given, settings
from hypothesis import strategies as st
from rooms_cases import EPISODE_1, EPISODE_2, example_task, random_walk, small_task

TEST_LAYOUTS = [f"{n}x{n}-{x}" for n in SIZES for x in TEST_IDS]
# the worked example run finished: episode 2 collects midnight_blue, rosewood and khaki = 11
EPISODE_2_FULL = EPISODE_2 + ["<dodger_blue door>", "<cerulean door>", "<rosewood ball>",
                              "<teal door>", "<khaki ball>"]


def frozen_task(layout_id, n_episodes=20, **params):
    return Task("rooms", {"layout": frozen_layouts()[layout_id], "n_episodes": n_episodes,
                          **params}, id=layout_id)


def check_decomposition(task, actions):
    gaps = rooms_gap_metrics(task, {"actions": actions})
    per = gaps["per_episode"]
    rmax = gaps["rmax"]
    agent, exploit = per["agent_return"], per["exploit_return"]
    assert len(agent) == len(exploit) == gaps["episodes_finished"]
    if rmax == 0:  # a layout without balls: nothing to normalise by
        assert agent == exploit == [0] * len(agent) and math.isnan(gaps["gap_total_mean"])
        return gaps
    for i in range(len(agent)):
        assert 0 <= agent[i] <= exploit[i] <= rmax  # R^LLM <= R^exploit <= R^max (docs/methods/metric-optimal-exploitation-gap.md#optimal-exploitation-return)
        parts = per["gap_exploration"][i] + per["gap_exploitation"][i]
        assert per["gap_total"][i] == pytest.approx(parts)
        assert per["gap_total"][i] == pytest.approx((rmax - agent[i]) / rmax)
        assert -1e-12 <= per["gap_exploration"][i] <= 1 + 1e-12
    assert exploit == sorted(exploit)  # monotone (docs/methods/metric-optimal-exploitation-gap.md#optimal-exploitation-return #2)
    return gaps


def test_worked_example_run_metrics_by_hand():
    actions = EPISODE_1 + ["<no idea>"] + EPISODE_2_FULL
    task = example_task(2)
    gaps = rooms_gap_metrics(task, {"actions": actions})
    assert gaps["rmax"] == 11 and gaps["exploit_return"] == 11 and gaps["agent_return"] == 11
    assert gaps["per_episode"]["agent_return"] == [8, 11]
    assert gaps["per_episode"]["exploit_return"] == [8, 11]
    assert gaps["gap_total"] == 0 and gaps["gap_exploration_mean"] == pytest.approx(1.5 / 11)
    assert gaps["gap_exploitation_mean"] == 0
    assert gaps["share_exploration_mean"] == 1 and gaps["share_exploitation_mean"] == 0
    assert gaps["share_undefined_episodes"] == 1 and math.isnan(gaps["share_exploitation"])
    assert gaps["normalized_reward_mean"] == pytest.approx(19 / 22)
    stats = rooms_exploration_metrics(task, {"actions": actions})
    # 10 observation sets seen out of 12 reachable (S, R2, X, Y: 1 each; R3, R5: 2; R4: 4)
    assert stats["coverage"] == pytest.approx(10 / 12)
    assert stats["room_coverage"] == pytest.approx(5 / 7)  # rooms 2 and 6 have no door
    assert stats["object_coverage"] == pytest.approx(8 / 11)  # 4 of 7 doors, 4 balls
    assert stats["redundancy"] == pytest.approx(1 - 10 / 14)
    # R^exploit per valid step: 0 0 3 3 5 8 | 8 11 ...: first >= 0.9 * 11 at valid step 8
    assert stats["sample_efficiency"] == 8
    assert stats["invalid_rate"] == pytest.approx(1 / 15)


def test_gap_decomposition_by_hand():
    g = gap_decomposition(10, [2, 10, 0], [5, 10, 10])
    assert g["per_episode"]["gap_total"] == pytest.approx([0.8, 0, 1.0])
    assert g["per_episode"]["gap_exploration"] == pytest.approx([0.5, 0, 0])
    assert g["per_episode"]["gap_exploitation"] == pytest.approx([0.3, 0, 1.0])
    assert g["share_exploitation_mean"] == pytest.approx((3 / 8 + 1) / 2)
    assert g["share_exploration_mean"] == pytest.approx((5 / 8 + 0) / 2)
    assert g["share_exploitation"] == 1 and g["share_undefined_episodes"] == 1
    assert g["gap_total"] == 1.0 and g["normalized_reward"] == 0
    assert math.isnan(gap_decomposition(0, [0], [0])["gap_total"])
    with pytest.raises(ValueError, match="2 agent returns but 1"):
        gap_decomposition(10, [1, 2], [3])


def test_redundancy_and_sample_efficiency_helpers():
    assert redundancy([("s", "a"), ("s", "a"), ("t", "a"), ("s", "b")]) == 0.25
    assert math.isnan(redundancy([]))
    assert sample_efficiency([0, 3, 9, 10], 10) == 3
    assert math.isnan(sample_efficiency([0, 0], 0))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), invalid=st.sampled_from([0.0, 0.2]))
def test_gaps_add_up_on_random_walk_runs_of_small_layouts(seed, invalid):
    task = small_task(seed, n_episodes=6)
    env = RoomsEnv()
    env.reset(task)
    check_decomposition(task, random_walk(env, seed, invalid))


@pytest.mark.parametrize("layout_id", TEST_LAYOUTS)
def test_gaps_add_up_on_random_walk_runs_of_the_frozen_layouts(layout_id):
    for run in range(2):
        task = frozen_task(layout_id)
        env = RoomsEnv()
        env.reset(task)
        gaps = check_decomposition(task, random_walk(env, run))
        assert gaps["episodes_finished"] == 20


@pytest.mark.parametrize("layout_id", TEST_LAYOUTS)
def test_repeating_one_route_gives_zero_exploitation_gap(layout_id):
    one = RoomsEnv()
    one.reset(frozen_task(layout_id, n_episodes=1))
    route = random_walk(one, 3)
    gaps = rooms_gap_metrics(frozen_task(layout_id, 5), {"actions": route * 5})
    assert gaps["per_episode"]["gap_exploitation"] == [0] * 5
    assert len(set(gaps["per_episode"]["agent_return"])) == 1


@pytest.mark.parametrize("layout_id", sorted(frozen_layouts()))
def test_systematic_explorer_closes_the_exploration_gap(layout_id):
    task = frozen_task(layout_id)
    env = RoomsEnv()
    env.reset(task)
    actions = []
    while not env.done:
        actions.append(frontier_action(env))
        env.step(actions[-1])
    gaps = check_decomposition(task, actions)
    assert gaps["gap_exploration"] == 0 and gaps["exploit_return"] == gaps["rmax"]


def test_strict_directed_and_seen_ball_variants_bound_the_default():
    task = frozen_task("5x5-a", 6)
    env = RoomsEnv()
    env.reset(task)
    actions = random_walk(env, 11)
    base = rooms_trace(task, {"actions": actions}).curve
    strict = rooms_trace(task, {"actions": actions}, strict_directed=True).curve
    seen = rooms_trace(task, {"actions": actions}, seen_balls_use_true_value=True).curve
    assert all(s <= b <= o for s, b, o in zip(strict, base, seen))


def test_runner_records_are_scored_from_their_actions():
    from clew.runner.episodes import run_episode

    task = frozen_task("4x4-b", 4)
    record = asyncio.run(run_episode(build_agent("rooms-random-walk", seed=1), task))
    assert record["outcome"]["stopped_by"] == "done"
    metrics = record["metrics"]
    assert "error" not in metrics and metrics["episodes_finished"] == 4
    assert score_episode(task, {"actions": record["actions"]}) == metrics
    again = asyncio.run(run_episode(build_agent("rooms-random-walk", seed=1), task))
    assert again["actions"] == record["actions"]  # seeded
    other = asyncio.run(run_episode(build_agent("rooms-random-walk", seed=2), task))
    assert other["actions"] != record["actions"]


def test_truncated_runs_are_scored_on_their_finished_episodes():
    task = example_task(5)
    actions = EPISODE_1 + EPISODE_2  # episode 2 unfinished
    gaps = rooms_gap_metrics(task, {"actions": actions})
    assert gaps["episodes_finished"] == 1 and gaps["exploit_return"] == 8
    stats = rooms_exploration_metrics(task, {"actions": actions})
    assert stats["sample_efficiency"] == 6  # within episode 1: 8 first reached at step 6
    with pytest.raises(ValueError, match="neither 'actions' nor 'steps'"):
        rooms_gap_metrics(task, {})
    empty = rooms_gap_metrics(task, {"actions": []})
    assert empty["episodes_finished"] == 0 and math.isnan(empty["gap_total"])
