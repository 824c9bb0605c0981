"""The realistic-completion corpus (tests/corpus/README.md) parses 100% right, for every env
family and every role (issue 11 item 1)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import yaml
from clew.agents.distilled import decide
from clew.agents.parsing import (
    parse_action,
    parse_free_text,
    parse_rubric,
    parse_status,
)
from clew.envs.registry import make_for
from clew.envs.suites import resolve

CORPUS = Path(__file__).parent / "corpus"
#: the task each family's cases refer to (visible objects, node ids, number of variables)
TASKS = {"gridmap": ("gridmap-mini:test", 0), "rooms": ("rooms-v2-4x4:test", 0),
         "hill": ("paper-003-main:test", 0), "tree": ("paper-003-main:test", 2),
         "maxsat": ("paper-003-main:test", 5), "textminigrid": ("textminigrid-v1:test", 0)}
FAMILIES = tuple(TASKS)
ROLES = ("policy", "react", "distilled", "value", "judge", "rubric", "reflection", "debate",
         "expect")
MIN_CASES = 15


def load(path: Path) -> list[dict]:
    return yaml.safe_load(path.read_text())


@cache
def env_for(family: str, max_actions: int = 3):
    suite, i = TASKS[family]
    task = resolve(suite)[i]
    env = make_for(task, **({"max_actions": max_actions} if family == "textminigrid" else {}))
    env.reset(task)
    return env


def cases(kind: str, name: str):
    data = load(CORPUS / kind / f"{name}.yaml")
    return [pytest.param(c, id=f"{name}-{i}-{c['model']}") for i, c in enumerate(data)]


@pytest.mark.parametrize("kind, names", [("envs", FAMILIES), ("roles", ROLES)])
def test_corpus_size_and_model_habits(kind, names):
    for name in names:
        data = load(CORPUS / kind / f"{name}.yaml")
        assert len(data) >= MIN_CASES, name
        models = {c["model"] for c in data}
        assert {"qwen2.5", "llama3", "mistral", "qwen3-think", "qwen3"} <= models, name
        assert any(c["expect"] is None for c in data), name        # failures are in it too
        assert any(c.get("finish_reason") == "length" for c in data), name


@pytest.mark.parametrize("case", [p for f in FAMILIES for p in cases("envs", f)])
def test_env_replies(case, request):
    family = request.node.callspec.id.split("-")[0]
    env = env_for(family, case.get("max_actions", 3))
    reason = case.get("finish_reason", "stop")
    if reason == "stop":                     # what env.step reads
        assert env.parse_action(case["text"]) == case["expect"]
    # what ReAct reads (the finish reason included)
    assert parse_action(env, case["text"], finish_reason=reason) == case["expect"]


@pytest.mark.parametrize("case", cases("roles", "policy") + cases("roles", "react"))
def test_policy_and_react_replies(case):
    env = env_for(case["env"], case.get("max_actions", 3))
    got = parse_action(env, case["text"], finish_reason=case.get("finish_reason", "stop"))
    assert got == case["expect"]


@pytest.mark.parametrize("case", cases("roles", "distilled"))
def test_distilled_replies(case):
    decision = decide(case["text"], [0, 1, 2], case.get("finish_reason", "stop"))
    got = None if "parse_error" in decision.info else decision.action
    assert got == case["expect"]
    if "env" in case:                 # what the agent executes: the env reads the answer text
        env = env_for(case["env"], case.get("max_actions", 3))
        assert (env.parse_action(got) if got else None) == case["executes"]


@pytest.mark.parametrize("case", cases("roles", "value") + cases("roles", "judge"))
def test_status_codes(case):
    assert parse_status(case["text"], case.get("finish_reason", "stop")) == case["expect"]


@pytest.mark.parametrize("case", cases("roles", "rubric"))
def test_rubrics(case):
    assert parse_rubric(case["text"], case.get("finish_reason", "stop")) == case["expect"]


@pytest.mark.parametrize("case", cases("roles", "reflection") + cases("roles", "debate")
                         + cases("roles", "expect"))
def test_free_text(case):
    assert parse_free_text(case["text"], case.get("finish_reason", "stop")) == case["expect"]


# --- general rules, beyond the written cases ------------------------------------------------------
def readers():
    """(name, cases, reader) for every file: reader(text, finish_reason) -> parse."""
    out = []
    for f in FAMILIES:
        out += [(f, c, lambda t, r, c=c, f=f: parse_action(env_for(f, c.get("max_actions", 3)),
                                                           t, finish_reason=r))
                for c in load(CORPUS / "envs" / f"{f}.yaml")]
    for role in ("policy", "react"):
        out += [(role, c, lambda t, r, c=c: parse_action(env_for(c["env"], c.get("max_actions", 3)),
                                                         t, finish_reason=r))
                for c in load(CORPUS / "roles" / f"{role}.yaml")]
    for role, fn in (("value", parse_status), ("judge", parse_status), ("rubric", parse_rubric),
                     ("reflection", parse_free_text), ("debate", parse_free_text),
                     ("expect", parse_free_text)):
        out += [(role, c, fn) for c in load(CORPUS / "roles" / f"{role}.yaml")]
    return out


READERS = readers()


@pytest.mark.parametrize("i", range(len(READERS)))
def test_a_reasoning_block_quoting_other_answers_changes_nothing(i):
    """Thinking models quote the format and other cases' answers before their own: a closed
    reasoning block holding another completion of the same file is never read."""
    name, case, read = READERS[i]
    reason = case.get("finish_reason", "stop")
    others = [c for n, c, _ in READERS if n == name and c["expect"] != case["expect"]]
    quote = others[i % len(others)]["text"] if others else "something else"
    for prefix in ("<think>\n\n</think>\n\n", f"<think>\n{quote}\n</think>\n\n",
                   f"<THINK>{quote}</THINK>\n"):
        assert read(prefix + case["text"], reason) == case["expect"], prefix[:40]


@pytest.mark.parametrize("i", range(len(READERS)))
def test_an_unclosed_reasoning_block_is_no_answer(i):
    _, case, read = READERS[i]
    if "</think>" in case["text"]:
        pytest.skip("the case closes a reasoning block of its own")
    assert read(f"<think>\n{case['text']}", "stop") is None
