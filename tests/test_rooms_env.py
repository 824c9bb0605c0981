"""Dark Treasure Rooms env: rules, multi-episode runs, prompts, snapshots (docs/methods/envs.md#dark-treasure-rooms)."""

import json
import math

import pytest
from clew.envs.base import Task
from clew.envs.registry import generate, make
from clew.envs.rooms.env import RoomsEnv
from clew.envs.rooms.layouts import Layout
from hypothesis import given, settings
from hypothesis import strategies as st
from rooms_cases import EPISODE_1, EPISODE_2, EXAMPLE, R4, S, example_task, small_task


def play(env, actions):
    return [env.step(a) for a in actions]


def test_worked_example_episode_1_and_the_next_episode_start():
    env = RoomsEnv()
    first = env.reset(example_task(3))
    assert first.text == "Episode 1:\nYou see: dodger_blue door, tangerine door"
    steps = play(env, EPISODE_1)
    assert [s.reward for s in steps] == [0, 0, 3, 0, 2, 3]
    assert all(s.valid for s in steps) and not any(s.terminated for s in steps)
    assert steps[-1].info["episode_end"] == "pickups"
    assert steps[-1].info["episode_return"] == 8
    assert [m.room for m in env.state.moves][-1] == R4
    assert sum(m.moved for m in env.state.moves) == 3  # doors used in episode 1
    # the world is reset: start room, all balls back, budget refilled; history kept
    assert "Episode 2:\nYou see: dodger_blue door, tangerine door" in steps[-1].obs.text
    assert env.state.room == S and env.state.doors_used == 0 and env.state.collected == ()
    assert env.episode_returns() == [8]
    assert len(env.state.moves) == 6


def test_door_budget_rules():
    # C = 3: the 3rd door reaches R4, its balls can still be picked up; a door then ends it.
    env = RoomsEnv()
    env.reset(Task("rooms", {"layout": {**EXAMPLE, "door_budget": 3}, "n_episodes": 2}))
    steps = play(env, ["dodger_blue door", "cerulean door", "teal door", "turquoise ball",
                       "teal door"])
    assert env.state.moves[2].next_room == R4
    assert steps[3].reward == 2 and steps[3].info["episode_end"] is None
    assert steps[4].valid and not steps[4].info["moved"]
    assert steps[4].info["episode_end"] == "doors"
    assert env.state.episode == 1 and env.state.room == S
    # shortcut: C used and nothing left to pick up ends the episode at once
    steps = play(env, ["dodger_blue door", "apricot door", "apricot door"])
    assert steps[-1].info["episode_end"] == "stuck" and steps[-1].terminated
    assert "All 2 episodes are over." in steps[-1].obs.text
    after = env.step("dodger_blue door")
    assert after.terminated and not after.valid


def test_stuck_shortcut_can_be_turned_off():
    env = RoomsEnv()
    env.reset(Task("rooms", {"layout": {**EXAMPLE, "door_budget": 2}, "n_episodes": 1,
                             "end_when_stuck": False}))
    steps = play(env, ["dodger_blue door", "apricot door"])
    assert steps[-1].info["episode_end"] is None
    last = env.step("apricot door")
    assert last.terminated and last.info["episode_end"] == "doors" and not last.info["moved"]


def test_invalid_replies_use_no_budget_but_count_toward_the_call_cap():
    env = RoomsEnv()
    env.reset(example_task(2, call_cap_extra=0))  # cap = C + K = 11 calls per episode
    env.step("dodger_blue door")
    for i in range(9):
        step = env.step("<nothing>")
        assert not step.valid and env.state.doors_used == 1
    assert step.info["episode_end"] is None
    step = env.step("<still nothing>")
    assert step.info["episode_end"] == "call_cap" and env.state.episode == 1
    assert env.state.invalid == 10 and env.state.steps == 11 and len(env.state.moves) == 1
    assert "Episode 2:" in step.obs.text


def test_run_ends_after_n_episodes_and_history_is_kept_in_the_prompt():
    env = RoomsEnv()
    env.reset(example_task(2))
    play(env, EPISODE_1 + EPISODE_2)
    prompt = env.prompt()
    assert prompt.startswith("Your past episodes:\n\nEpisode 1:\nYou see: dodger_blue door, "
                             "tangerine door\n>dodger_blue door\nReward: 0\n")
    assert "Over a total of 2 episodes" in prompt and "You have 8 door interactions" in prompt
    current = prompt.split("Current episode:\n")[1]
    assert current.startswith("You see: dodger_blue door, tangerine door\n>tangerine door\n"
                              "Reward: 0\nYou see: tangerine door, midnight_blue ball\n"
                              ">midnight_blue ball\nReward: 5\n")
    assert prompt.endswith("Which object do you want to interact with next?\nReply with one "
                           "object enclosed with < and >, e.g. <door>. What is your next action?")
    # episode 1 of a run: the past block says None
    fresh = RoomsEnv()
    fresh.reset(example_task(2))
    assert fresh.prompt().startswith("Your past episodes:\nNone\n\nYou are controlling")


def test_instruction_variants():
    env = RoomsEnv()
    env.reset(example_task(20, instruction="explore"))
    assert "Ignore the reward." in env.instructions()
    assert "use what you already know" in env.instructions("exploit")
    assert "explore the environment to collect information" in env.instructions("task")
    assert "Ignore the reward." in env.prompt() and "Ignore the reward." not in env.prompt("task")
    with pytest.raises(ValueError, match="unknown instruction variant 'greedy'"):
        env.instructions("greedy")


def test_entry_first_order_puts_the_door_just_used_first():
    env = RoomsEnv(order="entry_first")
    env.reset(example_task(1))
    env.step("tangerine door")
    step = env.step("tangerine door")
    assert step.obs.text.endswith("You see: tangerine door, dodger_blue door")
    canonical = RoomsEnv()
    canonical.reset(example_task(1))
    play(canonical, ["tangerine door", "tangerine door"])
    assert canonical.observation().text.endswith("You see: dodger_blue door, tangerine door")


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), cut=st.integers(0, 60), tail=st.integers(1, 40),
       keep_clock=st.booleans())
def test_restore_and_replay_equals_reset_and_replay(seed, cut, tail, keep_clock):
    import random

    task = small_task(seed)
    rng = random.Random(seed)
    env = RoomsEnv()
    env.reset(task)
    script = []
    for _ in range(cut + tail):
        if env.done:
            break
        a = rng.choice(env.legal_actions() + ["<junk>"])
        script.append(a)
        env.step(a)
    prefix, rest = script[:cut], script[cut:]
    # a: reset + replay everything; b: replay prefix, snapshot, wander, restore, replay rest
    a = RoomsEnv()
    a.reset(task)
    texts_a = [a.step(x).obs.text for x in prefix]
    snap = a.snapshot()
    texts_a += [a.step(x).obs.text for x in rest]
    b = RoomsEnv()
    b.reset(task)
    for x in prefix:
        b.step(x)
    for x in script[:5]:
        b.step(x)
    before = b.clock()
    b.restore(snap, keep_clock=keep_clock)
    assert b.clock() == (before if keep_clock else snap.steps)
    b.set_clock(snap.steps)
    texts_b = [b.step(x).obs.text for x in rest]
    assert texts_b == texts_a[len(prefix):]
    assert b.state == a.state and b.observation().text == a.observation().text
    # copies are independent
    c = a.copy()
    if not c.done:
        c.step(c.legal_actions()[0])
        assert c.state != a.state


def test_layout_validation_names_the_problem():
    with pytest.raises(ValueError, match="not side by side"):
        Layout.from_dict({**EXAMPLE, "doors": [{"name": "x", "rooms": [0, 4]}]})
    with pytest.raises(ValueError, match="used twice"):
        Layout.from_dict({**EXAMPLE, "balls": [{"name": "teal", "room": 2, "reward": 1}]})
    with pytest.raises(ValueError, match="reward"):
        Layout.from_dict({**EXAMPLE, "balls": [{"name": "x", "room": 2, "reward": -1}]})
    with pytest.raises(ValueError, match="door_budget"):
        Layout.from_dict({**EXAMPLE, "door_budget": 0})
    with pytest.raises(ValueError, match="stored rmax 12 differs"):
        Layout.from_dict({**EXAMPLE, "rmax": 12})
    with pytest.raises(ValueError, match="unknown param"):
        RoomsEnv().reset(Task("rooms", {"layout": EXAMPLE, "episodes": 3}))
    with pytest.raises(ValueError, match="need 'layout'"):
        RoomsEnv().reset(Task("rooms", {}))


def test_registry_make_and_generate_are_deterministic():
    env = make("rooms")
    a, b = generate("rooms", {"size": 5}, 7), generate("rooms", {"size": 5}, 7)
    assert a == b and a.to_json() == b.to_json()
    assert generate("rooms", {"size": 5}, 8) != a
    layout = Layout.from_dict(a.params["layout"])
    # the current generator (version 3): C = ⌈1.5 · the start's eccentricity⌉
    assert layout.door_budget == math.ceil(1.5 * layout.eccentricity)
    v2 = Layout.from_dict(generate("rooms", {"size": 5, "generator_version": 2}, 7)
                          .params["layout"])
    assert v2.door_budget == v2.eccentricity  # version 2: C = the start's eccentricity
    assert env.reset(a).text.startswith("Episode 1:\nYou see: ")
    Task.from_dict(json.loads(a.to_json()))  # JSON round trip
    with pytest.raises(ValueError, match="unknown param"):
        generate("rooms", {"sise": 5}, 1)
    frozen = generate("rooms", {"layout_id": "7x7-b", "n_episodes": 5}, 0)
    assert frozen.params["n_episodes"] == 5 and frozen.params["layout"]["id"] == "7x7-b"
