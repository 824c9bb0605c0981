"""The episode rules exist once (envs/wrappers.py): the runner and a search tree agree, on every
env family, on the step at which a path is cut, and on which rule cuts it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from clew.agents.policy import Proposal
from clew.agents.value import ValueRecord
from clew.envs.base import Observation, Step
from clew.envs.registry import make_for
from clew.envs.suites import resolve
from clew.envs.wrappers import EpisodeRules
from clew.runner.episodes import run_episode
from clew.search.agent import SearchAgent
from clew.search.registry import make_algorithm
from clew.search.tree import tree_from_dict
from toyenv import ScriptedAgent

BAD = "xyzzy plugh"          # not an action of any family: an invalid step everywhere


def first_task_per_family():
    tasks = {}
    for task in resolve("exploration-v1:test"):
        tasks.setdefault(task.env, task)
    return tasks


TASKS = first_task_per_family()

# (runner options, the step at which the episode is cut, the rule that cuts it)
SCENARIOS = {
    "step limit": ({"max_steps": 4, "max_invalid_streak": 0}, 4, "max_steps"),
    "invalid streak": ({"max_steps": 50, "max_invalid_streak": 3}, 3, "invalid_streak"),
    "repeat rule": ({"max_steps": 50, "max_invalid_streak": 0, "repeat_limit": 3}, 3,
                    "repeated_action"),
}


class ChainPolicy:
    """Proposes one action at every node, so the tree is a chain and the agent executes it."""

    kind = "heuristic"
    uses_oracle = False

    async def propose(self, ctx, reflections=(), usage=None):
        return [Proposal(BAD, ctx.env.canonical(BAD), BAD, 1, 1.0)]


class FlatValue:
    kind = "heuristic"
    method = "heuristic"
    uses_oracle = False
    scale = "unit"

    def config_hash(self):
        return "flat"

    async def evaluate(self, ctx, reflections=(), usage=None):
        return ValueRecord(v=0.5)


def test_every_family_is_covered():
    assert set(TASKS) == {"gridmap", "rooms", "textminigrid", "hillsearch", "treesearch",
                          "maxsatsearch"}


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("family", sorted(TASKS))
def test_runner_and_tree_cut_a_path_at_the_same_step(family, scenario):
    options, cut, rule = SCENARIOS[scenario]
    task = TASKS[family]
    rec = asyncio.run(run_episode(ScriptedAgent([BAD] * 60), task, **options))
    assert (rec["outcome"]["steps"], rec["outcome"]["stopped_by"]) == (cut, rule)

    algorithm = make_algorithm({"algorithm": "mcts", "branching_factor": 1,
                                "n_simulations": cut + 2, "max_depth_actions": cut + 2})
    trees = []
    agent = SearchAgent(ChainPolicy(), FlatValue(), algorithm)
    rec = asyncio.run(run_episode(agent, task, on_tree=lambda t, d: trees.append((t, d)),
                                  **options))
    assert (rec["outcome"]["steps"], rec["outcome"]["stopped_by"]) == (cut, rule)
    assert [t for t, _ in trees] == list(range(cut))
    for t, data in trees:
        tree = tree_from_dict(data)
        cut_nodes = [n for n in tree.nodes if n.terminal]
        assert len(cut_nodes) == 1, (t, [n.terminal_reason for n in tree.nodes])
        (node,) = cut_nodes
        # the tree's horizon is the runner's cut minus the steps already taken
        assert node.depth == cut - t
        assert node.terminal_reason == ("horizon" if rule == "max_steps" else "early_stop")
        assert node.info["truncated_by"] == rule
        # horizon_value follows the env's outcome mode: 0 where only reaching the goal counts,
        # the value function's verdict for envs graded at the end
        graded = make_for(task).flags.outcome_mode == "graded_at_end"
        assert node.value == (0.5 if graded else 0.0)
        assert tree.meta["search_config"]["horizon_value"] == ("evaluate" if graded else "zero")


@dataclass
class Counter:
    n: int = 0


class CountingEnv:
    """A stand-in env for the wrapper's own bookkeeping."""

    max_invalid_streak = 3

    class flags:
        repeat_rule_applies = True

    def __init__(self):
        self.state = Counter()

    def reset(self, task):
        self.state = Counter()
        return Observation("0")

    def step(self, action):
        self.state.n += 1
        return Step(Observation(str(self.state.n)), valid=action != "bad")

    def canonical(self, action):
        return action.strip().lower()

    def snapshot(self):
        return self.state.n

    def restore(self, snap, keep_clock=False):
        self.state.n = snap

    def copy(self):
        other = CountingEnv()
        other.state.n = self.state.n
        return other


def test_wrapper_counts_overrides_snapshots_and_copies():
    env = EpisodeRules(CountingEnv(), max_steps=10)
    env.reset(None)
    assert (env.max_invalid_streak, env.repeat_limit) == (3, 5)      # as the env declares
    assert not env.step("bad").truncated and not env.step("bad").truncated
    snap = env.snapshot()
    sim = env.copy()                                                  # same history
    step = sim.step("bad")
    assert step.truncated and step.truncated_by == "invalid_streak"
    assert env.truncated_by is None                                   # the copy is apart
    env.step("ok")
    env.restore(snap)
    assert env.step("bad").truncated_by == "invalid_streak"
    env.restore(snap, keep_clock=True)                                # a backtrack: counters stay
    assert env.rules.steps == 3
    for _ in range(5):
        step = env.step("Up ")
    assert step.truncated_by == "repeated_action"                     # by canonical key
    off = EpisodeRules(CountingEnv(), max_invalid_streak=0, repeat_limit=0)
    off.reset(None)
    assert all(not off.step("bad").truncated for _ in range(20))
