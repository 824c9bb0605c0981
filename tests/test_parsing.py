"""One answer-extraction rule for every agent that reads an action (agents/parsing.py), and one
seed function for every role (agents/seeds.py)."""

from __future__ import annotations

import asyncio

import pytest
from clew.agents.distilled import decide
from clew.agents.lm.fake import FakeLM
from clew.agents.parsing import answer_candidates, answer_text, parse_action
from clew.agents.policy import LMPolicy
from clew.agents.prompts import Context


class Words:
    """An env grammar: single lowercase words from a fixed set."""

    def __init__(self, words=("left", "right", "up", "stop")):
        self.words = set(words)

    def parse_action(self, text):
        t = text.strip().lower()
        return t if t in self.words else None

    def canonical(self, action):
        return action.strip().lower()

    def is_stop(self, action):
        return action == "stop"


CASES = [
    # (completion, what every parser reads)
    ("Maybe ```left``` is good, but no.\nNext action:\n```right```", "right"),
    ("Next action: ```left```. Next action:\n```python\nright\n```", "right"),   # last phrase
    ("Next action: right", "right"),            # the documented case: phrase, no fence
    ("Next action: ```jump``` ```left```", "left"),      # the env rejects the first candidate
    ("I think so. ```left``` then ```right```", "right"),   # no phrase: last fence
    ("right", "right"),                          # the env's own format: the whole text
    ("```right\n```", "right"),                  # a lone word is the action, not a tag
    ("nothing here", None),
    ("", None),
]


@pytest.mark.parametrize("text, expected", CASES)
def test_policy_react_and_distilled_read_the_same_action(text, expected):
    env = Words()
    assert parse_action(env, text) == expected
    # the search policy (one sample) reads the same
    lm = FakeLM([text or " "])
    ctx = Context(task="t", observations=["o"], env=env)
    props = asyncio.run(LMPolicy(lm, 1).propose(ctx, n=1))
    assert [p.action for p in props] == ([expected] if expected else [])
    # the distilled agent, which has no env parser, takes the first candidate; it agrees
    # whenever that candidate is an action
    first = answer_text(text)
    if expected is not None and first is not None and env.parse_action(first):
        assert decide(text, [0]).action == expected


def test_candidate_order():
    text = "I like ```up```.\nNext action: left, because"
    assert answer_candidates(text) == ["left", "left, because", "up", text]
    assert answer_text("   ") is None


def test_distilled_seeds_differ_across_tasks_and_steps():
    from clew.agents.seeds import derive_seed

    seeds = {derive_seed(0, key, t) for key in ("task-a#0", "task-b#0") for t in range(3)}
    assert len(seeds) == 6
    assert derive_seed(None, "x") is None
    assert derive_seed(7, "a", 1) == derive_seed(7, "a", 1) < 2 ** 31


# --- issue 11: the hardened rules, on texts outside the corpus --------------------------------
@pytest.mark.parametrize("text, expected", [
    ("Next action: up, because left is blocked", "up"),
    ("**Next Action**: left (right would revisit a cell)", "left"),
    ("next action - stop", "stop"),
    ("Next action:\n```\nright", "right"),                     # a fence left open
    ("<think>Next action: ```left```</think>\nNext action: ```up```", "up"),
    ("<think>Next action: ```left```", None),                  # still thinking: no answer
])
def test_action_rules(text, expected):
    assert parse_action(Words(), text) == expected


def test_cut_completions_need_a_complete_answer():
    env = Words()
    assert parse_action(env, "Next action: ```right``` because", finish_reason="length") == "right"
    assert parse_action(env, "Next action: ```rig", finish_reason="length") is None
    assert parse_action(env, "Next action: right", finish_reason="length") is None
    assert parse_action(env, "Next action: right\nsince", finish_reason="length") == "right"


@pytest.mark.parametrize("text, expected", [
    ("Status: B", "B"), ("Status Code → C", "C"), ("STATUS_CODE = d", "D"),
    ("The status code is E.", "E"), ("Grade: (B)", "B"),
    ("STATUS CODE: A only if the task is done. Here it is not. STATUS CODE: D.", "D"),
    ("STATUS CODE: B\n(STATUS CODE: A would need the goal.)", "B"),
    ("I would say C or D.", None), ("STATUS CODE: none of these", None),
])
def test_status_rules(text, expected):
    from clew.agents.parsing import parse_status

    assert parse_status(text) == expected
