"""TextMiniGridEnv: multi-action steps, no-ops, limits, memory, prompts, snapshots (docs/methods/envs.md#textminigrid)."""

import copy

import pytest
from clew.envs.base import Task
from clew.envs.registry import make
from clew.envs.textminigrid.env import UNPARSABLE, TextMiniGridEnv
from clew.envs.textminigrid.layout import Layout, Mission, Placed
from clew.envs.textminigrid.parsing import ACTIONS
from clew.envs.textminigrid.prompts import ABLATION_VARIANTS, THINK_LINE
from hypothesis import given, settings
from hypothesis import strategies as st


def layout_task(agent, objects, doors=(), mission=None, rooms_per_side=1):
    first = objects[0]
    mission = mission or Mission("pickup", first.type, first.color)
    lay = Layout(rooms_per_side, tuple(doors), tuple(objects), agent, mission)
    return Task("textminigrid", {"layout": lay.to_dict()}, seed=0, id="hand")


# agent at (1, 1) facing North (a wall in front); a red ball at (3, 3)
CORNER = layout_task((1, 1, 3), [Placed(3, 3, "ball", "red")])
# agent at (2, 2) facing East with the red ball right in front
FACING_BALL = layout_task((2, 2, 0), [Placed(3, 2, "ball", "red"), Placed(1, 4, "box", "blue")])


def gen_task(rooms=4, k=3, seed=1):
    return Task("textminigrid", {"rooms": rooms, "objs_per_room": k}, seed=seed, id="g")


def test_registered_and_built_by_name():
    env = make("textminigrid", representation="sd", max_actions=5)
    assert isinstance(env, TextMiniGridEnv) and env.max_actions == 5
    with pytest.raises(ValueError, match="representation"):
        TextMiniGridEnv(representation="ascii")
    with pytest.raises(ValueError, match="max_actions"):
        TextMiniGridEnv(max_actions=0)


def test_blocked_actions_are_silent_no_ops_and_the_sequence_continues():
    env = TextMiniGridEnv(max_actions=5)
    first = env.reset(CORNER)
    step = env.step("<actions>Go Forward,Pick Up,Drop,Toggle,Turn Right</actions>")
    assert step.valid and not step.terminated
    assert step.info["executed"] == ["Go Forward", "Pick Up", "Drop", "Toggle", "Turn Right"]
    assert step.info["blocked"] == [True, True, True, True, False]
    assert env.clock() == 5  # every action costs a step, blocked or not
    trs = step.obs.info["transitions"]
    assert [t["observation"] for t in trs[:4]] == [first.info["view"]] * 4  # unchanged view
    assert trs[4]["direction"] == "East"
    assert "nothing happened" not in step.obs.text  # no feedback by default (docs/methods/envs.md#textminigrid)


def test_feedback_flag_marks_blocked_actions():
    env = TextMiniGridEnv(max_actions=2, feedback=True)
    env.reset(CORNER)
    assert "Action0: Go Forward (nothing happened)" in env.step("Go Forward,Turn Right").obs.text


def test_truncation_to_m_and_reward_on_success_mid_sequence():
    env = TextMiniGridEnv(max_actions=2)
    env.reset(CORNER)
    step = env.step("<actions>Turn Right,Turn Right,Turn Right</actions>")
    assert step.info["executed"] == ["Turn Right"] * 2 and step.info["truncated"] == ["Turn Right"]
    env = TextMiniGridEnv(max_actions=5)
    env.reset(FACING_BALL)
    step = env.step("Pick Up,Turn Left,Turn Left")
    assert step.terminated and env.grade() == 1.0 and step.info["executed"] == ["Pick Up"]
    assert step.reward == pytest.approx(1 - 0.9 * 1 / 200)  # BabyAI reward (docs/methods/envs.md#textminigrid)
    assert env.legal_actions() == []


def test_picking_up_the_wrong_object_is_not_a_failure():
    env = TextMiniGridEnv(max_actions=5)
    env.reset(layout_task((2, 2, 0), [Placed(4, 4, "ball", "red"), Placed(3, 2, "key", "blue")]))
    step = env.step("Pick Up,Turn Left,Drop")
    assert not step.terminated and step.obs.info["inventory"] == "nothing"
    assert step.obs.info["transitions"][0]["inventory"] == "a blue key"


def test_step_limit_counts_atomic_actions():
    env = TextMiniGridEnv(max_actions=5, max_steps=7)
    env.reset(CORNER)
    assert not env.step(",".join(["Turn Left"] * 5)).terminated
    step = env.step(",".join(["Turn Left"] * 5))
    assert step.terminated and env.clock() == 7 and len(step.info["executed"]) == 2
    assert env.grade() == 0.0
    after = env.step("Turn Left")
    assert not after.valid and after.terminated and env.clock() == 7


def test_default_limit_is_200_steps_with_m_1():
    env = TextMiniGridEnv()
    env.reset(CORNER)
    n = 0
    while not env.done:
        env.step("Turn Left")
        n += 1
    assert n == 200 and env.clock() == 200


def test_unparsable_replies_requery_then_cost_one_no_op():
    env = TextMiniGridEnv(max_actions=5)
    first = env.reset(CORNER)
    for _ in range(2):
        step = env.step("I am not sure what to do.")
        assert not step.valid and env.clock() == 0 and step.info["requery"]
        assert step.obs.text.endswith(first.text) and "no valid action" in step.obs.text
    step = env.step("still nothing")
    assert not step.valid and env.clock() == 1 and step.info["executed"] == [UNPARSABLE]
    assert f"Action0: {UNPARSABLE}" in step.obs.text
    assert env.step("nope").info.get("requery")  # the streak starts again


def test_toggling_a_box_destroys_it_and_the_target_box_ends_the_episode():
    target_box = layout_task((2, 2, 0), [Placed(3, 2, "box", "green")])
    env = TextMiniGridEnv(max_actions=3)
    env.reset(target_box)
    step = env.step("Toggle,Turn Left")
    assert step.terminated and env.grade() == 0.0 and step.info["target_destroyed"]
    assert step.info["executed"] == ["Toggle"]
    other = layout_task((2, 2, 0), [Placed(4, 4, "ball", "red"), Placed(3, 2, "box", "green")])
    env.reset(other)
    step = env.step("Toggle")
    assert not step.terminated and step.info["boxes_destroyed"] == 1 and "EM" in env.state.view
    env = TextMiniGridEnv(max_actions=3, box_toggle="noop")
    env.reset(target_box)
    step = env.step("Toggle")
    assert not step.terminated and step.info["blocked"] == [True] and env.clock() == 1


def test_locked_door_needs_the_matching_key():
    doors = [Placed(5, 2, "door", "yellow", locked=True)]
    objs = [Placed(8, 8, "ball", "red"), Placed(3, 2, "key", "yellow")]
    task = layout_task((2, 2, 0), objs, doors, rooms_per_side=2)
    env = TextMiniGridEnv(max_actions=10)
    env.reset(task)
    step = env.step("Go Forward,Go Forward,Toggle")  # the key blocks the way; no key in hand
    assert step.info["blocked"] == [True, True, True]
    step = env.step("Pick Up,Go Forward,Go Forward,Toggle,Go Forward")
    assert step.info["blocked"] == [False, False, False, False, False]
    assert env.observation().info["agent"][:2] == [5, 2]  # standing in the open doorway


def test_user_prompt_format_and_transitions():
    env = TextMiniGridEnv(max_actions=5)
    obs = env.reset(FACING_BALL)
    lines = obs.text.splitlines()
    assert lines[:3] == ["Your final mission is to pick up the red ball.",
                         "You have no subgoals.", "Your current observation:"]
    assert "Action0" not in obs.text
    assert "You are facing East.\nYou are carrying nothing." in obs.text
    assert "at most 5 actions" in obs.text and "<actions>Turn Left,Go Forward,Pick Up</actions>" in obs.text
    obs = env.step("Turn Left,Turn Right").obs
    text = obs.text
    assert "Action0: Turn Left\nObservation0:\n" in text and "Direction0:North\nInventory0:nothing" in text
    assert "Action1: Turn Right" in text and "Direction1:East" in text and "Action2" not in text
    last_obs = text.split("Observation1:\n")[1].split("\nDirection1:")[0]
    current = text.split("Your current observation:\n")[1].split("\nYou are facing")[0]
    assert last_obs == current == obs.info["view"]


def test_think_variant_appends_the_opro_line():
    env = TextMiniGridEnv(think=True)
    assert env.reset(CORNER).text.endswith(THINK_LINE)


def test_chat_memory_keeps_the_last_five_decisions():
    env = TextMiniGridEnv(max_actions=1, memory=5)
    env.reset(CORNER)
    prompts, replies = [], []
    for i in range(7):
        prompts.append(env.observation().text)
        replies.append(f"<actions>Turn Left</actions><intentions>turn {i}</intentions>")
        obs = env.step(replies[-1]).obs
    chat = obs.info["chat_history"]
    assert len(chat) == 10
    assert [m["content"] for m in chat[0::2]] == prompts[2:]
    assert [m["content"] for m in chat[1::2]] == replies[2:]
    assert "turn 6" not in obs.text  # chat mode: nothing in the text itself


def test_text_memory_block():
    env = TextMiniGridEnv(memory=2, memory_mode="text")
    env.reset(CORNER)
    for i in range(3):
        obs = env.step(f"<actions>Turn Left</actions><intentions>look {i}</intentions>").obs
    assert "Step0 intention: look 1" in obs.text and "Step1 intention: look 2" in obs.text
    assert "look 0" not in obs.text and obs.info["chat_history"] == []


def test_instructions_variants():
    env = TextMiniGridEnv(representation="sc")
    full = env.instructions()
    for part in ("Observation description", "Action description", "Mission description",
                 "Strategic guide", "XX"):
        assert part in full
    texts = {v: env.instructions(v) for v in ABLATION_VARIANTS}
    assert len(ABLATION_VARIANTS) == 8 and len(set(texts.values())) == 8
    assert all("Observation description" in t for t in texts.values())
    assert "Action description" not in texts["obs+mission+strategy"]
    assert texts["obs+action+mission+strategy"] == full
    assert "sentences" in TextMiniGridEnv(representation="sd").instructions()
    assert "Red_Box" in TextMiniGridEnv(representation="hybrid").instructions()
    with pytest.raises(ValueError, match="unknown component"):
        env.instructions("obs+jokes")


def test_fewshot_examples_in_the_system_prompt():
    env = TextMiniGridEnv(representation="sc", max_actions=10)
    text = env.instructions("default+fewshot")
    assert text.startswith(env.instructions())
    for i, title in enumerate(["unblocking an object", "unblocking a door",
                               "opening a locked door", "exploration"], 1):
        assert f"Example {i}: {title}." in text
    blocks = [b.split("</actions>")[0] for b in text.split("<actions>")[1:]]
    assert all(1 <= len(b.split(",")) <= 10 for b in blocks)


def test_parse_action_and_canonical():
    env = TextMiniGridEnv(max_actions=2)
    assert env.parse_action("<actions>left, FORWARD, drop</actions>") == "Turn Left,Go Forward"
    assert env.parse_action("hmm") is None
    assert env.canonical("turn left,go forward") == env.canonical("<actions>Left,Forward</actions>")
    assert env.legal_actions() == []  # before reset
    env.reset(CORNER)
    assert env.legal_actions() == list(ACTIONS)


def test_oracle_exposes_grid_target_and_plan():
    env = TextMiniGridEnv()
    env.reset(gen_task(4, 3, 16))
    orc = env.oracle()
    assert orc.full_grid.splitlines()[8] == "WW;II;EM;EM;EM;PD;EM;EM;EM;EM;WW;"
    assert orc.target == (1, 4)  # the red ball
    assert orc.solution_length == len(orc.plan()) and orc.difficulty == "hard"
    before = env.observation().text
    assert orc.bot_run().success and env.observation().text == before


# --- snapshots ---------------------------------------------------------------------------------
def replies():
    single = st.sampled_from(ACTIONS)
    return st.lists(st.one_of(single, st.lists(single, min_size=1, max_size=6).map(",".join),
                              st.just("gibberish")), max_size=14)


def play(env, actions):
    out = []
    for a in actions:
        s = env.step(a)
        out.append((s.obs.text, s.reward, s.terminated, s.valid, env.clock()))
    return out


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([(1, 5), (4, 3), (9, 5)]), st.integers(1, 50), replies(), replies(),
       st.sampled_from(["sc", "sd", "hybrid"]))
def test_restore_plus_replay_equals_reset_plus_replay(cfg, seed, prefix, suffix, rep):
    task = gen_task(*cfg, seed)
    env = TextMiniGridEnv(representation=rep, max_actions=4, trace=True)
    env.reset(task)
    play(env, prefix)
    snap = env.snapshot()
    first = play(env, suffix)
    env.restore(snap)
    assert play(env, suffix) == first
    fresh = TextMiniGridEnv(representation=rep, max_actions=4, trace=True)
    fresh.reset(task)
    assert play(fresh, prefix + suffix)[len(prefix):] == first
    other = env.copy()  # snapshots travel between copies
    other.restore(snap)
    assert play(other, suffix) == first


def test_keep_clock_and_copy_independence():
    env = TextMiniGridEnv(max_actions=3)
    start = env.reset(gen_task(4, 3, 2))
    snap = env.snapshot()
    env.step("Turn Left,Go Forward,Go Forward")
    env.restore(snap, keep_clock=True)
    assert env.clock() == 3 and env.state.decisions == 0  # the world is back, the clock is not
    assert env.observation().text == start.text
    assert env.level.step_count == 3
    sim = env.copy()
    sim.step("Turn Right,Turn Right")
    assert env.clock() == 3 and sim.clock() == 5
    assert env.observation().text == start.text != sim.observation().text


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 50), replies(), replies())
def test_copy_plays_like_the_original_and_leaves_it_untouched(seed, prefix, suffix):
    env = TextMiniGridEnv(max_actions=4, trace=True, memory=3)
    env.reset(gen_task(4, 3, seed))
    play(env, prefix)
    before = copy.deepcopy(env.state)
    sim = env.copy()
    played = play(sim, suffix)
    assert env.state == before   # traced poses, seen cells and memory stay the original's
    assert play(env, suffix) == played
    assert sim.state == env.state
