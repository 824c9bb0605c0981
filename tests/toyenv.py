"""A tiny deterministic env for runner/CLI tests: walk a line from 0 to ``length``."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from clew.agents.base import BaseAgent, Decision
from clew.envs.base import Env, EnvFlags, Observation, Step, Task


@dataclass
class LineState:
    pos: int = 0
    steps: int = 0
    done: bool = False


class LineEnv(Env):
    name = "toy-line"
    flags = EnvFlags(supports_backtrack=True)

    def reset(self, task: Task) -> Observation:
        self.task = task
        self.length = int(task.params.get("length", 3))
        self.limit = int(task.params.get("budget", 10))  # a step limit, not a query budget
        self.state = LineState()
        return self.observation()

    def observation(self) -> Observation:
        s = self.state
        return Observation(f"at {s.pos} of {self.length}, step {s.steps}", {"pos": s.pos})

    def legal_actions(self) -> list[str]:
        return ["left", "right"]

    def state_key(self) -> int:
        return self.state.pos

    def step(self, action: str) -> Step:
        s = self.state
        s.steps += 1
        a = self.parse_action(action)
        if a is None:
            obs = self.observation()
            s.done = s.steps >= self.limit
            return Step(Observation(f"invalid action {action!r}. " + obs.text, obs.info),
                        0.0, s.done, False)
        s.pos = max(0, s.pos + (1 if a == "right" else -1))
        reward = 1.0 if s.pos == self.length else 0.0
        s.done = s.pos == self.length or s.steps >= self.limit
        return Step(self.observation(), reward, s.done, True)

    def instructions(self, variant: str = "default") -> str:
        return "Walk right to the end of the line."

    def grade(self) -> float:
        return 1.0 if self.state.pos == self.length else 0.0


def line_task(i: int, length: int = 3, budget: int = 10) -> Task:
    return Task("toy-line", {"length": length, "budget": budget}, seed=i, id=f"line-{i}")


class ScriptedAgent(BaseAgent):
    """Plays a fixed list of decisions (strings or Decision), then 'right' forever."""

    name = "scripted"
    backtracks = True

    def __init__(self, script=(), delay: float = 0.0, hold: str | None = None):
        self.script = list(script)
        self.delay = delay
        self.hold = hold  # a file: every step waits until it exists (a test says when to go on)

    async def act(self, episode):
        while self.hold and not os.path.exists(self.hold):
            await asyncio.sleep(0.01)
        if self.delay:
            await asyncio.sleep(self.delay)
        if episode.t < len(self.script):
            d = self.script[episode.t]
            return d if isinstance(d, Decision) else Decision(d)
        return Decision("right")


def register() -> None:
    from clew.envs.registry import register as reg
    from clew.runner.registry import AGENTS

    reg("toy-line", "toyenv:LineEnv")
    AGENTS["toy-scripted"] = "toyenv:ScriptedAgent"


@dataclass
class QueryState:
    asked: dict = None
    steps: int = 0
    done: bool = False


class QueryEnv(Env):
    """A budgeted oracle-query toy (docs/methods/mcts.md#free-and-charged-simulation "charged"): ask ``qK`` to learn the hidden value
    of K; asking a known K again is invalid and costs nothing; ``budget`` valid queries."""

    name = "toy-query"
    flags = EnvFlags(supports_backtrack=False, outcome_mode="graded_at_end",
                     simulation_mode="charged")
    max_invalid_streak = None

    def reset(self, task: Task) -> Observation:
        self.task = task
        self.values = [float(v) for v in task.params["values"]]
        self.n_queries = int(task.params["budget"])
        self.state = QueryState(asked={})
        return self.observation()

    def observation(self) -> Observation:
        s = self.state
        return Observation(f"asked {sorted(s.asked)}; {self.n_queries - len(s.asked)} left")

    def legal_actions(self) -> list[str]:
        return [f"q{k}" for k in range(len(self.values)) if k not in self.state.asked]

    def budget(self) -> int:
        return self.n_queries

    def answered(self, action: str) -> bool:
        a = action.strip()
        return a.startswith("q") and a[1:].isdigit() and int(a[1:]) in self.state.asked

    def step(self, action: str) -> Step:
        s = self.state
        a = action.strip()
        if not (a.startswith("q") and a[1:].isdigit() and int(a[1:]) < len(self.values)) \
                or self.answered(a):
            return Step(Observation(f"invalid query {action!r}. " + self.observation().text),
                        0.0, s.done, False)
        s.steps += 1
        s.asked[int(a[1:])] = self.values[int(a[1:])]
        s.done = len(s.asked) >= self.n_queries
        return Step(self.observation(), 0.0, s.done, True)

    def instructions(self, variant: str = "default") -> str:
        return "Find the largest hidden value."

    def grade(self) -> float:
        return max(self.state.asked.values(), default=0.0) / max(self.values)
