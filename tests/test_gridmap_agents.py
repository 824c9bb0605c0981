"""Heuristic grid-map agents: the frontier agent succeeds, the oracle agent scores zero error
(docs/methods/metric-explore-exploit-error.md#target-set-and-cases item 6), the random agent only uses admissible moves."""

import asyncio
import math
from dataclasses import replace

from clew.agents.base import Episode
from clew.agents.heuristics.gridmap_frontier import FrontierAgent, oracle_actions
from clew.agents.heuristics.random_walk import RandomAgent
from clew.envs.base import Task
from clew.envs.gridmap.env import GridMapEnv
from clew.envs.gridmap.instance import Instance
from clew.envs.gridmap.metrics import score_trajectory
from clew.envs.suites import resolve
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent
from gridmap_cases import small_instances
from hypothesis import HealthCheck, given, settings


def play(agent, task, env=None):
    """Drive an env directly (no step limit other than the env's budget)."""
    env = env or GridMapEnv()
    ep = Episode(task, env, env.reset(task))
    while not env.done:
        d = asyncio.run(agent.act(ep))
        ep.record(d, env.step(d.action))
    return ep


def test_frontier_agent_solves_the_mini_suite_through_the_runner():
    for task in resolve("gridmap-mini:all"):
        rec = asyncio.run(run_episode(build_agent("frontier"), task))
        assert rec["outcome"]["success"], task.id
        m = rec["metrics"]
        assert m["success"] and m["steps"] == len(rec["actions"])
        assert m["invalid_count"] == 0


def test_oracle_agent_scores_zero_error():
    agent = build_agent("gridmap-oracle")
    assert agent.uses_oracle and not FrontierAgent.uses_oracle
    tasks = resolve("gridmap-mini:all") + resolve("gridmap-v1:test")[::3]
    for task in tasks:
        inst = Instance.from_params(task.params)
        ep = play(agent, Task("gridmap", inst.to_params(), id=task.id))
        s = score_trajectory(inst, ep.actions())
        assert s.explore_errors == 0 and s.exploit_errors == 0, task.id
        assert s.exploration_error == 0 or math.isnan(s.exploration_error)


def test_random_agent_uses_only_admissible_moves():
    for task in resolve("gridmap-mini:test"):
        ep = play(RandomAgent(seed=1), task)
        assert all(s.valid for s in ep.steps)
        assert ep.steps and len(ep.steps) <= Instance.from_params(task.params).budget


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(small_instances())
def test_oracle_is_error_free_on_random_maps(inst):
    actions = oracle_actions(inst)
    s = score_trajectory(inst, actions, truncate_at_budget=False)
    assert s.success and s.explore_errors == 0 and s.exploit_errors == 0


@SETTINGS
@given(small_instances())
def test_frontier_agent_is_error_free_in_case_1(inst):
    # docs/methods/metric-explore-exploit-error.md#target-set-and-cases item 6: nearest-frontier BFS over the known map never errs while nothing is pending
    big = replace(inst, budget=50 * inst.budget)
    ep = play(FrontierAgent(), Task("gridmap", big.to_params()))
    s = score_trajectory(big, ep.actions())
    assert s.success
    assert all(lab.err == 0 for lab in s.labels if lab.case == 1)
    assert s.invalid_count == 0
