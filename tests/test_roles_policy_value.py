"""Policy and single-agent value roles with the fake LM (docs/methods/mcts.md#expansion, Appendix C.1)."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest
from clew.agents.lm.base import LMError
from clew.agents.lm.fake import FakeLM
from clew.agents.options import ValueOptions
from clew.agents.parsing import answer_text, parse_status
from clew.agents.policy import LMPolicy, Proposal, merge_samples
from clew.agents.prompts import Context, policy_messages
from clew.agents.usage import UsageByRole
from clew.agents.value import (
    SingleValue,
    ValueCache,
    ValueCallError,
    ValueRecord,
    aggregate,
)
from hypothesis import given, settings
from hypothesis import strategies as st


class Grammar:
    """Parsing side of an env: actions are single lowercase words from a fixed set."""

    name = "grammar"

    def __init__(self, actions=("a", "b", "c", "d", "e", "stop")):
        self.actions = set(actions)

    def parse_action(self, text):
        t = text.strip().lower()
        return t if t in self.actions else None

    def canonical(self, action):
        return action.strip().lower()

    def is_stop(self, action):
        return action == "stop"


def ctx(**kw) -> Context:
    base = {"task": "Reach the goal.", "observations": ["o0"], "action_help": "a, b, c, d, e, stop",
                "env": Grammar(), "task_id": "t1"}
    base.update(kw)
    return Context(**base)


def completion(action: str, why: str = "thinking") -> str:
    return f"{why}\nNext action:\n```\n{action}\n```"


def run(coro):
    return asyncio.run(coro)


# --- policy ----------------------------------------------------------------------------------
def test_priors_from_sample_frequencies_top_b():
    """docs/methods/mcts.md#worked-example test 1: {A×9, B×5, C×3, D×2, E×1}, b = 3 -> A, B, C with 9/17, 5/17, 3/17."""
    keys = ["a"] * 9 + ["b"] * 5 + ["c"] * 3 + ["d"] * 2 + ["e"]
    order = [1, 0, 2, 0, 3, 1, 0, 4, 0, 1, 2, 0, 0, 1, 3, 0, 2, 0, 1, 0]   # interleaved
    pool = {k: [i for i, x in enumerate(keys) if x == k] for k in "abcde"}
    texts, used = [], {k: 0 for k in "abcde"}
    for letter in order:
        k = "abcde"[letter]
        texts.append(completion(k, f"sample {len(texts)}"))
        used[k] += 1
    assert used == {k: len(v) for k, v in pool.items()}
    lm = FakeLM(texts)
    usage = UsageByRole()
    props = run(LMPolicy(lm, branching_factor=3).propose(ctx(), usage=usage))
    assert [p.key for p in props] == ["a", "b", "c"]
    assert [p.prior for p in props] == pytest.approx([9 / 17, 5 / 17, 3 / 17])
    assert props[0].raw == texts[order.index(0)]           # first sample producing the key
    # one request with n = max(2b, 20) samples
    assert len(lm.calls) == 1 and lm.calls[0].sampling.n == 20 and lm.calls[0].role == "policy"
    assert lm.calls[0].sampling.temperature == 1.0 and lm.calls[0].sampling.top_p == 0.95
    assert usage["policy"].calls == 1


def test_merge_ties_keep_first_appearance_and_drop_unparsed():
    samples = [Proposal("b", "b", "1"), Proposal(None, "", "junk"), Proposal("a", "a", "2"),
               Proposal("a", "a", "3"), Proposal("b", "b", "4"), Proposal("c", "c", "5")]
    out = merge_samples(samples, 2)
    assert [(p.key, p.count, p.raw) for p in out] == [("b", 2, "1"), ("a", 2, "2")]
    assert sum(p.prior for p in out) == pytest.approx(1.0)


def test_n_samples_is_at_least_twice_b():
    lm = FakeLM(lambda req, i: completion("a"))
    run(LMPolicy(lm, branching_factor=15).propose(ctx()))
    assert lm.calls[0].sampling.n == 30


def test_unparseable_completions_give_no_proposal():
    lm = FakeLM(lambda req, i: "I will move somewhere")
    assert run(LMPolicy(lm, branching_factor=5).propose(ctx())) == []


def test_action_extraction_rules():
    # the fenced block after the LAST answer phrase, even if reasoning quotes an action
    text = "Maybe ```b``` is good.\nNext action: no wait.\nNext action:\n```\nc\n```"
    assert answer_text(text) == "c"
    assert answer_text("I think ```a``` then ```d```") == "d"   # no phrase: last fence
    assert answer_text("Next action: e") == "e"                  # phrase, no fence
    assert answer_text("  just c ") == "just c"      # neither: the env's parser decides
    assert answer_text("   ") is None


def test_policy_prompt_reflections_and_examples():
    c = ctx(examples=[("example user", "example assistant")])
    plain = policy_messages(c)
    assert "REFLECTIONS" not in plain[-1]["content"]
    assert any(m["content"] == "example user" for m in plain)
    refl = [{"id": "r1", "task_text": "other task", "action_raw": "did x", "reflection": "lesson"}]
    msgs = policy_messages(c, refl)
    assert "REFLECTIONS" in msgs[0]["content"]                      # system variant with the rule
    assert msgs[-1]["content"].startswith("REFLECTIONS")           # block first in last user turn
    assert "OBJECTIVE (1): other task" in msgs[-1]["content"]
    long = ctx(observations=["o0", "o1", "o2"], actions=["a", "b"], raws=["r0", "r1"],
               examples=[("example user", "example assistant")])
    msgs = policy_messages(long)
    assert not any(m["content"] == "example user" for m in msgs)   # >= 2 actions: no examples
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[2]["content"] == "r0"                               # raw completions as history
    assert msgs[0]["content"] == policy_messages(ctx())[0]["content"]   # shared prefix first


# --- value ----------------------------------------------------------------------------------
def test_status_parsing_and_scales():
    """Appendix C.1."""
    assert parse_status("Thoughts: ok\nSTATUS CODE: B") == "B"
    assert parse_status("status code: B") == "B"              # any case (issue 11)
    assert parse_status("STATUS CODE: b") == "B"
    assert parse_status("STATUS CODE: C ... STATUS CODE: A") == "A"   # the last answer wins
    assert parse_status("STATUS CODE: A only if done. STATUS CODE: D") == "D"
    assert aggregate(["B"], "unit", "skip")[0] == 0.9
    assert aggregate(["B"], "signed", "skip")[0] == 0.7
    assert aggregate(["A", None], "unit", "skip") == (1.0, 1, False)
    assert aggregate(["A", None], "unit", "zero") == (0.5, 1, False)
    assert aggregate([None, None], "unit", "skip") == (None, 2, True)   # unknown, never 0
    assert aggregate([None, None], "unit", "zero") == (0.0, 2, True)    # code parity, flagged


def test_aggregate_of_no_samples_is_flagged_all_failed():
    """Issue 16 item 8: ``aggregate([])`` returned 0 without the flag."""
    assert aggregate([], "unit", "skip") == (None, 0, True)
    assert aggregate([], "signed", "zero") == (0.0, 0, True)
    assert aggregate(["D", "E"], "signed", "skip")[0] == pytest.approx(-0.6)


def grader(letters):
    def respond(req, i):
        if req.role not in ("value", "rubric"):
            raise AssertionError(req.role)
        if req.role == "rubric":
            return "<rubric>\n- the goal is reached\n</rubric>"
        return f"Thoughts: sample {i}\nSTATUS CODE: {letters[i % len(letters)]}"
    return respond


def test_single_value_one_request_n_samples_averaged():
    lm = FakeLM(grader(["A", "C", "E", "garbage"]))
    usage = UsageByRole()
    vf = SingleValue(lm, ValueOptions(single={"n": 8, "rubric": False}))
    rec = run(vf.evaluate(ctx(observations=["o0", "o1"], actions=["a"]), usage=usage))
    assert len(lm.calls) == 1 and lm.calls[0].sampling.n == 8
    # i = 0..7 -> A C E junk A C E junk: junk skipped
    assert rec.v == pytest.approx((1.0 + 0.5 + 0.0) / 3)
    assert rec.n_parse_fail == 2 and not rec.all_failed
    assert usage["value"].calls == 1


def test_rubric_written_once_per_task_and_shown():
    lm = FakeLM(grader(["B"]))
    vf = SingleValue(lm, ValueOptions(single={"n": 3, "rubric": True}))
    c1 = ctx(observations=["o0", "o1"], actions=["a"])
    c2 = ctx(observations=["o0", "o2"], actions=["b"])
    run(vf.evaluate(c1))
    run(vf.evaluate(c2))
    rubric_calls = [r for r in lm.calls if r.sampling.n == 1]
    assert len(rubric_calls) == 1 and rubric_calls[0].sampling.temperature == 0.0
    grading = [r for r in lm.calls if r.sampling.n == 3]
    assert len(grading) == 2 and all("the goal is reached" in r.messages[-1]["content"]
                                     for r in grading)


def test_evaluations_in_flight_together_share_one_rubric_request():
    """A wave evaluates several leaves at once: they await one rubric request, not one each;
    a rubric request that fails is asked again by the next evaluation."""
    lm = FakeLM(grader(["B"]), latency=0.01)     # replies arrive after all have asked
    vf = SingleValue(lm, ValueOptions(single={"n": 3, "rubric": True}))
    leaves = [ctx(observations=["o0", f"o{i}"], actions=["a"]) for i in range(1, 5)]

    async def wave():
        return await asyncio.gather(*(vf.evaluate(c) for c in leaves))

    records = run(wave())
    assert [r.role for r in lm.calls].count("rubric") == 1
    assert all(r.rubric and "the goal is reached" in r.rubric for r in records)

    fails = {"left": 1}

    def flaky(req, i):
        if req.role == "rubric" and fails["left"]:
            fails["left"] -= 1
            raise LMError("server down")
        return grader(["B"])(req, i)

    vf = SingleValue(FakeLM(flaky), ValueOptions(single={"n": 3, "rubric": True}))
    with pytest.raises(LMError, match="server down"):
        run(vf.evaluate(leaves[0]))
    assert run(vf.evaluate(leaves[0])).rubric


def test_failing_value_call_raises_never_zero_and_is_not_retried_here():
    attempts = []

    def down(req, i):
        attempts.append(i)
        raise LMError("server down")
    vf = SingleValue(FakeLM(down), ValueOptions(single={"n": 4, "rubric": False}))
    with pytest.raises(ValueCallError, match="value .value. call failed: server down"):
        run(vf.evaluate(ctx()))
    assert len(attempts) == 1       # transport retries are the backend's job, not the role's


def test_value_cache_keys():
    a = ctx(observations=["o0", "o1"], actions=["a"])
    same = ctx(observations=["o0", "o1"], actions=["a"])
    other = ctx(observations=["o0", "o1"], actions=["b"])
    k = ValueCache.key(a, "cfg")
    assert k == ValueCache.key(same, "cfg")
    assert k != ValueCache.key(other, "cfg")
    assert k != ValueCache.key(a, "cfg2")
    assert k != ValueCache.key(a, "cfg", ["refl-1"])
    stop = ctx(observations=["o0", "o1"], actions=["a"], final_action="stop")
    assert k != ValueCache.key(stop, "cfg")


# --- value record serialisation ----------------------------------------------------------------
_json_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
_json = st.recursive(_json_leaf, lambda kids: st.lists(kids, max_size=3)
                     | st.dictionaries(st.text(max_size=3), kids, max_size=3), max_leaves=10)


@settings(max_examples=60, deadline=None)
@given(v=st.floats(allow_nan=False), letters=st.lists(st.sampled_from([None, "A", "C", "E"]),
                                                       max_size=4),
       debate=st.none() | st.dictionaries(st.text(max_size=3), _json, max_size=3),
       info=st.dictionaries(st.text(max_size=3), _json, max_size=3),
       ids=st.lists(st.text(max_size=3), max_size=3))
def test_value_record_to_dict_equals_asdict_and_is_a_copy(v, letters, debate, info, ids):
    rec = ValueRecord(v=v, kind="debate", samples=[(x, f"t{i}") for i, x in enumerate(letters)],
                      n_parse_fail=letters.count(None), all_failed=False, rubric="r",
                      debate=debate, retrieved_reflection_ids=ids,
                      retrieved_scores=[0.5] * len(ids), info=info)
    expected = dataclasses.asdict(rec)
    expected["samples"] = [list(s) for s in rec.samples]
    d = rec.to_dict()
    assert d == expected and list(d) == list(expected)  # same keys in the same order
    assert json.dumps(d) == json.dumps(expected)
    before = list(ids)
    rec.info["new"] = 1  # the dict is a snapshot, as asdict's was
    rec.retrieved_reflection_ids.append("x")
    assert "new" not in d["info"] and d["retrieved_reflection_ids"] == before
