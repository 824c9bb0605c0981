"""TextMiniGrid metrics (docs/methods/metric-textminigrid.md#success-and-steps and the docs/methods/metric-textminigrid.md#extensions extensions)."""

import asyncio
import math

import pytest
from clew.agents.heuristics.random_walk import RandomAgent
from clew.envs.base import Task
from clew.envs.textminigrid.generator import generate_task
from clew.envs.textminigrid.layout import Layout, Mission, Placed, build_level
from clew.envs.textminigrid.metrics import disagreement, episode_metrics, success_by_level
from clew.envs.textminigrid.parsing import ACTIONS
from clew.metrics import metrics_for, score_episode
from clew.runner.episodes import run_episode
from hypothesis import given, settings
from hypothesis import strategies as st

IDS = {"Turn Left": 0, "Turn Right": 1, "Go Forward": 2, "Pick Up": 3, "Drop": 4, "Toggle": 5}


def hand_task(agent, objects, mission=None, **params):
    first = objects[0]
    lay = Layout(1, (), tuple(objects), agent, mission or Mission("pickup", first.type, first.color))
    return Task("textminigrid", {"layout": lay.to_dict(), **params}, id="hand")


CORNER = hand_task((1, 1, 3), [Placed(3, 3, "ball", "red")], oracle_length=9, difficulty="medium")


def test_registered_for_textminigrid():
    assert "textminigrid" in [m.name for m in metrics_for("textminigrid")]


def test_hand_computed_quantities():
    # N at (1,1): right (E), forward to (2,1), left, left (W), forward to (1,1), forward (wall)
    actions = ["Turn Right,Go Forward", "Turn Left,Turn Left", "Go Forward,Go Forward"]
    m = episode_metrics(CORNER, {"actions": actions, "env_options": {"max_actions": 2}})
    assert m["success"] == 0.0 and m["steps"] == 6 and m["decisions"] == 3
    assert m["actions_per_decision"] == 2.0 and math.isnan(m["steps_to_success"])
    assert m["ext_revisit_rate"] == pytest.approx(1 - 2 / 3)  # 2 cells, 2 successful moves
    assert m["ext_noop_rate"] == pytest.approx(1 / 6)
    assert m["ext_noop_rate_go_forward"] == pytest.approx(1 / 3)
    assert m["ext_first_sight"] == 1  # the ball comes into view after turning East
    assert m["ext_rooms_entered"] == 1.0
    assert m["sr_medium"] == 0.0 and math.isnan(m["sr_easy"]) and m["difficulty"] == "medium"


def test_success_counts_and_truncation_with_known_m():
    task = hand_task((2, 2, 0), [Placed(3, 2, "ball", "red")], oracle_length=1, difficulty="easy")
    # m = 1: only "Turn Left" runs in the first step; the agent then faces the ball again later
    rec = {"actions": ["Turn Left,Pick Up", "Turn Right", "Pick Up"], "env_options": {"max_actions": 1}}
    m = episode_metrics(task, rec)
    assert m["success"] == 1.0 and m["steps"] == 3 and m["steps_to_success"] == 3
    assert m["decisions_to_success"] == 3 and m["sr_easy"] == 1.0
    assert m["ext_format_failure_rate"] == pytest.approx(1 / 3)  # one truncated reply
    assert m["ext_first_sight"] == 0 and m["ext_sight_to_success"] == 3


def _coverage_brute_force(task, atomic):
    """Cells seen, via MiniGrid's own relative_coords and visibility mask."""
    level = build_level(Layout.from_dict(task.params["layout"]))
    seen = set()

    def look():
        _, vis = level.gen_obs_grid()
        for x in range(level.grid.width):
            for y in range(level.grid.height):
                rel = level.relative_coords(x, y)
                if rel is not None and vis[rel[0], rel[1]]:
                    cell = level.grid.get(x, y)
                    if cell is None or cell.type != "wall":
                        seen.add((x, y))

    look()
    for a in atomic:
        _, _, term, _, _ = level.step(IDS[a])
        look()
        if term:
            break
    free = sum(1 for x in range(level.grid.width) for y in range(level.grid.height)
               if level.grid.get(x, y) is None or level.grid.get(x, y).type != "wall")
    return len(seen) / free


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.sampled_from([(1, 3), (4, 1), (9, 5)]),
       st.lists(st.sampled_from(ACTIONS), max_size=40))
def test_coverage_against_brute_force(seed, cfg, atomic):
    task = generate_task({"rooms": cfg[0], "objs_per_room": cfg[1], "label": False}, seed)
    m = episode_metrics(task, {"actions": atomic, "env_options": {"max_actions": 1}})
    assert m["ext_coverage"] == pytest.approx(_coverage_brute_force(task, atomic))
    assert 0 <= m["ext_revisit_rate"] < 1 and 0 < m["ext_rooms_entered"] <= 1


def test_exact_replay_from_runner_records_equals_text_replay():
    task = Task("textminigrid", {"rooms": 4, "objs_per_room": 3}, seed=5, id="g")
    opts = {"max_actions": 5}
    rec = asyncio.run(run_episode(RandomAgent(seed=3), task, env_options=opts, max_steps=40))
    ep = episode_metrics(task, rec)  # uses steps[i].info["executed"]
    assert {k: rec["metrics"][k] for k in ep} == ep
    text_only = episode_metrics(task, {"actions": rec["actions"], "env_options": opts})
    assert text_only == ep or all(
        (a == b) or (isinstance(a, float) and math.isnan(a) and math.isnan(b))
        for a, b in zip(text_only.values(), ep.values()))
    assert score_episode(task, rec)["steps"] == rec["metrics"]["steps"]


def test_requeries_count_as_format_failures_but_not_decisions():
    rec = {"actions": ["hmm", "Turn Left", "??", "??", "??"]}
    m = episode_metrics(CORNER, rec)
    assert m["steps"] == 2 and m["decisions"] == 2  # the third "??" is the step-using no-op
    assert m["ext_format_failure_rate"] == pytest.approx(4 / 5)


def test_cross_run_quantities():
    a = {"t1": True, "t2": True, "t3": False, "t4": False}
    b = {"t1": True, "t2": False, "t3": True, "t4": False, "t5": True}
    ab, ba = disagreement(a, b)
    assert (ab, ba) == (1, 1) and ab - ba == sum(a.values()) - sum(b[t] for t in a)
    sr = success_by_level([("easy", True), ("easy", False), ("hard", True), (None, False)])
    assert sr["easy"] == 0.5 and sr["hard"] == 1.0 and math.isnan(sr["medium"])
    assert sr["micro"] == 0.5 and sr["macro"] == 0.75


def test_garbage_replies_run_to_the_step_limit_under_the_runner():
    class Garbage:
        name, kind = "garbage", "heuristic"

        async def act(self, episode):
            from clew.agents.base import Decision
            return Decision("I refuse to answer in the format.")

        def on_episode_end(self, episode):
            return None

    rec = asyncio.run(run_episode(Garbage(), CORNER, env_options={"max_steps": 4}))
    assert rec["outcome"]["stopped_by"] == "done" and rec["metrics"]["steps"] == 4
    assert len(rec["actions"]) == 12  # each step-using no-op follows two free re-queries
    assert rec["metrics"]["ext_format_failure_rate"] == 1.0
