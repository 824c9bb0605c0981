"""Peek count (docs/methods/rmcts.md#decisions D2): states a search saw only inside its simulator are counted, so
exploration metrics of searched agents are not read as real exploration."""

import asyncio

from clew.agents.base import BaseAgent, Decision
from clew.envs.suites import get_suite
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent
from toyenv import line_task, register

register()


class LookAheadThenStay(BaseAgent):
    """Simulates two steps right from the real state, then walks left (staying at 0)."""

    async def act(self, episode):
        sim = episode.simulator()
        sim.step("right")
        sim.step("right")
        return Decision("left")


def test_states_seen_only_in_simulation_are_counted():
    rec = asyncio.run(run_episode(LookAheadThenStay(), line_task(0, length=5, budget=3)))
    # real positions: 0 only; simulated: 1, 2 (every search starts again at 0)
    assert rec["outcome"]["peeked_states"] == 2


def test_agents_without_a_simulator_peek_nothing():
    rec = asyncio.run(run_episode(build_agent("toy-scripted"), line_task(0)))
    assert rec["outcome"]["peeked_states"] == 0


def test_search_on_the_grid_map_peeks_and_a_random_walk_does_not():
    task = get_suite("gridmap-mini").split("test")[0]
    agent = build_agent("mcts", search={"n_simulations": 8, "branching_factor": 4},
                        value={"noise": 0.2})
    rec = asyncio.run(run_episode(agent, task, max_steps=3))
    random = asyncio.run(run_episode(build_agent("random"), task, max_steps=3))
    assert rec["outcome"]["peeked_states"] > 0
    assert random["outcome"]["peeked_states"] == 0
