"""Prompt variants (docs/methods/envs.md#grid-map-with-task-dag) and the structured-memory harness (docs/methods/envs.md#grid-map-with-task-dag)."""

import pytest
from clew.envs.base import Task
from clew.envs.gridmap.env import GridMapEnv
from clew.envs.gridmap.prompts import (
    ACTION_FORMAT,
    ENVIRONMENT,
    HARNESS_NOTE,
    PROMPT_SETS,
    harness_summary,
    instructions,
)
from gridmap_cases import actions_for, instance_b, small_instances, walks
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def test_eight_prompt_sets_share_environment_and_action_format():
    texts = {name: instructions(name) for name in PROMPT_SETS}
    assert len(PROMPT_SETS) == 8 and len(set(texts.values())) == 8
    for text in texts.values():
        assert text.startswith(ENVIRONMENT) and ACTION_FORMAT in text
        assert '{"action": "up"}' in text and HARNESS_NOTE not in text
    assert "Strategy" not in texts["default"] and "Exploration means" not in texts["default"]
    assert "priority to exploration" in texts["default-exploration"]
    assert "priority to exploitation" in texts["default-exploitation"]
    assert "Exploration means" in texts["default-balance"]
    assert "Exploitation means" in texts["default-balance"]
    assert "reason" in texts["reasoning"] and "reason" not in texts["default"].split("\n\n")[-1]


def test_harness_prompt_is_base_plus_one_statement():
    base, harness = instructions("default"), instructions("default-harness")
    assert harness.replace(HARNESS_NOTE + "\n\n", "") == base
    assert GridMapEnv().instructions("harness") == harness


def test_unknown_variant_is_named():
    with pytest.raises(ValueError, match="'greedy'"):
        instructions("default-greedy")


def test_harness_summary_on_test_b():
    env = GridMapEnv()
    obs = [env.reset(Task("gridmap", instance_b().to_params()))]
    path = [(1, 1), (2, 1), (1, 1), (1, 0), (0, 0)]
    acts = actions_for(path)
    for a in acts:
        obs.append(env.step(a).obs)
    text = harness_summary(obs, acts)
    lines = text.split("\n")
    assert lines[0] == ("Coordinates: [x, y]; down = y-1, left = x-1, right = x+1. "
                        "Goal state: G.")
    assert lines[1] == "Visited: [0, 0], [1, 0], [1, 1], [2, 1]."
    assert lines[2] == "Known passable but unvisited: [0, 1], [1, 2], [2, 0], [2, 2]."
    assert "[-1, 0]" in lines[3] and "[3, 1]" in lines[3]  # D24: outside the grid too
    assert "A at [0, 0]: activated; it leads to B." in lines
    assert "B at [2, 1]: not activated; needs A; it leads to G (goal)." in lines
    assert "Activated: A. Ready to activate now: B." in lines
    assert lines[-1] == "Legal moves: up, right. Steps used: 4."


def test_harness_before_any_move():
    env = GridMapEnv()
    obs = env.reset(Task("gridmap", instance_b().to_params()))
    text = harness_summary([obs])
    assert text.startswith("Coordinates: [x, y]; no move observed yet. Goal state: not known yet.")
    with pytest.raises(ValueError):
        harness_summary([])


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_harness_adds_no_information_beyond_the_truth(data):
    """Frontier = U(t) and 'ready' = P(t): the summary reorganises, and is exact."""
    inst = data.draw(small_instances())
    actions = data.draw(walks(inst, max_len=30))
    env = GridMapEnv()
    obs = [env.reset(Task("gridmap", inst.to_params()))]
    taken = []
    for a in actions:
        if env.done:
            break
        obs.append(env.step(a).obs)
        taken.append(a)
    text = harness_summary(obs, taken)
    oracle = env.oracle()
    fmt = ", ".join(f"[{x}, {y}]" for x, y in sorted(oracle.unobserved)) or "none"
    assert f"Known passable but unvisited: {fmt}." in text
    ready_line = next(line for line in text.split("\n") if line.startswith("Activated:"))
    ready = ready_line.split("Ready to activate now: ")[1].rstrip(".")
    names = sorted(oracle.pending)
    assert sorted(r.replace(" (goal)", "") for r in ready.split(", ") if r != "none") == names
