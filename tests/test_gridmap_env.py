"""GridMapEnv (docs/methods/envs.md#grid-map-with-task-dag): observations, arrival rules, invalid actions,
budget, snapshots, parsing, and agreement with the metric's replay."""

import pytest
from clew.envs import generate, make
from clew.envs.base import Task
from clew.envs.gridmap.actions import parse_direction
from clew.envs.gridmap.env import GridMapEnv
from clew.envs.gridmap.instance import DIRECTIONS, build_instance
from clew.envs.gridmap.metrics import episode_metrics, score_trajectory
from clew.envs.gridmap.prompts import prereq_text
from gridmap_cases import actions_for, instance_b, small_instances, walks
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def task_of(inst):
    return Task("gridmap", inst.to_params(), id="t")


def fresh(inst=None, **opts):
    env = GridMapEnv(**opts)
    obs = env.reset(task_of(inst or instance_b()))
    return env, obs


def test_observation_texts_follow_the_template():
    env, obs = fresh()
    assert obs.text == ("OBSERVATION: Position [1, 1]. Nothing is here. "
                        "Legal moves: up, down, left, right. Steps used: 0.")
    s = env.step("right")  # B at (2,1), needs A: found, blocked; its child is the goal
    assert s.valid and not s.terminated
    assert s.obs.text == ("OBSERVATION: Position [2, 1]. You found state B; it is not activated. "
                          "To activate it you need A. It leads to: G (goal). "
                          "Legal moves: up, down, left. Steps used: 1.")
    assert s.obs.info["goal"] == "G"  # D10: the goal is named as soon as it is hinted
    for a in actions_for([(2, 1), (1, 1), (1, 0), (0, 0)]):
        s = env.step(a)
    assert "You found state A; it is now activated. It leads to: B." in s.obs.text
    s = env.step("up")
    s = env.step("right")
    s = env.step("right")  # back on B: now activated
    assert "State B is here; its prerequisites are met and it is now activated." in s.obs.text
    s = env.step("left")
    s = env.step("right")
    assert "State B is here; it is already activated." in s.obs.text
    s = env.step("up")
    assert s.obs.text.startswith("OBSERVATION: Position [2, 2]. You activated the goal state "
                                 "G (goal). Task complete.")
    assert s.terminated and s.reward == 1.0 and env.grade() == 1.0 and env.legal_actions() == []


def test_revisiting_a_blocked_node_and_the_short_variant():
    env, _ = fresh(step_counter=False)
    env.step("right")
    env.step("left")
    s = env.step("right")
    assert "State B is here; still not activated; it needs A." in s.obs.text
    assert "Steps used" not in s.obs.text


def test_prereq_wording():
    assert prereq_text((("A",),)) == "A"
    assert prereq_text((("A", "B"),)) == "all of A, B"
    assert prereq_text((("A",), ("B",))) == "any one of A, B"
    assert prereq_text((("A", "B"), ("C",))) == "either (A and B) or (C)"


def test_invalid_actions_stay_and_count():
    env, _ = fresh()
    s = env.step("jump")
    assert not s.valid and s.obs.info["position"] == [1, 1] and env.clock() == 1
    assert s.obs.text.startswith("Invalid action 'jump'; you did not move. OBSERVATION: "
                                 "Position [1, 1]. Nothing is here.")
    env.step("right")
    s = env.step("right")  # blocked: (3,1) is outside the map
    assert not s.valid and "blocked" in s.obs.text and s.obs.info["position"] == [2, 1]
    assert "You found state B" in s.obs.text  # the same cell message is repeated
    assert env.clock() == 3


def test_retry_without_step_policy():
    env, _ = fresh(invalid_policy="retry_without_step", max_retries=3)
    for _ in range(3):
        env.step("nope")
    assert env.clock() == 0
    env.step("nope")
    assert env.clock() == 1
    with pytest.raises(ValueError, match="invalid_policy"):
        GridMapEnv(invalid_policy="ignore")


def test_budget_ends_the_episode():
    env, _ = fresh()
    budget = env.instance.budget
    assert budget == 3 * 9
    for i in range(budget):
        s = env.step("left" if i % 2 == 0 else "right")
    assert s.terminated and not env.state.success and env.grade() == 0.0
    assert "episode is over" in s.obs.text
    after = env.step("up")
    assert after.terminated and not after.valid and env.clock() == budget


def test_legal_actions_are_the_admissible_moves():
    task = generate("gridmap", {"exploration_level": "low", "dag_level": "hard"}, 3)
    env = make("gridmap")
    env.reset(task)
    inst = env.instance
    for cell in inst.cells:
        env.state.pos = cell
        want = [d for d, (dx, dy) in DIRECTIONS.items() if (cell[0] + dx, cell[1] + dy) in inst.cells]
        assert env.legal_actions() == want


@pytest.mark.parametrize("text, want", [
    ("up", "up"), ("  DOWN\n", "down"), ('{"action": "Left"}', "left"),
    ('```json\n{"action": "right"}\n```', "right"),
    ('I go left first. {"action": "up"} no wait {"action": "down"}', "down"),
    ('{"action": "north"} {"action": "up"}', "up"), ('{"action": "up"} {"action": "fly"}', "up"),
    ('{"action": "fly"}', None), ("{'action': 'right'}", "right"),
    ('{"reasoning": "avoid {left}", "action": "right"}', "right"),
    ("Action: Down", "down"), ("`left`.", "left"), ("**RIGHT**", "right"),
    ("Left is blocked, so I will move up.", "up"), ("I think going right is best", "right"),
    ("hmm, not sure", None), ("", None), ("left or right?", None), (None, None),
    # direction words in another sense are no move
    ("There is nothing left to do.", None), ("That's right.", None), ("I have 2 moves left", None),
    ("I'll pick up the pace.", None), ("Right now I am unsure.", None),
    ("Nothing is left here, so I will go down.", "down"), ("The best move is left.", "left"),
    ("Move to the right.", "right"), (r"$\boxed{\text{up}}$", "up"),
    ("No more steps left.", None), ("Is there any move left?", None),
])
def test_parse_messy_output(text, want):
    assert parse_direction(text) == want


def test_parsed_prose_moves_the_agent():
    env, _ = fresh()
    s = env.step('Thinking... the frontier is to the right.\n```json\n{"action": "RIGHT"}\n```')
    assert s.valid and s.obs.info["position"] == [2, 1]
    assert env.canonical(" Right ") == "right"


def test_bad_task_params_are_named():
    env = GridMapEnv()
    with pytest.raises(ValueError, match="missing field"):
        env.reset(Task("gridmap", {"exploration_level": "low"}))
    params = instance_b().to_params()
    params["start"] = [7, 7]
    with pytest.raises(ValueError, match="start"):
        env.reset(Task("gridmap", params))
    with pytest.raises(ValueError, match="env"):
        env.reset(Task("rooms", instance_b().to_params()))


def test_instance_round_trip_through_json():
    import json

    inst = instance_b()
    params = json.loads(json.dumps(inst.to_params()))
    from clew.envs.gridmap.instance import Instance

    assert Instance.from_params(params) == inst


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.data())
def test_snapshot_restore_replay_equals_reset_replay(data):
    inst = data.draw(small_instances())
    actions = data.draw(walks(inst, max_len=40))
    cut = data.draw(st.integers(0, len(actions)))
    env, _ = fresh(inst)
    for a in actions[:cut]:
        env.step(a)
    snap = env.snapshot()
    first = [env.step(a).obs.text for a in actions[cut:]]
    env.step("up")
    env.restore(snap)
    again = [env.step(a).obs.text for a in actions[cut:]]
    ref, _ = fresh(inst)
    for a in actions[:cut]:
        ref.step(a)
    replay = [ref.step(a).obs.text for a in actions[cut:]]
    assert first == again == replay
    # keep_clock: the world comes back, the step counter stays (and the text shows it)
    clock = env.clock()
    env.restore(snap, keep_clock=True)
    assert env.clock() == clock and env.state.pos == snap.pos
    assert env.state.status == snap.status
    if env.step_counter and not env.done:
        assert env.observation().text.endswith(f"Steps used: {clock}.")
    # copies are independent
    twin = env.copy()
    twin.step(twin.legal_actions()[0] if twin.legal_actions() else "up")
    assert env.state.pos == snap.pos


@SETTINGS
@given(st.data())
def test_env_and_metric_replay_agree(data):
    inst = data.draw(small_instances())
    actions = data.draw(walks(inst, max_len=50))
    env, _ = fresh(inst)
    pending_seen, taken = [], []
    for a in actions:
        if env.done:
            break
        pending_seen.append(tuple(sorted(env.oracle().pending)))
        s = env.step(a)
        taken.append(a)
        assert s.valid == (not s.info["invalid"])
    score = score_trajectory(inst, actions)
    assert [lab.pending for lab in score.labels] == pending_seen
    assert score.status == env.state.status
    assert score.final_position == env.state.pos
    assert score.success == env.state.success
    assert score.steps == len(taken)
    assert [lab.invalid for lab in score.labels] == [
        not (parse_direction(a) in inst.moves[lab.p]) for a, lab in zip(taken, score.labels)]


def test_oracle_exposes_ground_truth():
    env, _ = fresh()
    o = env.oracle()
    assert o.case_and_targets() == (1, {(1, 2), (1, 0), (0, 1), (2, 1)})
    assert o.distance((0, 0), (2, 2)) == 4
    walled = build_instance(3, 2, [(0, 0), (1, 0), (2, 0), (0, 1), (2, 1)], (0, 0),
                            {"G": []}, {"G": (2, 1)}, "G")
    env2, _ = fresh(walled)
    assert env2.oracle().distance((0, 1), (2, 1)) == 4  # around the wall, not Manhattan 2


# --- pits (docs/methods/envs.md#pits) ------------------------------------------------------------
def test_pits_are_leaves_seeded_by_the_task_that_leave_the_map_s_distances_alone():
    inst = instance_b()            # the full 3x3 box: the pits hang off its top row or right column
    env, _ = fresh(pits=2)
    pits = env.pit_cells
    assert len(pits) == 2 and not pits & inst.cells
    cells = env.instance.cells
    for pit in pits:
        assert sum((pit[0] + dx, pit[1] + dy) in cells for dx, dy in DIRECTIONS.values()) == 1
    assert all(env.instance.distances(a, b) == inst.distances(a, b)
               for a in inst.cells for b in inst.cells)
    assert fresh(pits=2)[0].pit_cells == pits                      # the same task, the same pits
    other = GridMapEnv(pits=2)
    other.reset(Task("gridmap", inst.to_params(), id="t2"))
    assert other.pit_cells != pits
    assert fresh()[0].pit_cells == frozenset() and fresh()[1].text == fresh(pits=0)[1].text
    with pytest.raises(ValueError, match="pits"):
        GridMapEnv(pits=-1)


def test_a_pit_keeps_the_walker_until_a_restore_takes_it_back():
    env, _ = fresh(pits=1)
    (pit,) = env.pit_cells
    (edge,) = env.instance.adj[pit]
    while env.state.pos != edge:     # the 3x3 box is all open: a greedy walk gets there
        (x, y), (tx, ty) = env.state.pos, edge
        env.step("right" if tx > x else "left" if tx < x else "up" if ty > y else "down")
    before, into = env.snapshot(), next(d for d in env.legal_actions()
                                        if (edge[0] + DIRECTIONS[d][0],
                                            edge[1] + DIRECTIONS[d][1]) == pit)
    step = env.step(into)
    assert step.valid and "fell into a pit" in step.obs.text and env.state.pos == pit
    assert env.progress() == 0.0 and env.steps_to_goal() == float("inf")
    key = env.state_key()
    for _ in range(3):
        (move,) = env.legal_actions()
        step = env.step(move)
        assert step.valid and env.state_key() == key and "in a pit" in step.obs.text
    clone = env.copy()
    assert clone.pit_cells == env.pit_cells and clone.state_key() == key
    steps = env.clock()
    env.restore(before, keep_clock=True)    # a backtrack: the pit found stays found
    assert env.state.pos == edge and env.clock() == steps and env.legal_actions()
    assert f"A pit lies {into}." in env.observation().text and into in env.legal_actions()
    env.restore(before)                     # a simulator's restore: all as it was
    assert "pit" not in env.observation().text


def test_the_exploration_metric_leaves_episodes_on_maps_with_pits_alone():
    task = task_of(instance_b())
    assert episode_metrics(task, {"actions": ["up"]})["steps"] == 1
    assert episode_metrics(task, {"actions": ["up"], "env_options": {"pits": 2}}) == {}
