"""docs/methods/interventions.md: parallel threads and summary hand-offs as wrappers; pooling and Theorem 5.1."""

from __future__ import annotations

import asyncio
import itertools
import json
import math

import pytest
from clew.agents.base import BaseAgent, Decision, Episode
from clew.agents.heuristics.query_baselines import ExploreExploit, HillBaseline, TreeBaseline
from clew.agents.interventions import (
    ContextResettable,
    ParallelThreads,
    SummaryHandoff,
    handoff_points,
    pooled_best_of_p,
    pooled_bootstrap_se,
    split_threshold,
    splitting_helps,
    thread_budgets,
)
from clew.agents.lm.base import ChatRequest, request_usage
from clew.agents.lm.fake import FakeLM
from clew.envs.oracle_search import hill, maxsat, treesearch
from clew.runner.episodes import run_episode
from hypothesis import given, settings
from hypothesis import strategies as st


def play(agent, task, key="k#0"):
    return asyncio.run(run_episode(agent, task, key=key, max_invalid_streak=None))


class ToyChatAgent(BaseAgent):
    """A minimal docs/methods/envs.md#query-protocol chat agent: keeps [system, user, assistant, user, ...] in the episode's
    scratch, drops silent retries (docs/methods/envs.md#query-protocol) and offers ``reset_context`` (the summary protocol)."""

    name = "toy-chat"
    kind = "lm"

    def __init__(self, lm):
        self.lm = lm

    def _chat(self, episode: Episode) -> list[dict[str, str]]:
        s = episode.scratch
        if "chat" not in s:
            s["chat"] = [{"role": "system", "content": episode.env.instructions()},
                         {"role": "user", "content": episode.observations[0].text}]
            s["seen"] = 0
        for rec in episode.steps[s["seen"]:]:
            if rec.info.get("retry") != "silent":
                s["chat"] += [{"role": "assistant", "content": rec.raw or rec.action},
                              {"role": "user", "content": rec.obs}]
        s["seen"] = len(episode.steps)
        return s["chat"]

    def reset_context(self, episode: Episode, handoff: str) -> None:
        episode.scratch["chat"] = [{"role": "system", "content": episode.env.instructions()},
                                   {"role": "user", "content": handoff}]
        episode.scratch["seen"] = len(episode.steps)

    async def act(self, episode: Episode) -> Decision:
        chat = self._chat(episode)
        completions = await self.lm.complete(ChatRequest(list(chat), role="policy"))
        episode.usage.record("policy", request_usage(completions))
        return Decision(completions[0].text, raw=completions[0].text)


def hill_responder(request: ChatRequest, i: int) -> str:
    """Query x = (number of messages so far) / 4, which exposes the context length."""
    return json.dumps({"reason": "probe", "query": {"x": len(request.messages) / 4}})


# --- parallel threads -------------------------------------------------------------------------


def test_thread_budgets():
    for n, p in itertools.product((36, 48, 60), (2, 3, 4)):
        assert thread_budgets(n, p) == [n // p] * p  # integers for every (N, p) the paper uses
    assert thread_budgets(10, 3) == [4, 3, 3]
    with pytest.raises(ValueError):
        thread_budgets(2, 3)


@pytest.mark.parametrize("p", [1, 2, 3, 4])
def test_parallel_hill_accounting(p):
    task = hill.generate_task({"instance": "H-B2", "budget": 48}, 0)
    wrapper = ParallelThreads(HillBaseline(), threads=p)
    rec = play(wrapper, task)
    steps = rec["steps"]
    assert sum(s["valid"] for s in steps) == 48  # Hill repeats are charged: the whole budget
    threads = [s["info"]["thread"] for s in steps]
    assert threads == sorted(threads)  # threads run one after the other
    assert [threads.count(i) for i in range(p)] == [48 // p] * p
    # each thread is the baseline at budget N/p: its first floor(0.8·N/p) queries are strata
    first = [float(s["action"][2:]) for s in steps if s["info"]["thread"] == p - 1]
    k = math.floor(0.8 * 48 / p + 1e-9)
    assert all(t * 10 / k <= x <= (t + 1) * 10 / k for t, x in enumerate(first[:k]))


def test_parallel_best_is_the_best_thread_and_tree_repeats_are_free():
    task = treesearch.generate_task({"instance": "T-main", "budget": 48}, 0)
    agent = ParallelThreads(TreeBaseline(), threads=3)
    from clew.envs.registry import make_for

    env = make_for(task)
    episode = Episode(task, env, env.reset(task), key="t#0")
    while not env.done:
        decision = asyncio.run(agent.act(episode))
        episode.record(decision, env.step(decision.action))
    threads = episode.scratch["parallel_threads"]["threads"]
    assert len(threads) == 3
    assert all(th.env.budget() == 16 and th.env.clock() <= 16 for th in threads)
    assert "Queries left: 16." in threads[0].episode.observations[0].text
    union = set()
    for th in threads:
        union |= {q for q, _ in th.env.state.history}
    real = {q for q, _ in env.state.history}
    assert real == union  # the real queries are exactly the union of the threads' queries
    assert env.clock() == len(union) <= 48
    assert env.grade() == pytest.approx(max(th.env.grade() for th in threads))
    # threads start from the same root, so shared gateways were answered from memory
    total = sum(th.env.clock() for th in threads)
    assert total == 48 and len(union) < total
    assert env.ended == "stop" and episode.steps[-1].action == "STOP"


def test_parallel_invalid_thread_attempts_stay_inside_the_thread():
    script = ['{"query": {"x": 20}}', '{"query": {"x": 1.3}}', '{"query": {"x": 2.0}}',
              "nonsense", '{"query": {"x": 7.0}}', '{"query": {"x": 8.0}}']
    lm = FakeLM(script)
    task = hill.generate_task({"instance": "H-B2", "budget": 4}, 0)
    rec = play(ParallelThreads(ToyChatAgent(lm), threads=2), task)
    assert [s["action"] for s in rec["steps"]] == ["x=1.3", "x=2.0", "x=7.0", "x=8.0"]
    assert all(s["valid"] for s in rec["steps"])
    # the second thread's context is fresh and states its own budget of 2
    second_thread_first = lm.calls[3].messages
    assert len(second_thread_first) == 2
    assert second_thread_first[1]["content"].startswith("Budget: 2 queries.")
    assert rec["usage"]["policy"]["calls"] == 6


def test_parallel_works_through_a_chat_agent_on_maxsat():
    n = 15
    lm = FakeLM(lambda req, i: json.dumps({"query": {f"x{j}": (i >> (j % 4)) & 1
                                                      for j in range(n)}}))
    task = maxsat.generate_task({"instance": "M-main", "budget": 12}, 0)
    rec = play(ParallelThreads(ToyChatAgent(lm), threads=3), task)
    assert sum(s["valid"] for s in rec["steps"]) == 12
    assert max(len(c.messages) for c in lm.calls) == 2 + 2 * 3  # contexts of 4 queries at most


# --- summary ----------------------------------------------------------------------------------


def test_handoff_points():
    assert handoff_points(48, 2) == [24]
    assert handoff_points(48, 3) == [16, 32]
    assert handoff_points(48, 4) == [12, 24, 36]
    assert handoff_points(48, 6) == [8, 16, 24, 32, 40]
    assert handoff_points(36, 4) == [9, 18, 27]
    assert handoff_points(36, 1) == []


def test_summary_resets_context_at_the_right_times():
    """Appendix A.7: hand-offs exactly at t = N/s, 2N/s, ...; two messages after each; the
    budget counter continues."""
    lm = FakeLM(hill_responder)
    agent = SummaryHandoff(ToyChatAgent(lm), segments=4)
    assert isinstance(agent.agent, ContextResettable)
    task = hill.generate_task({"instance": "H-B2", "budget": 12}, 0)
    rec = play(agent, task)
    assert rec["outcome"]["steps"] == 12 and len(lm.calls) == 12
    sizes = [len(c.messages) for c in lm.calls]
    # t = 0, 1, 2 grow the chat; a hand-off after 3, 6 and 9 valid queries resets it to 2
    assert sizes == [2, 4, 6, 2, 4, 6, 2, 4, 6, 2, 4, 6]
    handoffs = [s["info"]["handoff_at"] for s in rec["steps"] if "handoff_at" in s["info"]]
    assert handoffs == [3, 6, 9]
    after = lm.calls[3].messages[1]["content"]
    assert after.startswith("### MISSION HAND-OFF") and "used 3 queries" in after
    assert "You have 9 queries remaining" in after
    # the hand-off covers the whole log: 9 queries at x = 0.5, 1.0, 1.5 (each thrice)
    assert lm.calls[9].messages[1]["content"].count("-> f(x)=") == 3


def test_summary_handoff_with_silent_retries_keeps_schedule():
    # invalid answers do not move the clock: the hand-off waits for the 2nd valid query
    script = ['{"query": {"x": 1}}', "bad", '{"query": {"x": 2}}', '{"query": {"x": 3}}',
              '{"query": {"x": 4}}']
    lm = FakeLM(script)
    task = hill.generate_task({"instance": "H-B2", "budget": 4}, 0)
    rec = play(SummaryHandoff(ToyChatAgent(lm), segments=2), task)
    assert [s["valid"] for s in rec["steps"]] == [True, False, True, True, True]
    assert [len(c.messages) for c in lm.calls] == [2, 4, 4, 2, 4]
    assert rec["steps"][3]["info"]["handoff_at"] == 2


def test_summary_model_handoff_uses_the_lm():
    policy = FakeLM(hill_responder)
    writer = FakeLM(["The needle may be near 1.3; try around it."])
    task = treesearch.generate_task({"instance": "T-main", "budget": 4}, 0)

    class Walker(ToyChatAgent):
        async def act(self, episode):
            self._chat(episode)
            await self.lm.complete(ChatRequest(list(episode.scratch["chat"]), role="policy"))
            return Decision(f"node={episode.env.frontier()[0]}")

    rec = play(SummaryHandoff(Walker(policy), segments=2, handoff="model", lm=writer), task)
    assert len(writer.calls) == 1
    prompt = writer.calls[0].messages[1]["content"]
    assert "NEW agent" in prompt and "### MISSION HAND-OFF ###" in prompt
    after = policy.calls[2].messages
    assert len(after) == 2 and "The needle may be near 1.3" in after[1]["content"]
    assert "You have 2 queries remaining" in after[1]["content"]
    assert rec["usage"]["other"]["calls"] == 1


def test_summary_fallbacks_for_agents_without_reset_context():
    task = hill.generate_task({"instance": "H-B2", "budget": 6}, 0)
    # heuristics: the hand-off changes nothing (their context is the history itself)
    plain = play(ExploreExploit(), task)
    wrapped = play(SummaryHandoff(ExploreExploit(), segments=3), task)
    assert [s["action"] for s in plain["steps"]] == [s["action"] for s in wrapped["steps"]]

    class Forgetful(BaseAgent):
        kind = "lm"

        def __init__(self):
            self.seen = []

        async def act(self, episode):
            self.seen.append((episode.scratch.get("handoff", "")[:20],
                              "memory" in episode.scratch))
            episode.scratch["memory"] = True
            return Decision("x=5.0")

    forgetful = Forgetful()
    rec = play(SummaryHandoff(forgetful, segments=2), task)
    assert rec["outcome"]["steps"] == 6
    # scratch is cleared at t = 3 and the hand-off text is left for the agent
    assert [s["info"].get("handoff_at") for s in rec["steps"]] == [None] * 3 + [3, None, None]
    assert [m for _, m in forgetful.seen] == [False, True, True, False, True, True]
    assert forgetful.seen[3][0] == "### MISSION HAND-OFF"


def test_summary_model_handoff_needs_a_model():
    task = hill.generate_task({"instance": "H-B2", "budget": 2}, 0)
    with pytest.raises(ValueError, match="LanguageModel"):
        play(SummaryHandoff(ExploreExploit(), segments=2, handoff="model"), task)


# --- pooling estimator and Theorem 5.1 --------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(xs=st.lists(st.floats(0, 1), min_size=1, max_size=8), data=st.data())
def test_pooled_estimator_matches_enumeration(xs, data):
    """Appendix A.5: E_pool equals the mean of max over all C(r, p) subsets."""
    p = data.draw(st.integers(1, len(xs)))
    direct = [max(c) for c in itertools.combinations(xs, p)]
    assert pooled_best_of_p(xs, p) == pytest.approx(sum(direct) / len(direct), abs=1e-12)


def test_pooled_estimator_edge_cases():
    assert pooled_best_of_p([0.2, 0.4], 1) == pytest.approx(0.3)
    assert pooled_best_of_p([0.1, 0.9, 0.5], 3) == pytest.approx(0.9)
    with pytest.raises(ValueError):
        pooled_best_of_p([0.5], 2)
    assert pooled_bootstrap_se([0.5] * 10, 2) == 0.0
    assert pooled_bootstrap_se([0.0, 1.0] * 10, 2, resamples=200) > 0


@pytest.mark.parametrize("alpha,v2", [(0.9, 0.214), (0.7, 0.494), (0.5, 0.686)])
def test_split_threshold_examples(alpha, v2):
    """docs/methods/interventions.md#splitting-threshold worked numbers (c = 1)."""
    assert split_threshold(2, alpha) == pytest.approx(v2, abs=1e-3)


def test_split_threshold_cap():
    assert split_threshold(2, 0.5, 0.5) == 1.0  # formula gives 2.745: helps on all of (0, 1]


@settings(max_examples=60, deadline=None)
@given(p=st.integers(2, 6), alpha=st.floats(0.05, 0.95), c=st.floats(0.05, 1.0))
def test_split_threshold_separates_help_from_harm(p, alpha, c):
    v = split_threshold(p, alpha, c)
    assert 0 < v <= 1
    below = v * 0.98
    if c * below ** alpha < 1:
        assert splitting_helps(below, p, alpha, c)
    if v < 1 and c * (v * 1.02) ** alpha <= 1:
        assert not splitting_helps(min(1.0, v * 1.02), p, alpha, c)


def test_closed_form_and_bisection_agree():
    # p = 2 has the closed form y* = 2 − 2^α; p = 3 goes through bisection: h(y*) = 0 there
    for alpha in (0.3, 0.6, 0.9):
        v3 = split_threshold(3, alpha)
        assert v3 < 1
        y = (v3 / 3) ** alpha
        assert 1 - (1 - y) ** 3 - 3 ** alpha * y == pytest.approx(0, abs=1e-9)
        v2 = split_threshold(2, alpha)
        assert v2 == pytest.approx(2 * (2 - 2 ** alpha) ** (1 / alpha))
