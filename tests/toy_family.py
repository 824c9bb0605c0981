"""A toy env family that lives outside clew, as a user's own family would, with everything the
built-in families have (docs/methods/envs.md#adding-an-env-family): the env with its hooks
(ground-truth progress and steps to the goal, the reflection memory's cut, the memory view,
in-context examples), its task generator, its trace for the metrics that travel, its own metric,
its difficulty levels and a versioned suite. :data:`FAMILY` names them; registering it is one
line (``test_env_family.py``); nothing in clew knows about it.

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
from clew.envs.family import EnvEntry, Family, FamilyMetric, Suite
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
    memory_min_score = 0.5             # this family's reflection-memory cut

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

    def progress(self) -> float:
        """Ground truth for heuristic roles: 1 at the exit, less the farther from it."""
        return 1.0 - abs(self.state.pos - self.exit) / self.length

    def steps_to_goal(self) -> float:
        return float(abs(self.state.pos - self.exit))

    def memory_view(self, observation: str) -> str:
        return f"corridor of {self.length}: {observation}"

    def prompt_examples(self) -> list[tuple[str, str]]:
        return [("cell 0 of 3; no exit in sight", "right")]


def generate_task(params: dict[str, Any], seed: int) -> Task:
    rng = random.Random(seed)
    length = int(params.get("length", 8))
    start, exit_ = rng.sample(range(length), 2)
    return Task("toy-corridor", {"length": length, "start": start, "exit": exit_,
                                 "limit": int(params.get("limit", 2 * length))},
                seed=seed, id=f"corridor-{length}-{seed}")


def corridor_v1() -> Suite:
    """The family's suite: train and test corridors of two lengths (the difficulty levels)."""
    def split(seeds: range, name: str) -> list[Task]:
        return [Task(**{**generate_task({"length": n}, seed).to_dict(), "split": name})
                for n in (6, 9) for seed in seeds]

    return Suite("toy-corridor-v1", 1, {"train": split(range(2), "train"),
                                        "test": split(range(100, 103), "test")})


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


FAMILY = Family(
    "toy-corridor",
    envs={"toy-corridor": EnvEntry("toy_family:CorridorEnv", "toy_family:generate_task",
                                   trace="toy_family:trace", levels=("length",))},
    metrics=(FamilyMetric("exit_distance", "toy_family:distance_metric",
                          "cells between the agent and the exit at the end",
                          keys=("exit_distance",)),),
    suites={"toy-corridor-v1": "toy_family:corridor_v1"},
)
