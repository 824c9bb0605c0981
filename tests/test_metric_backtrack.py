"""Metrics of episodes with backtracks (runner/episodes.py BACKTRACK; docs/methods/exploratory-learning.md#backtrack-turns).

Every metric re-scores an episode by replaying it on a fresh env; a ``backtrack S<k>`` step must
replay as the runner executed it (state S<k> of the current path restored, one step of the
clock), whether the record holds the runner's step infos or only the action strings
(``clew score``). The per-metric rules are on the metric pages (docs/methods/metric-*.md).
"""

import asyncio
import math

import pytest
from clew.agents.base import Decision
from clew.envs.base import Task
from clew.envs.gridmap.instance import build_instance
from clew.envs.gridmap.metrics import score_trajectory
from clew.envs.textminigrid.layout import Layout, Mission, Placed
from clew.envs.trace import StatePath, classify, parse_backtrack
from clew.metrics import score_episode
from clew.runner.episodes import run_episode
from rooms_cases import example_task
from toyenv import ScriptedAgent


def back(k):
    return Decision(f"backtrack S{k}", info={"backtrack": k})


def play(task, script):
    """Run ``script`` through the runner; the last decision ends the episode."""
    *head, last = script
    last = last if isinstance(last, Decision) else Decision(last)
    last = Decision(last.action, info={**last.info, "end_episode": True})
    record = asyncio.run(run_episode(ScriptedAgent([*head, last]), task))
    assert record["actions"] == [getattr(d, "action", d) for d in script]
    return record


def bare(record):
    """The record as ``clew score`` reads it: action strings only."""
    return {"actions": list(record["actions"])}


def numbers(metrics):
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float))}


def same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert (math.isnan(a[k]) and math.isnan(b[k])) if isinstance(a[k], float) and \
            math.isnan(a[k]) else a[k] == b[k], k


# --- the parser and the state ids ----------------------------------------------------------------
def test_one_backtrack_parser_for_agents_and_metrics():
    from clew.agents import distilled

    assert distilled.parse_backtrack is parse_backtrack
    assert parse_backtrack("backtrack S3") == (True, 3)
    assert parse_backtrack("move right") == (False, None)


def test_state_ids_follow_the_runner():
    # S0; right -> S1; right -> S2; back to S1 cuts S2; right -> S3 (ids are never reused)
    steps = classify(["right", "right", "backtrack S1", "right", "backtrack"])
    ids = StatePath()
    ids.forward(), ids.forward()
    assert ids.resolve(steps[2]) == 1
    ids.cut(1)
    assert ids.forward() == 3 and ids.path == [0, 1, 3]
    assert ids.resolve(steps[4]) == 1  # a bare backtrack: the state before the current one
    assert ids.resolve(classify(["backtrack S2"])[0]) is None  # S2 is no longer on the path


# --- gridmap: corridor A . S . G (cells 0..4, start 2), G needs A ------------------------------
def corridor(alpha=3):
    inst = build_instance(5, 1, [(x, 0) for x in range(5)], (2, 0),
                          {"A": [], "G": [["A"]]}, {"A": (0, 0), "G": (4, 0)}, "G", alpha=alpha)
    return Task("gridmap", inst.to_params(), id=f"corridor-{alpha}")


def test_gridmap_backtrack_one_cell_scores_as_the_move_back():
    # a backtrack to the state one cell back, with nothing achieved on the way, is the move
    # back by hand in every metric; the second return re-walks the edge 2-1 a third time (S
    # rises: one exploration error)
    task = corridor()
    record = play(task, ["left", back(0), "left", back(0), "right", "right"])
    assert [s["valid"] for s in record["steps"]] == [True] * 6
    by_hand = play(task, ["left", "right", "left", "right", "right", "right"])
    got, want = numbers(score_episode(task, record)), numbers(score_episode(task, by_hand))
    same(got, want)
    same(numbers(score_episode(task, bare(record))), want)
    assert want["explore_errors"] == 1 and want["redundancy"] == pytest.approx(3 / 6)
    labels = score_episode(task, record)["labels"]
    assert [lab["backtrack"] for lab in labels] == [None, 0, None, 0, None, None]
    assert [lab["err"] for lab in labels] == [0, 0, 0, 1, 0, 0]


def test_gridmap_backtrack_undoes_achievements_but_not_knowledge():
    # A is achieved at t=2, then the agent backtracks to S0: the world forgets A, the agent
    # does not forget the cells. It then finds G, which needs A again.
    task = corridor(alpha=3)  # budget 15
    record = play(task, ["left", "left", back(0), "right", "right"])
    for rec in (record, bare(record)):
        m = score_episode(task, rec)
        assert m["coverage"] == 1.0
        assert (m["redundant_steps"], m["counted_steps"]) == (1, 5)  # the backtrack revisits
        # at t=5: at G, A not achieved, 8 moves needed, 10 left: exploitable, not exploited
        assert m["exploitable_at"] == 5 and m["exploit_return"] == 1.0
        assert m["agent_return"] == 0.0 and m["gap_exploitation"] == 1.0
        # error metric: the backtrack gets closer to the frontier {3} (Gain, one target): no
        # error; afterwards A is pending again (case 4 for the two last moves)
        assert [lab["case"] for lab in m["labels"]] == [1, 1, 1, 4, 4]
        assert [lab["q"] for lab in m["labels"]] == [[1, 0], [0, 0], [2, 0], [3, 0], [4, 0]]
        assert m["explore_errors"] == 0 and m["exploit_steps"] == 2
        assert m["steps"] == 5


def test_gridmap_refused_backtrack_is_an_invalid_charged_step():
    task = corridor()
    record = play(task, ["right", back(5), "right"])
    assert record["steps"][1]["valid"] is False
    s = score_trajectory(task, record["actions"],
                         infos=[st["info"] for st in record["steps"]],
                         invalid_policy="retry_without_step")
    # the runner charges it whatever the env's invalid policy; it stays put, an error
    assert s.invalid_count == 1 and s.labels[1].err == 1 and s.labels[1].q == (3, 0)
    assert s.final_position == (4, 0)
    m = score_episode(task, record)
    assert (m["redundant_steps"], m["counted_steps"]) == (0, 2)


def test_gridmap_backtrack_string_without_infos_follows_the_runner():
    # "backtrack" alone: the state before the current one
    task = corridor()
    s = score_trajectory(task, ["left", "left", "backtrack", "right"])
    assert [lab.q for lab in s.labels] == [(1, 0), (0, 0), (1, 0), (2, 0)]
    assert [lab.backtrack for lab in s.labels] == [None, None, 1, None]


# --- rooms: the paper's example layout (tests/rooms_cases.py), one rooms-episode --------------
def test_rooms_backtrack_keeps_knowledge_and_undoes_the_pickup():
    task = example_task(n_episodes=1)
    script = ["<tangerine door>", "<midnight_blue ball>", back(0), "<dodger_blue door>",
              "<cerulean door>", "<rosewood ball>", "<teal door>", "<turquoise ball>",
              "<khaki ball>"]
    record = play(task, script)
    assert record["outcome"]["stopped_by"] == "done" and record["outcome"]["invalid"] == 0
    for rec in (record, bare(record)):
        m = score_episode(task, rec)
        # the midnight_blue pickup was undone: R^agent = 3 + 2 + 3; the agent knows R5's ball
        # (5) all the same: S -> R5 -> S -> R2 -> R3 -> R4 takes 5, 3, 3 = 11 = R^max
        assert m["agent_return"] == 8 and m["exploit_return"] == 11 and m["rmax"] == 11
        assert m["gap_exploration"] == 0 and m["gap_exploitation"] == pytest.approx(3 / 11)
        # 8 moves and the backtrack (a repeat by definition), all valid
        assert m["valid_steps"] == 9 and m["redundancy"] == pytest.approx(1 / 9)
        assert m["invalid_rate"] == 0.0
        # R^exploit per valid step: 0, 5, 5 (backtrack), 5, 5, 8, 8, 10, 11: 10 >= 0.9 * 11 at 8
        assert m["sample_efficiency"] == 8.0


# --- textminigrid: one room, agent at (1,1) facing North, a red ball at (3,3) -------------------
def tmg_task():
    lay = Layout(1, (), (Placed(3, 3, "ball", "red"),), (1, 1, 3), Mission("pickup", "ball", "red"))
    return Task("textminigrid", {"layout": lay.to_dict(), "oracle_length": 6}, id="h")


def test_textminigrid_backtrack_is_one_step_back_to_a_known_state():
    task = tmg_task()
    record = play(task, ["Turn Right", "Go Forward", back(0), "Turn Right"])
    assert [s["valid"] for s in record["steps"]] == [True] * 4
    for rec in (record, bare(record)):
        m = score_episode(task, rec)
        # clock: 3 atomic actions and the backtrack; the backtrack is no decision step
        assert m["steps"] == 4 and m["decisions"] == 3
        # cells stood on: (1,1), (1,1), (2,1), back to (1,1), (1,1): two moves, two cells
        assert m["ext_revisit_rate"] == pytest.approx(1 - 2 / 3)
        # states: turn (new), forward (new), backtrack (the start state: a repeat), turn right
        # (facing East at (1,1) again: a repeat)
        assert (m["redundant_steps"], m["counted_steps"]) == (2, 4)
        assert m["ext_format_failure_rate"] == 0.0
