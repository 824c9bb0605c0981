"""Optimal exploitation: worked example, brute force vs generic DP vs exhaustive env search."""

import math

import pytest
from clew.envs.measures import Edge, known_graph, optimal_exploitation
from clew.envs.rooms.env import RoomsEnv
from clew.envs.rooms.layouts import Layout
from clew.envs.rooms.metrics import rooms_exploit_generic, rooms_graph
from clew.envs.rooms.solver import (
    KnownBall,
    best_route,
    exploit_value,
    known_model,
    layout_best_route,
    true_balls,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from rooms_cases import (
    EPISODE_1,
    EPISODE_2,
    EXAMPLE,
    R3,
    R4,
    R5,
    S,
    example_task,
    random_walk,
    small_task,
)


def exploit_after_each_step(actions, symmetric=True):
    env = RoomsEnv()
    env.reset(example_task(3))
    values = []
    for a in actions:
        env.step(a)
        model = known_model(env.state.moves, symmetric=symmetric)
        values.append(exploit_value(env.layout, model))
    return values


def test_worked_example_symmetric_doors():
    values = exploit_after_each_step(EPISODE_1 + EPISODE_2)
    assert values[5] == 8  # R_1^exploit: rosewood 3 (2 doors), turquoise 2 + khaki 3 (3 doors)
    assert values[7] == 11  # right after the midnight_blue pickup: 5 + 3 + 3 with 5 doors
    assert values[8] == 11
    assert values == sorted(values)  # monotone


def test_worked_example_strict_directed_doors_learn_the_way_back_one_step_later():
    values = exploit_after_each_step(EPISODE_1 + EPISODE_2, symmetric=False)
    assert values[5] == 8
    assert values[7] == 8  # R5 -> S not walked yet
    assert values[8] == 11  # now it is


def test_worked_example_route_and_rmax():
    layout = Layout.from_dict(EXAMPLE)
    route = layout_best_route(layout)
    assert route.value == 11 and route.doors == 5
    assert set(route.balls) == {"midnight_blue", "rosewood", "khaki"}
    # one ball per room reachable in the stated order: S->R5 (1), R5->R3 (3), R3->R4 (1)
    adj = layout.adjacency
    assert best_route(S, adj, [KnownBall("a", R5, 5), KnownBall("b", R3, 3),
                               KnownBall("c", R4, 3)], budget=4).value == 8
    assert best_route(S, adj, [KnownBall("a", R5, 5), KnownBall("b", R3, 3),
                               KnownBall("c", R4, 3)], budget=5).value == 11


def test_rmax_is_not_the_sum_of_the_three_largest_rewards():
    # the two big balls lie in opposite corners: only one of them fits the budget
    layout = Layout.from_dict({
        "size": 3, "start": 4, "door_budget": 2,
        "doors": [{"name": "a", "rooms": [3, 4]}, {"name": "b", "rooms": [0, 3]},
                  {"name": "c", "rooms": [4, 5]}, {"name": "d", "rooms": [5, 8]}],
        "balls": [{"name": "x", "room": 0, "reward": 10}, {"name": "y", "room": 8, "reward": 9},
                  {"name": "z", "room": 5, "reward": 1}],
    })
    # x alone (2 doors) = 10; z then y (1 + 1 doors) = 10; x with anything else needs 5 doors
    assert layout_best_route(layout).value == 10


def env_optimum(task) -> int:
    """Exhaustive search over the real env's own transitions (one rooms-episode)."""
    memo = {}

    def best(env):
        if env.done:
            return 0
        s = env.state
        key = (s.room, s.doors_used, frozenset(s.collected))
        if key not in memo:
            values = []
            for a in env.legal_actions():
                child = env.copy()
                values.append(child.step(a).reward + best(child))
            memo[key] = max(values, default=0)
        return memo[key]

    env = RoomsEnv()
    env.reset(task)
    return best(env)


def true_graph(layout):
    graph = {}
    for d in layout.doors:
        a, b = d.rooms
        graph.setdefault(a, []).append(Edge(d.text, b, 0, {"doors": 1}))
        graph.setdefault(b, []).append(Edge(d.text, a, 0, {"doors": 1}))
    for ball in layout.balls:
        graph.setdefault(ball.room, []).append(
            Edge(ball.text, ball.room, ball.reward, {"pickups": 1}, once=ball.name))
    return graph


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_brute_force_equals_generic_dp_equals_exhaustive_env_search(seed):
    task = small_task(seed, n_episodes=1)
    layout = Layout.from_dict(task.params["layout"])
    fast = layout_best_route(layout).value
    generic = optimal_exploitation(true_graph(layout), layout.start,
                                   {"doors": layout.door_budget, "pickups": layout.max_pickups})
    assert fast == generic.value == env_optimum(task)
    # the generic plan is executable in the env and earns its value
    env = RoomsEnv()
    env.reset(task)
    assert sum(env.step(a).reward for a in generic.actions) == generic.value


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10**6), symmetric=st.booleans())
def test_known_model_solvers_agree_on_random_histories(seed, symmetric):
    task = small_task(seed, n_episodes=3)
    env = RoomsEnv()
    env.reset(task)
    random_walk(env, seed, invalid_prob=0.1)
    moves, layout = env.state.moves, env.layout
    for cut in range(0, len(moves) + 1, max(1, len(moves) // 6)):
        prefix = moves[:cut]
        fast = exploit_value(layout, known_model(prefix, symmetric=symmetric))
        assert fast == rooms_exploit_generic(layout, prefix, symmetric=symmetric)
    # knowing everything the layout holds reaches R^max, never more
    full = known_model(moves, symmetric=symmetric, true_balls=true_balls(layout))
    assert exploit_value(layout, full) <= layout_best_route(layout).value


def test_seen_balls_variant_counts_seen_but_uncollected_balls():
    env = RoomsEnv()
    env.reset(example_task(3))
    for a in ["dodger_blue door", "cerulean door", "teal door"]:  # sees 3 balls, takes none
        env.step(a)
    layout = env.layout
    assert exploit_value(layout, known_model(env.state.moves)) == 0
    oracle = known_model(env.state.moves, true_balls=true_balls(layout))
    assert exploit_value(layout, oracle) == 8


def test_generic_solver_budget_is_inclusive_and_once_rewards_are_taken_once():
    graph = {"a": [Edge("go", "b", 0, {"steps": 1})],
             "b": [Edge("take", "b", 5, {"steps": 1}, once="gem"),
                   Edge("back", "a", 0, {"steps": 1})]}
    assert optimal_exploitation(graph, "a", {"steps": 2}).value == 5
    assert optimal_exploitation(graph, "a", {"steps": 1}).value == 0
    assert optimal_exploitation(graph, "a", {"steps": 9}).value == 5  # once only
    plan = optimal_exploitation(graph, "a", {"steps": 2})
    assert plan.actions == ("go", "take")
    assert optimal_exploitation(graph, "zzz", {"steps": 3}).value == 0  # unknown start
    stop = optimal_exploitation(graph, "a", {"steps": 5}, terminal=lambda s, rem: s == "b")
    assert stop.value == 0


def test_generic_solver_rejects_bad_graphs():
    with pytest.raises(ValueError, match="uses no resource"):
        optimal_exploitation({"a": [Edge("loop", "a", 1)]}, "a", {"steps": 1})
    with pytest.raises(ValueError, match="lacks"):
        optimal_exploitation({"a": [Edge("x", "a", 1, {"fuel": 1})]}, "a", {"steps": 1})
    with pytest.raises(ValueError, match="negative reward"):
        optimal_exploitation({"a": [Edge("x", "a", -1, {"steps": 1})]}, "a", {"steps": 1})
    with pytest.raises(ValueError, match="two outcomes"):
        known_graph([("a", "x", 0, "b"), ("a", "x", 0, "c")], cost=lambda s, a: {"steps": 1})


def test_known_graph_merges_repeats_and_rooms_graph_keys_states_by_room():
    graph = known_graph([("a", "x", 1, "b"), ("a", "x", 1, "b")], cost=lambda s, a: {"t": 1})
    assert len(graph["a"]) == 1
    env = RoomsEnv()
    env.reset(example_task(3))
    for a in EPISODE_1:
        env.step(a)
    g = rooms_graph(env.state.moves)
    assert {e.action for e in g[R4]} == {"teal door", "turquoise ball", "khaki ball"}
    assert {e.action for e in rooms_graph(env.state.moves, symmetric=False)[R4]} == {
        "turquoise ball", "khaki ball"}
    assert not math.isnan(rooms_exploit_generic(env.layout, env.state.moves))
