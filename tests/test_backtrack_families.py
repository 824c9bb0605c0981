"""BACKTRACK (docs/methods/exploratory-learning.md#distilled-agent) restores the world exactly on every environment family.

An agent takes a few random legal actions, records the snapshot of state S1, backtracks to S1
through the runner, and the test checks that the restored world is S1: with the clocks made
equal, it shows the same observation and answers the same further actions identically. Envs
that cannot take a query back (the oracle-query tasks) refuse the backtrack as an invalid step
that changes nothing.
"""

import asyncio
import random

import pytest
from clew.agents.base import BaseAgent, Decision
from clew.envs.registry import make_for
from clew.envs.suites import get_suite
from clew.runner.episodes import run_episode

TASKS = {t.env: t for t in get_suite("exploration-v1").split("test")}


class WalkThenBacktrack(BaseAgent):
    backtracks = True

    def __init__(self, forward: int = 4):
        self.forward = forward
        self.rng = random.Random(7)
        self.snap_s1 = None
        self.after = None
        self.before = None

    async def act(self, episode):
        env = episode.env.unwrapped        # the world's own snapshots, without the episode rules
        if episode.t == 1:
            self.snap_s1 = env.snapshot()
        if episode.t == self.forward:
            self.before = env.snapshot()
            return Decision("backtrack S1", info={"backtrack": 1})
        if episode.t == self.forward + 1:
            self.after = env.snapshot()
            return Decision("STOP", info={"end_episode": True})
        actions = env.legal_actions()
        if not actions:  # oracle-query tasks: use the random-query sampler
            from clew.agents.heuristics.query_baselines import random_query

            return Decision(random_query(env, self.rng))
        return Decision(self.rng.choice([a for a in actions if not env.is_stop(a)] or actions))


def replay(env, actions):
    return [env.step(a).obs.text for a in actions]


@pytest.mark.parametrize("env_name", sorted(TASKS))
def test_backtrack_restores_the_world_exactly(env_name):
    task = TASKS[env_name]
    agent = WalkThenBacktrack()
    rec = asyncio.run(run_episode(agent, task, max_steps=10, max_invalid_streak=0))
    step = rec["steps"][agent.forward]
    env = make_for(task)
    env.reset(task)
    if not env.flags.supports_backtrack:
        assert step["valid"] is False and "not available" in step["obs"]
        assert agent.after is not None
        original, after = make_for(task), make_for(task)
        original.reset(task), after.reset(task)
        original.restore(agent.before)
        after.restore(agent.after)
        after.set_clock(original.clock())
        assert after.observation().text == original.observation().text
        return
    assert step["valid"] is True, step["obs"]
    s1, back, before = make_for(task), make_for(task), make_for(task)
    s1.reset(task), back.reset(task), before.reset(task)
    s1.restore(agent.snap_s1)
    before.restore(agent.before)
    before.set_clock(s1.clock())
    assert before.observation().text != s1.observation().text, \
        "the walk must leave S1 before backtracking, or the test proves nothing"
    back.restore(agent.after)
    assert back.clock() > s1.clock(), "the clock is kept (and charged), not rewound"
    back.set_clock(s1.clock())
    assert back.observation().text == s1.observation().text
    probe = random.Random(3)
    actions = []
    for _ in range(3):
        legal = s1.legal_actions()
        if not legal:
            break
        actions.append(probe.choice(legal))
    assert replay(back, actions) == replay(s1, actions)
