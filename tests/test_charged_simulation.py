"""Charged simulation (docs/methods/rmcts.md#decisions D2): on budgeted oracle-query tasks every new query a search
simulates is asked for real and charged; the search cannot read the hidden function for free."""

import asyncio

from clew.agents.base import BaseAgent, Decision
from clew.envs.base import Task
from clew.envs.registry import register as register_env
from clew.envs.suites import get_suite
from clew.metrics import score_episode
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent
from toyenv import register

register()
register_env("toy-query", "toyenv:QueryEnv")
TASK = Task("toy-query", {"values": [1, 5, 2, 9, 3, 7], "budget": 4}, id="q")


class PeekThenCommit(BaseAgent):
    """Simulates two queries per step (one repeated from last time), commits the last one."""

    def __init__(self):
        self.plan = [["q0", "q1"], ["q1", "q3"], ["q3", "q5"], ["q5", "q2"]]

    async def act(self, episode):
        tries = self.plan.pop(0)
        for q in tries:
            episode.simulator().step(q)
        return Decision(tries[-1])


def test_simulated_queries_are_charged_once_and_commits_are_not_asked_twice():
    rec = asyncio.run(run_episode(PeekThenCommit(), TASK, max_steps=20))
    # q0, q1 charged in step 1 (q1 committed: already paid); q3 new in step 2; q5; then the
    # budget of 4 valid queries is spent by the third search, so there is no fourth.
    assert rec["actions"] == ["q0", "q1", "q3", "q5"]
    assert all(s["valid"] and s["info"]["charged_simulation"] for s in rec["steps"])
    assert rec["outcome"]["charged_simulation"] == 4
    assert rec["outcome"]["stopped_by"] == "done"
    assert rec["interactions"] == {"executed": 4, "simulated": 6}  # 2 per search, 3 searches
    assert rec["outcome"]["grade"] == 1.0  # found 9 = the maximum, by paying for it


class Repeater(BaseAgent):
    """No simulator: asks q0 twice. The env's own rule applies (invalid, free)."""

    async def act(self, episode):
        return Decision("q0")


def test_agents_without_a_simulator_meet_the_envs_own_rules():
    rec = asyncio.run(run_episode(Repeater(), TASK, max_steps=3))
    assert [s["valid"] for s in rec["steps"]] == [True, False, False]
    assert rec["outcome"]["charged_simulation"] == 0


class StuckSearch(BaseAgent):
    async def act(self, episode):
        episode.simulator().step("q0")
        return Decision("q0")


def test_a_search_that_asks_nothing_new_ends_the_episode():
    rec = asyncio.run(run_episode(StuckSearch(), TASK, max_steps=20))
    assert rec["actions"] == ["q0"]
    assert rec["outcome"]["stopped_by"] == "no_new_queries"


def test_mcts_on_tree_search_pays_for_what_it_learns():
    task = next(t for t in get_suite("exploration-v1").split("test") if t.env == "treesearch")
    agent = build_agent("mcts", search={"n_simulations": 6, "branching_factor": 3},
                        value={"noise": 0.2})
    rec = asyncio.run(run_episode(agent, task, max_steps=100))
    budget = task.params.get("budget") or task.params.get("N")
    valid = [s for s in rec["steps"] if s["valid"]]
    assert rec["outcome"]["charged_simulation"] > 0
    assert budget is None or len(valid) <= budget
    # metrics replay the executed actions, charged queries included, and agree with the env
    assert abs(score_episode(task, rec)["normalized_reward"] - rec["outcome"]["grade"]) < 1e-9
