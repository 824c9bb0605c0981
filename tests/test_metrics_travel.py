"""Metrics that travel (issue 3 item 4): coverage, redundancy and the gap on every family."""

import asyncio
import json
import math
import random

import pytest
from clew.envs.base import Task
from clew.envs.gridmap.env import GridMapEnv
from clew.envs.gridmap.generator import generate_task as gridmap_task
from clew.envs.gridmap.instance import ACHIEVED, DIRECTIONS, build_instance, prec, step_cell
from clew.envs.gridmap.trace import exploit_cost as gridmap_exploit_cost
from clew.envs.measures import Edge, optimal_exploitation
from clew.envs.registry import generate
from clew.envs.textminigrid.env import TextMiniGridEnv
from clew.envs.textminigrid.layout import Layout, Mission, Placed
from clew.envs.textminigrid.trace import exploit_cost as textminigrid_exploit_cost
from clew.metrics import envs_with, metrics_for
from clew.metrics.score import score_line
from clew.metrics.travel import coverage_metrics, gap_metrics, redundancy_metrics, trace
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent
from hypothesis import given, settings
from hypothesis import strategies as st

ALL_ENVS = {"gridmap", "rooms", "textminigrid", "hillsearch", "treesearch", "maxsatsearch"}


def travel(task, record):
    return {**coverage_metrics(task, record), **redundancy_metrics(task, record),
            **gap_metrics(task, record)}


def check_decomposition(m):
    assert 0 <= m["coverage"] <= 1
    assert math.isnan(m["redundancy"]) or 0 <= m["redundancy"] <= 1
    if not math.isnan(m["gap_total"]):
        assert m["gap_total"] == pytest.approx(m["gap_exploration"] + m["gap_exploitation"])
        assert m["gap_exploitation"] >= -1e-12 and m["gap_exploration"] >= -1e-12


# --- the registry -----------------------------------------------------------------------------
def test_every_family_has_coverage_redundancy_and_gap():
    for key in ("coverage", "redundancy", "gap_total", "gap_exploration", "gap_exploitation"):
        assert envs_with(key) == ALL_ENVS, key
    names = {m.name for m in metrics_for("treesearch")}
    assert {"coverage", "redundancy", "exploitation_gap", "best_found"} <= names
    assert "coverage" not in {m.name for m in metrics_for("rooms")}  # rooms keeps its own


def test_unknown_env_and_bad_record_are_clear_errors():
    with pytest.raises(ValueError, match="no definition for environment 'rooms'"):
        trace(Task("rooms", {}), {"actions": []})
    task = generate("treesearch", {"b": 1, "d_trap": 2, "d_good": 2, "budget": 2}, 0)
    with pytest.raises(ValueError, match="'actions'"):
        trace(task, {"actions": "node=1"})


# --- gridmap: hand-built corridor A . S . G, G needs A ------------------------------------------
def corridor(alpha=3):
    inst = build_instance(5, 1, [(x, 0) for x in range(5)], (2, 0),
                          {"A": [], "G": [["A"]]}, {"A": (0, 0), "G": (4, 0)}, "G", alpha=alpha)
    return Task("gridmap", inst.to_params(), id=f"corridor-{alpha}")


def test_gridmap_walk_with_two_revisits():
    # cells 3 (new), 2 (revisit), 1 (new), 2 (revisit); the invalid action is not a move
    m = travel(corridor(), {"actions": ["right", "left", "jump", "left", "right"]})
    assert m["redundancy"] == 0.5 and (m["redundant_steps"], m["counted_steps"]) == (2, 4)
    assert m["coverage"] == pytest.approx(3 / 5)
    # the goal was never seen: the whole gap is exploration
    assert m["rmax"] == 1.0 and m["agent_return"] == 0.0 and m["exploit_return"] == 0.0
    assert (m["gap_total"], m["gap_exploration"], m["gap_exploitation"]) == (1.0, 1.0, 0.0)
    assert math.isnan(m["exploitable_at"])


def test_gridmap_exploitation_gap_depends_on_the_budget_left():
    task = corridor(alpha=2)  # budget 10
    seen_all = ["right", "right", "left", "left", "left", "left"]  # G seen at t=2, A done at t=6
    # at t=6, 4 steps are left and G is 4 cells away: exploitable, but the agent dithers
    m = travel(task, {"actions": seen_all + ["right", "left", "right", "left"]})
    assert m["exploitable_at"] == 6 and m["exploit_return"] == 1.0 and m["agent_return"] == 0.0
    assert (m["gap_exploration"], m["gap_exploitation"], m["share_exploitation"]) == (0, 1, 1)
    # going straight there succeeds: no gap at all
    m = travel(task, {"actions": seen_all + ["right"] * 4})
    assert m["agent_return"] == 1.0 and m["gap_total"] == 0.0 and m["gap_exploitation"] == 0.0
    assert math.isnan(m["share_exploitation"])  # no gap to share
    # one wasted (invalid, charged) step first: at t=7 only 3 steps are left, never enough
    m = travel(task, {"actions": ["jump"] + seen_all + ["right"] * 3})
    assert math.isnan(m["exploitable_at"]) and m["gap_exploration"] == 1.0


def test_gridmap_rmax_zero_gives_undefined_gaps():
    task = corridor(alpha=1)  # budget 5 < 6, the shortest solution
    m = travel(task, {"actions": ["left", "left"]})
    assert m["rmax"] == 0.0 and math.isnan(m["gap_total"]) and math.isnan(m["gap_exploitation"])


def generic_value(inst, known, achieved, pos, budget):
    """R^exploit by the generic solver on the cell-level known graph (brute force)."""
    nodes, goal = inst.node_by_name, inst.goal
    start = (pos, frozenset(achieved))
    graph, todo = {}, [start]
    while todo:
        state = todo.pop()
        if state in graph:
            continue
        cell, have = state
        edges = []
        for d in DIRECTIONS:
            nxt = step_cell(cell, d)
            if nxt not in known:
                continue
            new = have
            u = inst.node_at.get(nxt)
            if u is not None and u not in have and prec(nodes[u], have):
                new = have | {u}
            edges.append(Edge(d, (nxt, new), 1.0 if goal in new - have else 0.0, {"steps": 1}))
            todo.append((nxt, new))
        graph[state] = edges
    return optimal_exploitation(graph, start, {"steps": budget},
                                terminal=lambda s, r: goal in s[1]).value


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 40),
       st.sampled_from([("low", "easy"), ("medium", "easy"), ("low", "medium")]))
def test_gridmap_exploit_cost_matches_the_generic_solver(seed, walk, level):
    task = gridmap_task({"exploration_level": level[0], "dag_level": level[1]}, seed % 50)
    env = GridMapEnv()
    env.reset(task)
    rng = random.Random(seed)
    for _ in range(walk):
        if env.done:
            break
        env.step(rng.choice(env.legal_actions()))
    o = env.oracle()
    inst = env.instance
    achieved = {u for u, s in o.status.items() if s == ACHIEVED}
    # what the agent knows, and (mostly finite costs) the whole map from the same state
    for known in (o.observed, inst.cells):
        cost = gridmap_exploit_cost(inst, known, achieved, o.position)
        if inst.goal in achieved:  # the return is already in hand; nothing left to plan
            assert cost == 0
        elif math.isinf(cost):
            assert generic_value(inst, known, achieved, o.position, 2 * len(known) + 8) == 0
        else:
            assert generic_value(inst, known, achieved, o.position, int(cost)) == 1
            assert generic_value(inst, known, achieved, o.position, int(cost) - 1) == 0


# --- textminigrid: one room, agent at (1,1) facing North, a red ball at (3,3) -----------------
BALL = Placed(3, 3, "ball", "red")


def tmg_task(objects=(BALL,), agent=(1, 1, 3), doors=(), per_side=1,
             oracle_length=6):
    lay = Layout(per_side, tuple(doors), tuple(objects), agent, Mission("pickup", "ball", "red"))
    return Task("textminigrid", {"layout": lay.to_dict(), "oracle_length": oracle_length}, id="h")


def test_textminigrid_revisits_of_states():
    # four left turns come back to the start state; walking into the wall changes nothing
    m = travel(tmg_task(), {"actions": ["Turn Left"] * 4 + ["Go Forward"]})
    assert (m["redundant_steps"], m["counted_steps"]) == (2, 5) and m["redundancy"] == 0.4
    # a straight path never revisits
    m = travel(tmg_task(), {"actions": ["Turn Right", "Go Forward", "Go Forward"]})
    assert m["redundancy"] == 0.0


def test_textminigrid_gap_within_the_steps_left():
    task = tmg_task()  # L* = 6: right, forward, forward, right, forward, pick up
    # the ball comes into view after turning East (t=1); 5 steps are left and 5 are needed
    dither = {"actions": ["Turn Right"] + ["Turn Left"] * 5, "env_options": {"max_steps": 6}}
    m = travel(task, dither)
    assert m["exploitable_at"] == 1 and m["rmax"] == 1.0 and m["agent_return"] == 0.0
    assert (m["gap_exploration"], m["gap_exploitation"]) == (0.0, 1.0)
    # turning West then South sees the ball only at t=2, 5 steps away with 4 left
    late = ["Turn Left", "Turn Left", "Go Forward", "Go Forward", "Turn Left", "Go Forward"]
    m = travel(task, {"actions": late, "env_options": {"max_steps": 6}})
    assert math.isnan(m["exploitable_at"]) and (m["gap_exploration"], m["gap_total"]) == (1, 1)
    m = travel(task, {"actions": late, "env_options": {"max_steps": 7}})
    assert m["exploitable_at"] == 2  # one more step and the same view suffices
    # the optimal plan: no gap; a budget below L* makes R^max = 0 and the gaps undefined
    best = ["Turn Right", "Go Forward", "Go Forward", "Turn Right", "Go Forward", "Pick Up"]
    m = travel(task, {"actions": best, "env_options": {"max_steps": 6}})
    assert m["agent_return"] == 1.0 and m["gap_total"] == 0.0
    m = travel(task, {"actions": best[:5], "env_options": {"max_steps": 5}})
    assert m["rmax"] == 0.0 and math.isnan(m["gap_total"])


def test_textminigrid_planner_doors():
    # two rooms side by side (2x2 grid of rooms), a door at (5,2); the agent faces it from (3,2)
    def cost(door, unknown=()):
        task = tmg_task(objects=[Placed(7, 2, "ball", "red")], agent=(3, 2, 0), doors=[door],
                        per_side=2)
        env = TextMiniGridEnv()
        env.reset(task)
        level = env.level
        known = {(x, y) for x in range(level.width) for y in range(level.height)} - set(unknown)
        targets = [o for o in level.grid.grid if o is not None and o.type == "ball"]
        return textminigrid_exploit_cost(level, known, targets)

    assert cost(Placed(5, 2, "door", "blue", open=True)) == 4  # 3 forward, pick up
    assert cost(Placed(5, 2, "door", "blue")) == 5  # + toggle
    assert math.isinf(cost(Placed(5, 2, "door", "blue", locked=True)))  # no key in hand
    door = Placed(5, 2, "door", "blue", open=True)
    assert math.isinf(cost(door, unknown=[(6, 2)]))  # the cell before the ball is unknown
    assert math.isinf(cost(door, unknown=[(7, 2)]))  # the ball itself was never seen
    assert cost(door, unknown=[(4, 1), (6, 3)]) == 4  # cells off the path do not matter


# --- oracle search ------------------------------------------------------------------------------
def test_tree_repeated_queries_and_coverage():
    # root 0; nodes 1, 2 below it; node 3 below 1 (value 5, the optimum)
    task = Task("treesearch", {"parent": [-1, 0, 0, 1], "values": [0, 1, 2, 5], "root": 0,
                               "budget": 3}, id="tiny-tree")
    m = travel(task, {"actions": ["node=1", "node=1", "node=0", "node=2"]})
    assert (m["redundant_steps"], m["counted_steps"]) == (2, 4) and m["redundancy"] == 0.5
    assert m["coverage"] == pytest.approx(2 / 3)  # the root is given, 3 queryable nodes
    assert (m["rmax"], m["agent_return"], m["exploit_return"]) == (5, 2, 2)
    assert m["gap_total"] == m["gap_exploration"] == pytest.approx(3 / 5)
    assert m["gap_exploitation"] == 0.0 and m["share_exploration"] == 1.0
    m = travel(task, {"actions": ["junk", "node=1", "node=3", "node=2"]})
    assert m["coverage"] == 1.0 and m["gap_total"] == 0.0 and m["counted_steps"] == 3


def test_hill_and_maxsat_repeats_cost_budget_and_count():
    hill = Task("hillsearch", {"hills": [[5.0, 0.1, 1.0]], "budget": 3}, id="one-hill")
    m = travel(hill, {"actions": ["x=0", "x=5", "x=5.0", "x=6"]})  # the budget ends at 3
    assert m["redundancy"] == pytest.approx(1 / 3) and m["coverage"] == 0.02
    assert m["agent_return"] == pytest.approx(1.0) and m["gap_total"] == pytest.approx(0, abs=1e-9)
    sat = Task("maxsatsearch", {"n": 2, "clauses": [[[0, 1], [1, 1]]], "weights": [1],
                                "planted": "11", "budget": 3}, id="tiny-sat")
    m = travel(sat, {"actions": ["bits=00", "x0=0, x1=0", "bits=01"]})
    assert m["redundancy"] == pytest.approx(1 / 3) and m["coverage"] == 0.5
    assert (m["gap_total"], m["gap_exploration"], m["gap_exploitation"]) == (1.0, 1.0, 0.0)


# --- random and oracle agents on every family ---------------------------------------------------
def play(agent, task, seed=None, **kw):
    opts = {"seed": seed} if seed is not None else {}
    return asyncio.run(run_episode(build_agent(agent, **opts), task, **kw))


FAMILY_TASKS = {
    "gridmap": lambda s: gridmap_task({"exploration_level": "medium", "dag_level": "easy"}, s),
    "rooms": lambda s: generate("rooms", {"size": 4, "n_episodes": 3}, 300 + s),
    "textminigrid": lambda s: generate("textminigrid", {"rooms": 1, "density": "medium"}, 300 + s),
    "hillsearch": lambda s: generate("hillsearch", {"budget": 10}, s),
    "treesearch": lambda s: generate("treesearch", {"b": 2, "d_trap": 6, "d_good": 3,
                                                    "budget": 10}, s),
    "maxsatsearch": lambda s: generate("maxsatsearch", {"n": 6, "m": 20, "k_gold": 3,
                                                        "w_gold": 10, "budget": 10}, s),
}
RANDOM = {"hillsearch": "random-query", "maxsatsearch": "random-query", "rooms": "random"}


@pytest.mark.parametrize("env", sorted(FAMILY_TASKS))
def test_random_episodes_decompose(env):
    for s in range(3):
        task = FAMILY_TASKS[env](s)
        rec = play(RANDOM.get(env, "random"), task, seed=s, max_steps=120)
        m = rec["metrics"]
        assert "error" not in m
        check_decomposition(m)
        if env != "rooms":
            assert m["exploit_return"] >= m["agent_return"]
            again = travel(task, {"actions": rec["actions"],
                                  "env_options": rec.get("env_options")})
            assert all(again[k] == m[k] or (math.isnan(again[k]) and math.isnan(m[k]))
                       for k in again)
        if env in ("hillsearch", "treesearch", "maxsatsearch"):
            assert m["gap_exploitation"] == 0.0  # the best observed value is always kept
            assert m["gap_exploration"] == pytest.approx(1 - m["normalized_reward"])
            assert m["exploit_return"] == m["agent_return"] == m["best_value"]


def test_textminigrid_coverage_is_the_documented_extension():
    task = FAMILY_TASKS["textminigrid"](1)
    rec = play("random", task, seed=4, max_steps=60)
    assert rec["metrics"]["coverage"] == rec["metrics"]["ext_coverage"]


def test_oracle_agents_have_no_gap():
    for s in range(3):
        rec = play("gridmap-oracle", FAMILY_TASKS["gridmap"](s))
        m = rec["metrics"]
        assert m["success"] and m["gap_total"] == 0.0 and m["gap_exploitation"] == 0.0
        assert m["exploit_return"] == 1.0
        rec = play("babyai-bot", FAMILY_TASKS["textminigrid"](s))
        m = rec["metrics"]
        assert m["success"] == 1.0 and m["gap_total"] == 0.0 and m["gap_exploitation"] == 0.0


# --- clew score ---------------------------------------------------------------------------------
@pytest.mark.parametrize("env", sorted(FAMILY_TASKS))
def test_clew_score_handles_every_family(env):
    task = FAMILY_TASKS[env](0)
    rec = play(RANDOM.get(env, "random"), task, seed=0, max_steps=60)
    line = json.dumps({"task": task.to_dict(), "actions": rec["actions"]})
    out = score_line(line)
    assert out["env"] == env
    for key in ("coverage", "redundancy", "gap_total", "gap_exploration", "gap_exploitation"):
        assert key in out, key
        same = out[key] == rec["metrics"][key] or (math.isnan(out[key])
                                                   and math.isnan(rec["metrics"][key]))
        assert same, key
