"""A toy env family that lives outside clew, as a user's own family would: the env, its task
generator, its trace for the metrics that travel, and its own metric. Registering it is one call
(``test_env_family.py``); nothing in clew knows about it.

The corridor: cells 0..length-1, the agent starts at ``start``, a hidden exit lies at ``exit``.
The agent sees whether the exit is in its cell or next to it; reaching it ends the episode with
success; ``limit`` moves at most.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clew.envs.base import Env, Observation, Step, Task
from clew.envs.trace import Trace, ratio, record_actions


@dataclass
class CorridorState:
    pos: int
    steps: int = 0
    visited: set[int] = field(default_factory=set)
    seen_exit: bool = False
    done: bool = False


class CorridorEnv(Env):
    name = "toy-corridor"

    def reset(self, task: Task) -> Observation:
        self.task = task
        p = task.params
        self.length, self.exit, self.limit = int(p["length"]), int(p["exit"]), int(p["limit"])
        self.state = CorridorState(pos=int(p["start"]), visited={int(p["start"])})
        self._look()
        return self.observation()

    def _look(self) -> None:
        s = self.state
        s.seen_exit = s.seen_exit or abs(s.pos - self.exit) <= 1

    def observation(self) -> Observation:
        s = self.state
        near = "the exit is here" if s.pos == self.exit else (
            "the exit is next to you" if abs(s.pos - self.exit) == 1 else "no exit in sight")
        return Observation(f"cell {s.pos} of {self.length}; {near}", {"pos": s.pos})

    def legal_actions(self) -> list[str]:
        s = self.state
        if s.done:
            return []
        return [a for a, d in (("left", -1), ("right", 1)) if 0 <= s.pos + d < self.length]

    def step(self, action: str) -> Step:
        s = self.state
        a = self.parse_action(action)
        if s.done or a is None:
            return Step(self.observation(), 0.0, s.done, False)
        s.steps += 1
        s.pos += -1 if a == "left" else 1
        s.visited.add(s.pos)
        self._look()
        s.done = s.pos == self.exit or s.steps >= self.limit
        return Step(self.observation(), float(s.pos == self.exit), s.done, True)

    def instructions(self, variant: str = "default") -> str:
        return "Find the exit of the corridor: answer left or right."

    def grade(self) -> float:
        return 1.0 if self.state.pos == self.exit else 0.0

    def state_key(self) -> int:
        return self.state.pos


def generate_task(params: dict[str, Any], seed: int) -> Task:
    rng = random.Random(seed)
    length = int(params.get("length", 8))
    start, exit_ = rng.sample(range(length), 2)
    return Task("toy-corridor", {"length": length, "start": start, "exit": exit_,
                                 "limit": int(params.get("limit", 2 * length))},
                seed=seed, id=f"corridor-{length}-{seed}")


def trace(task: Task, episode: Mapping[str, Any]) -> Trace:
    """coverage = visited cells / length; redundancy = moves into a visited cell / moves; gap:
    R^max = 1 when the exit is within ``limit`` moves of the start, V_t = 1 once the exit has
    been seen and is within the moves left."""
    env = CorridorEnv()
    env.reset(task)
    s = env.state
    exploitable_at = math.nan

    def check(t: int) -> None:
        nonlocal exploitable_at
        reachable = s.seen_exit and abs(s.pos - env.exit) <= env.limit - s.steps
        if math.isnan(exploitable_at) and reachable:
            exploitable_at = float(t)

    check(0)
    moves = repeats = 0
    for t, action in enumerate(record_actions(task, episode), 1):
        if s.done:
            break
        before = set(s.visited)
        if env.step(action).valid:
            moves += 1
            repeats += s.pos in before
        check(t)
    agent = env.grade()
    rmax = max(agent, 1.0 if abs(task.params["start"] - env.exit) <= env.limit else 0.0)
    return Trace(coverage=len(s.visited) / env.length, redundancy=ratio(repeats, moves),
                 repeats=repeats, steps=moves, rmax=rmax, agent=agent,
                 exploit=0.0 if math.isnan(exploitable_at) else 1.0,
                 exploitable_at=exploitable_at)


def distance_metric(task: Task, episode: Mapping[str, Any]) -> dict[str, Any]:
    """The family's own measure: how far from the exit the agent ended (cells)."""
    env = CorridorEnv()
    env.reset(task)
    for action in record_actions(task, episode):
        if env.state.done:
            break
        env.step(action)
    return {"exit_distance": abs(env.state.pos - env.exit)}
