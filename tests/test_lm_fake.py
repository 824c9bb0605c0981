"""FakeLM and usage accounting by role (docs/methods/rmcts.md#token-accounting)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from clew.agents.lm.base import ChatRequest, LMError, Sampling
from clew.agents.lm.calls import call
from clew.agents.lm.fake import FakeLM
from clew.agents.usage import UsageByRole


def _req(text: str, n: int = 1, role: str = "policy") -> ChatRequest:
    return ChatRequest([{"role": "user", "content": text}], Sampling(n=n), role=role)


def test_call_records_prompt_once_and_completions_summed_by_role():
    lm = FakeLM(["one two", "three", "four five six", "seven"])
    episode = SimpleNamespace(usage=UsageByRole())
    comps = asyncio.run(call(lm, _req("a b c", n=3), episode.usage))
    assert [c.text for c in comps] == ["one two", "three", "four five six"]
    asyncio.run(call(lm, _req("d e", role="value"), episode.usage))
    policy, value = episode.usage["policy"], episode.usage["value"]
    # FakeLM counts words: prompt 3 words once (not 3 times), completions 2 + 1 + 3
    assert (policy.prompt_tokens, policy.completion_tokens, policy.calls) == (3, 6, 1)
    assert (value.prompt_tokens, value.completion_tokens, value.calls) == (2, 1, 1)
    assert episode.usage.total().total_tokens == 3 + 6 + 2 + 1


def test_call_without_usage_and_script_errors():
    lm = FakeLM(["only", RuntimeError("boom")])
    assert asyncio.run(call(lm, _req("q")))[0].text == "only"
    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(call(lm, _req("q")))
    with pytest.raises(LMError, match="script exhausted"):
        asyncio.run(call(lm, _req("q")))


def test_no_retry_in_the_call_path_a_bug_propagates_at_once():
    from clew.agents.policy import LMPolicy
    from clew.agents.prompts import Context

    class Env:
        def parse_action(self, text):
            return text

    def buggy(req, i):
        raise TypeError("a programming error")
    lm = FakeLM(buggy)
    ctx = Context(task="t", observations=["o"], env=Env())
    with pytest.raises(TypeError, match="programming error"):
        asyncio.run(LMPolicy(lm, branching_factor=2).propose(ctx))
    assert len(lm.calls) == 1                      # asked once, never again
