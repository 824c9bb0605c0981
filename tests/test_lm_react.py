"""The ReAct agent on the Env API with scripted models (docs/methods/baselines.md#react)."""

from __future__ import annotations

import asyncio

import pytest
from clew.agents.base import Episode
from clew.agents.lm.fake import FakeLM
from clew.agents.parsing import parse_action
from clew.agents.react import ReActAgent
from clew.envs.base import Observation, Task
from clew.envs.registry import ENVS, generator
from clew.envs.registry import register as register_env
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from toyenv import LineEnv, line_task, register

register()


def answer(action: str, thought: str = "I should walk right.") -> str:
    return f"{thought}\nNext action:\n```\n{action}\n```"


class WindowLineEnv(LineEnv):
    name = "toy-line-window"
    history_window = 1


class ChatMemoryLineEnv(LineEnv):
    """Keeps its own chat memory, as TextMiniGrid does."""

    name = "toy-line-chat"

    def observation(self) -> Observation:
        obs = super().observation()
        obs.info["chat_history"] = [{"role": "user", "content": "remembered"},
                                    {"role": "assistant", "content": "noted"}]
        return obs


class RetryLineEnv(LineEnv):
    name = "toy-line-retry"
    parse_retries = 2


for _cls in (WindowLineEnv, ChatMemoryLineEnv, RetryLineEnv):
    register_env(_cls.name, f"{__name__}:{_cls.__name__}")


def play(agent, task, **kw):
    return asyncio.run(run_episode(agent, task, **kw))


def test_prompt_holds_instructions_observations_and_raw_completions():
    script = [answer("right", f"thought {i}") for i in range(3)]
    lm = FakeLM(script)
    rec = play(ReActAgent(lm), line_task(0, length=3))
    assert rec["actions"] == ["right"] * 3 and rec["outcome"]["success"]
    assert len(lm.calls) == 3
    last = lm.calls[-1].messages
    assert last[0]["role"] == "system"
    assert "Walk right to the end of the line." in last[0]["content"]
    assert "Actions: left, right" in last[0]["content"]  # env.action_help()
    users = [m["content"] for m in last if m["role"] == "user"]
    assistants = [m["content"] for m in last if m["role"] == "assistant"]
    assert users == ["at 0 of 3, step 0", "at 1 of 3, step 1", "at 2 of 3, step 2"]
    assert assistants == script[:2]  # full history, raw completions verbatim
    assert [m["role"] for m in last[1:]] == ["user", "assistant"] * 2 + ["user"]
    assert all(c.role == "policy" for c in lm.calls)
    policy = rec["usage"]["policy"]
    assert policy["calls"] == 3 and policy["completion_tokens"] > 0


def test_history_window_from_the_env_and_from_the_option():
    lm = FakeLM([answer("right")] * 3)
    play(ReActAgent(lm), Task("toy-line-window", {"length": 3, "budget": 10}, id="w"))
    assert [m["content"] for m in lm.calls[-1].messages if m["role"] == "user"] == [
        "at 1 of 3, step 1", "at 2 of 3, step 2"]
    lm = FakeLM([answer("right")] * 3)
    play(ReActAgent(lm, history_window=0), line_task(0, length=3))
    assert [m["role"] for m in lm.calls[-1].messages] == ["system", "user"]


def test_env_chat_memory_replaces_the_agent_history():
    lm = FakeLM([answer("right")] * 2)
    task = Task("toy-line-chat", {"length": 2, "budget": 10}, id="c")
    play(ReActAgent(lm), task)
    assert [m["content"] for m in lm.calls[-1].messages[1:]] == [
        "remembered", "noted", "at 1 of 2, step 1"]


@pytest.mark.parametrize("text, expected", [
    ("Maybe ```left``` is good, but no.\nNext action:\n```right```", "right"),
    ("Next action: ```left```. Next action:\n```python\nright\n```", "right"),
    ("right", "right"),
    ("I think so. ```left``` then ```right```", "right"),
    ("Next action: ```jump``` ```left```", "left"),
    ("Next action: right", "right"),     # a phrase without a fence: the rest of its line
    ("nothing here", None),
    ("", None),
])
def test_parse_order(text, expected):
    env = LineEnv()
    env.reset(line_task(0))
    assert parse_action(env, text) == expected


def test_unparsable_answers_go_to_the_env_as_raw_text():
    garbage = "I am confused {not json} <actions></actions>"
    lm = FakeLM([garbage, answer("right")])
    rec = play(ReActAgent(lm), line_task(0, length=1))
    assert rec["actions"] == [garbage, "right"]
    first, second = rec["steps"]
    assert first["valid"] is False and first["info"]["parsed"] is False
    assert first["raw"] == garbage
    assert second["valid"] is True and second["info"]["parsed"] is True


def test_parse_retries_requery_with_new_seeds_and_count_tokens():
    lm = FakeLM(["???", "!!!", answer("right")])
    task = Task("toy-line-retry", {"length": 1, "budget": 10}, id="r")
    rec = play(ReActAgent(lm), task)
    assert rec["actions"] == ["right"] and rec["steps"][0]["info"]["attempts"] == 3
    assert len({c.sampling.seed for c in lm.calls}) == 3
    assert rec["usage"]["policy"]["calls"] == 3


def test_seeds_are_deterministic_and_differ_per_step():
    seeds = []
    for _ in range(2):
        lm = FakeLM([answer("right")] * 3)
        play(ReActAgent(lm, seed=5, temperature=0.0), line_task(1, length=3))
        seeds.append([c.sampling.seed for c in lm.calls])
        assert all(c.sampling.temperature == 0.0 for c in lm.calls)
    assert seeds[0] == seeds[1] and len(set(seeds[0])) == 3


def test_registered_as_react_with_a_spec_string():
    agent = build_agent("react", model="fake:Next action: ```right```", temperature=0.0,
                        max_tokens=32, variant="default", seed=3)
    assert agent.kind == "lm" and agent.sampling["max_tokens"] == 32
    rec = play(agent, line_task(0, length=2))
    assert rec["outcome"]["success"]
    with pytest.raises(ValueError, match="does not take option"):
        build_agent("react", model="fake:x", bogus=1)


FRAGMENTS = ["Next action:", "```", "```json\n", '{"action": "up"}', '{"action": ', "<actions>",
             "</actions>", "<intentions>x</intentions>", "Turn Left,Go Forward", "right", "up",
             "query 3", "\x00", "\n", " ", "😀", "\ufffd", "backtrack S0", "STOP", "}" * 5,
             "[" * 20]
completions = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("".join),
    st.builds(lambda f, k: f * k, st.sampled_from(FRAGMENTS), st.integers(100, 2000)),
)
# browsergym needs a browser and a named task: its garbage test is in tests/test_browsergym.py
ENV_NAMES = sorted(n for n in ENVS if not n.startswith("toy-") and n != "browsergym")
TASKS: dict = {}


def _task(name: str):
    if name not in TASKS:
        TASKS[name] = generator(name)({}, 0)
    return TASKS[name]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(ENV_NAMES), texts=st.lists(completions, min_size=1, max_size=4))
def test_garbage_and_adversarial_output_never_crash_an_episode(name, texts):
    lm = FakeLM(lambda req, i: texts[i % len(texts)])
    rec = play(ReActAgent(lm), _task(name), max_steps=4)
    assert 1 <= len(rec["steps"]) <= 4
    for step in rec["steps"]:
        if step["info"].get("parsed") is False:  # what the agent could not parse is invalid
            assert step["valid"] is False
    assert rec["usage"]["policy"]["calls"] >= len(rec["steps"])


def test_episode_object_keeps_history_in_scratch():
    env = LineEnv()
    task = line_task(0)
    ep = Episode(task, env, env.reset(task))
    agent = ReActAgent(FakeLM([answer("right")]))
    decision = asyncio.run(agent.act(ep))
    assert decision.action == "right" and decision.raw == answer("right")
    assert ep.scratch["react"]["pairs"] == [("at 0 of 3, step 0", answer("right"))]
