"""Debate value call pattern, error attribution and contrastive reflection with the fake LM
(spec_002 §2.3, §3.3–§3.7, Appendix C.2–C.3)."""

from __future__ import annotations

import asyncio
import copy

import pytest
from clew.agents.debate import DebateValue
from clew.agents.lm.base import LMError
from clew.agents.lm.fake import FakeLM
from clew.agents.options import ReflectionOptions
from clew.agents.prompts import Context
from clew.agents.reflection import (
    NEG_INF,
    Reflector,
    StepStat,
    TaskRecord,
    improve,
    pick_top,
    policy_error_scores,
    value_error_scores,
)
from clew.agents.usage import UsageByRole
from clew.agents.value import ValueCallError


class TrackingLM(FakeLM):
    """FakeLM that records how many generate calls were in flight at once."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.in_flight = 0
        self.max_in_flight = 0
        self.log: list[tuple[str, str]] = []

    async def generate(self, requests):
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        for r in requests:
            self.log.append(("start", r.role))
        try:
            return await super().generate(requests)
        finally:
            self.in_flight -= 1
            for r in requests:
                self.log.append(("end", r.role))


def debate_responder(req, i):
    last = req.messages[-1]["content"]
    if req.role == "debate":
        return "SUPPORT-ARG" if "heading toward success" in last else "OPPOSE-ARG"
    assert req.role == "judge"
    first = "oppose" if last.index("NOT ON TRACK") < last.index("REASONS THE AGENT IS ON") else "support"
    return f"Thoughts: {first} first\nSTATUS CODE: {'A' if first == 'support' else 'E'}"


def ctx() -> Context:
    return Context(task="Reach the goal.", observations=["o0", "o1"], actions=["a"], task_id="t")


def test_debate_call_pattern_concurrency_and_orders():
    lm = TrackingLM(debate_responder, latency=0.05)
    usage = UsageByRole()
    rec = asyncio.run(DebateValue(lm).evaluate(ctx(), usage=usage))
    debate = [r for r in lm.calls if r.role == "debate"]
    judge = [r for r in lm.calls if r.role == "judge"]
    assert len(debate) == 2 and all(r.sampling.n == 1 for r in debate)
    assert all(r.sampling.temperature == 0.1 and r.sampling.top_p == 0.9 for r in debate)
    assert len(judge) == 2 and all(r.sampling.n == 3 for r in judge)
    assert len(lm.calls) == 4
    # both arguments were in flight at once, before any judge started
    assert lm.log[:2] == [("start", "debate"), ("start", "debate")]
    assert lm.max_in_flight == 2
    # the judge saw both arguments, once with each first
    firsts = sorted(t.split("\n")[0] for t in rec.debate["judge_outputs"])
    assert firsts == ["Thoughts: oppose first"] * 3 + ["Thoughts: support first"] * 3
    assert rec.debate["support"] == "SUPPORT-ARG" and rec.debate["oppose"] == "OPPOSE-ARG"
    assert all("SUPPORT-ARG" in r.messages[-1]["content"] and
               "OPPOSE-ARG" in r.messages[-1]["content"] for r in judge)
    assert rec.v == pytest.approx(0.5)            # 3 x A (1.0) + 3 x E (0.0)
    assert usage["debate"].calls == 2 and usage["judge"].calls == 2
    # prompt counted once per request, completions summed over the 3 samples
    assert usage["judge"].completion_tokens == sum(len(t.split())
                                                   for t in rec.debate["judge_outputs"])
    assert usage["judge"].prompt_tokens == sum(
        sum(len(m["content"].split()) for m in r.messages) for r in judge)


def test_debate_failure_raises_value_error():
    def broken(req, i):
        if req.role == "judge":
            raise LMError("judge died")
        return "arg"
    with pytest.raises(ValueCallError, match="judge"):
        asyncio.run(DebateValue(FakeLM(broken)).evaluate(ctx()))


# --- error attribution ---------------------------------------------------------------------
def record(stats, obs=None, r_gt=None):
    T = len(stats)
    obs = obs or [f"o{i}" for i in range(T + 1)]
    return TaskRecord(task_id="t", task_text="g", observations=obs,
                      actions=[f"a{i}" for i in range(T)], raws=[f"raw{i}" for i in range(T)],
                      stats=stats, r_gt=r_gt)


def test_error_attribution_on_constructed_trajectory():
    """Appendix C.3: last policy step uses the outcome; forward value uses the next Q."""
    stats = [StepStat(q=0.8, v_next=0.1),            # e_pi = 0.7 ; e_V(o1) = |0.1 - Q1| = 0.2
             StepStat(q=0.3, v_next=0.9),            # e_pi = 0.6 ; e_V(o2) = |0.9 - Q2|
             StepStat(q=0.5, v_next=0.5, is_none=True),   # NONE: excluded
             StepStat(q=0.4, v_next=0.2)]            # last: e_pi = |r - 0.4| ; e_V(o4) = |0.2 - R|
    rec = record(stats)
    before = copy.deepcopy(rec)
    assert rec.r_est == 0                            # mean Q = 0.5 <= 0.7
    pol = policy_error_scores(rec, success=False)
    assert pol[:2] == pytest.approx([0.7, 0.6]) and pol[2] == NEG_INF
    assert pol[3] == pytest.approx(0.4)              # |0 - 0.4|
    assert policy_error_scores(rec, success=True)[3] == pytest.approx(0.6)
    assert policy_error_scores(rec, success=False, scale="signed")[3] == pytest.approx(1.4)
    val = value_error_scores(rec, success=False)
    assert val[0] == pytest.approx(0.2)
    assert val[1] == NEG_INF                         # the next step is NONE: no Q to compare
    assert val[2] == NEG_INF
    assert val[3] == pytest.approx(0.2)              # |0.2 - 0| (unit failure anchor)
    assert value_error_scores(rec, success=True)[3] == pytest.approx(0.8)
    assert value_error_scores(rec, success=False, scale="signed")[3] == pytest.approx(1.2)
    assert value_error_scores(rec, False, mode="paper")[:2] == pytest.approx([0.7, 0.6])
    # selection: threshold and n_max respected, excluded never picked
    assert pick_top(pol, 3, 0.5) == [0, 1]
    assert pick_top(pol, 1, 0.5) == [0]
    assert pick_top(pol, 3, 0.65) == [0]
    assert pick_top([NEG_INF, NEG_INF], 3, -10) == []
    assert rec == before                              # never mutated


def test_success_estimate_from_mean_q():
    assert record([StepStat(q=0.9, v_next=0.9), StepStat(q=0.6, v_next=1.0)]).r_est == 1
    assert record([StepStat(q=0.7, v_next=0.9)]).r_est == 0   # strictly greater than 0.7


def reflector_responder(req, i):
    last = req.messages[-1]["content"]
    if "expect to observe" in last:
        return "EXPECTED: a door opens"
    if "ACTUAL NEXT OBSERVATION" in last:
        return "LESSON: doors need keys"
    if "What should the agent do next" in last or "How well did the agent do" in last:
        return "VALUE-EXPECT: go to the goal"
    if "Did your expectation hold" in last:
        return "VALUE-LESSON: be stricter"
    if "Which of the arguments were wrong" in last:
        return "CRITIQUE: the support was wrong"
    raise AssertionError(last)


def test_policy_reflection_predicts_then_contrasts():
    lm = FakeLM(reflector_responder)
    rec = record([StepStat(q=0.9, v_next=0.1), StepStat(q=0.5, v_next=0.5)])
    exp, nxt, text = asyncio.run(Reflector(lm).reflect_policy(rec, 0, success=False))
    assert (exp, nxt, text) == ("EXPECTED: a door opens", "o1", "LESSON: doors need keys")
    first, second = lm.calls
    # usage roles of their own (spec §7.3): the expectation call, then the reflection
    assert (first.role, second.role) == ("expect", "reflection")
    assert "raw0" in first.messages[2]["content"]                       # the reflected action
    assert "EXPECTED: a door opens" in second.messages[2]["content"]    # call 1 fed to call 2
    assert "o1" in second.messages[-1]["content"] and "failed" in second.messages[-1]["content"]
    assert first.sampling.temperature == 0.7 and first.sampling.max_tokens == 384


class DictMemory:
    def __init__(self):
        self.stores = {"policy": [], "value": [], "tasks": []}

    def add(self, which, rec, order=None):
        if any(r["dedup"] == rec["dedup"] for r in self.stores[which]):
            return False
        self.stores[which].append(rec)
        return True


def test_improvement_loop_value_first_then_policy():
    lm = FakeLM(reflector_responder)
    mem = DictMemory()
    debate = {"debate": {"support": "S", "oppose": "O"}}
    stats = [StepStat(q=0.9, v_next=0.1), StepStat(q=0.95, v_next=0.2),
             StepStat(q=0.9, v_next=0.9, value_record=debate)]
    rec = record(stats, r_gt=0.0)
    cfg = ReflectionOptions()
    rep = asyncio.run(improve(rec, mem, Reflector(lm), cfg, value_method="single"))
    # r_est = 1 (mean Q 0.92 > 0.7): policy e = |0.1-.9|=.8, |.2-.95|=.75, |1-.9|=.1
    assert rep.success_used is True
    assert len(mem.stores["policy"]) == 2 and len(mem.stores["value"]) == 1
    roles_in_order = [c.messages[-1]["content"] for c in lm.calls]
    assert "What should the agent do next" in roles_in_order[0]          # value reflection first
    p0 = mem.stores["policy"][0]
    assert p0["reflection"] == "LESSON: doors need keys" and p0["state_text"] == "o0"
    assert p0["key_text"] == "o0"          # the env's compact view of the state (here the obs)
    v0 = mem.stores["value"][0]
    assert v0["reflection"] == "VALUE-LESSON: be stricter" and v0["mode"] == "expectation"
    # with the ground truth the outcome flips
    mem2 = DictMemory()
    rep2 = asyncio.run(improve(rec, mem2, Reflector(FakeLM(reflector_responder)),
                               ReflectionOptions(use_gt_success=True), value_method="debate"))
    assert rep2.success_used is False
    # failure: value scores .85, .7, |.9 - 0| = .9 -> the last state, which has debate data
    assert mem2.stores["value"][0]["mode"] == "judge_critique"
    assert mem2.stores["value"][0]["state_text"] == "o3"
    assert mem2.stores["value"][0]["reflection"] == "CRITIQUE: the support was wrong"
    # a second run writes nothing new (dedup)
    asyncio.run(improve(rec, mem, Reflector(FakeLM(reflector_responder)), cfg))
    assert len(mem.stores["policy"]) == 2 and len(mem.stores["value"]) == 1


def test_judge_critique_shows_a_flipped_conclusion():
    lm = FakeLM(reflector_responder)
    stats = [StepStat(q=0.9, v_next=0.9, value_record={"debate": {"support": "S", "oppose": "O"}})]
    asyncio.run(Reflector(lm).reflect_value(record(stats), 0, success=False,
                                            mode="judge_critique"))
    (call,) = lm.calls
    assistant = call.messages[-2]["content"]
    assert "S" in assistant and "O" in assistant and "good progress" in assistant
    assert "failed" in call.messages[-1]["content"]
    # without debate data the step is skipped
    none = asyncio.run(Reflector(lm).reflect_value(record([StepStat(q=0.9, v_next=0.9)]), 0,
                                                   success=False, mode="judge_critique"))
    assert none is None
