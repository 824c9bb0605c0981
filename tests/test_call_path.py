"""One call path and one seed function (issue 11 items 5 and 7): the call path never retries;
a bug in a model call propagates with its traceback; a repeated attempt samples with a new seed;
distilled agents seed per task and step."""

from __future__ import annotations

import asyncio

import pytest
from clew.agents.base import Episode
from clew.agents.distilled import DistilledAgent
from clew.agents.lm.base import ChatRequest, Sampling
from clew.agents.lm.calls import call
from clew.agents.lm.fake import FakeLM
from clew.agents.options import PolicyOptions, ValueOptions
from clew.agents.policy import LMPolicy
from clew.agents.usage import UsageByRole
from clew.agents.value import SingleValue
from clew.records import RunDir
from clew.runner.episodes import run_episode, run_suite
from clew.search.agent import SearchAgent
from clew.search.registry import make_algorithm
from toyenv import line_task, register

register()


def test_the_call_path_does_not_retry_and_keeps_a_bug_as_it_is():
    calls = []

    def buggy(req, i):
        calls.append(i)
        raise KeyError("missing field in our own code")

    usage = UsageByRole()
    req = ChatRequest([{"role": "user", "content": "x"}], Sampling(), role="policy")
    with pytest.raises(KeyError, match="missing field"):
        asyncio.run(call(FakeLM(buggy), req, usage))
    assert calls == [0] and "policy" not in usage


def test_a_bug_fails_its_episode_with_the_traceback_and_does_not_abort_the_run(tmp_path):
    """Only LMError (the model gave up) aborts a run; a bug is recorded per episode with its
    traceback, never retried and never turned into a model failure."""
    def buggy(req, i):
        raise ZeroDivisionError("division in a responder")

    lm = FakeLM(buggy)
    run = RunDir(tmp_path / "run")
    run.open({}, resume=False)

    def agent():
        return SearchAgent(LMPolicy(lm, 2, PolicyOptions(n_samples_min=2)),
                           SingleValue(lm, ValueOptions(single={"n": 2})),
                           make_algorithm({"algorithm": "mcts", "n_simulations": 2}))

    counts = asyncio.run(run_suite(agent, [line_task(0), line_task(1)], run, concurrency=1,
                                   progress=False))
    assert counts["failed"] == 2 and counts["finished"] == 0
    errors = [line for line in (run.path / "errors.jsonl").read_text().splitlines()]
    assert len(errors) == 2 and all("ZeroDivisionError" in e and "buggy" in e for e in errors)
    assert len(lm.calls) == 2                                   # one call per episode, no retry


def test_a_repeated_expansion_samples_with_a_new_seed():
    """Nothing parsed on the first policy call: the second call of the same node gets a new
    seed (with the same seed a seeded backend would answer the same again)."""
    answers = iter(["no action here"] * 4 + ["Next action:\n```\nright\n```"] * 100)
    lm = FakeLM(lambda req, i: next(answers) if req.role == "policy" else
                "Thoughts: ok\nSTATUS CODE: C" if req.role == "value" else
                "<rubric>- fine</rubric>")
    agent = SearchAgent(LMPolicy(lm, 2, PolicyOptions(n_samples_min=4)),
                        SingleValue(lm, ValueOptions(single={"n": 1, "rubric": False})),
                        make_algorithm({"algorithm": "mcts", "n_simulations": 1,
                                        "max_expand_attempts": 2}))
    asyncio.run(run_episode(agent, line_task(0), max_steps=1))
    first, second = [c for c in lm.calls if c.role == "policy"][:2]
    assert first.messages == second.messages                    # the same node, asked again
    assert first.sampling.seed != second.sampling.seed


def test_distilled_seeds_differ_per_task_and_step():
    lm = FakeLM(lambda req, i: "Next action: ```right```")
    for i in range(3):
        asyncio.run(run_episode(DistilledAgent(lm, format="il"), line_task(i), max_steps=3))
    seeds = [c.sampling.seed for c in lm.calls]
    assert len(seeds) == 9 and len(set(seeds)) == 9
    # and they are reproducible: the same task and step give the same seed
    again = FakeLM(lambda req, i: "Next action: ```right```")
    asyncio.run(run_episode(DistilledAgent(again, format="il"), line_task(0), max_steps=3))
    assert [c.sampling.seed for c in again.calls] == seeds[:3]


def test_episode_order_is_none_outside_ordered_runs():
    env_task = line_task(0)
    from clew.envs.registry import make_for

    env = make_for(env_task)
    assert Episode(env_task, env, env.reset(env_task)).order is None
