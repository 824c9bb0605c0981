"""Benchmark (b): concurrency efficiency of the episode runner.

K episodes run at once (``run_suite(concurrency=K)``) against the same episodes one at a time;
efficiency = (sequential time / concurrent time) / K, for K = 1, 2, 4, ..., 64. Target: at least
0.9 at K = 32.

The model is :class:`~clew.agents.lm.fake.FakeLM` with a fixed latency per call (default 50 ms,
a short generation on a served model), driven by a minimal LM agent that sends one chat request
per step and parses the action from the completion. The env is a countdown that ends after
exactly ``STEPS`` steps whatever the action, so every episode has the same length and a perfect
runner would reach efficiency 1.0 exactly; what is lost is framework time spent while no request
is in flight (env steps, records, the fsync'd append of each finished episode, asyncio).

The sequential time per episode is measured once (mean of ``SEQ_EPISODES`` episodes run with
concurrency 1) and multiplied by K, so the benchmark takes seconds, not minutes.

Each finished episode is appended to ``episodes.jsonl`` with an fsync, on the event loop. The
figures are measured twice in one run: with the run directory on the default temp disk
(``efficiency``, the headline) and on tmpfs (``/dev/shm``, where fsync is free:
``efficiency_tmpfs``), which separates the cost of durable writes from the runner's CPU
overhead. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from dataclasses import dataclass

from clew.agents.base import BaseAgent, Decision, Episode
from clew.agents.lm.base import ChatRequest, Sampling
from clew.agents.lm.fake import FakeLM
from clew.agents.usage import Usage
from clew.envs.base import Env, EnvFlags, Observation, Step, Task
from clew.envs.registry import register
from clew.records import RunDir
from clew.runner.episodes import run_suite

STEPS = 10
SEQ_EPISODES = 8
KS = (1, 2, 4, 8, 16, 32, 64)


@dataclass
class CountdownState:
    left: int
    steps: int = 0


class CountdownEnv(Env):
    """Ends after ``params['steps']`` steps; 'tick' is the one valid action."""

    name = "bench-countdown"
    flags = EnvFlags()

    def reset(self, task: Task) -> Observation:
        self.task = task
        self.state = CountdownState(int(task.params["steps"]))
        return self.observation()

    def observation(self) -> Observation:
        return Observation(f"{self.state.left} ticks left. Say tick.", {})

    def legal_actions(self) -> list[str]:
        return ["tick"]

    def step(self, action: str) -> Step:
        s = self.state
        s.steps += 1
        s.left -= 1
        valid = action.strip().lower() == "tick"
        return Step(self.observation(), 0.0, s.left <= 0, valid)

    @property
    def done(self) -> bool:
        return self.state.left <= 0

    def instructions(self, variant: str = "default") -> str:
        return "Say tick until the countdown ends."

    def grade(self) -> float:
        return 1.0 if self.state.left <= 0 else 0.0


class OneCallAgent(BaseAgent):
    """Calls the LM once per step with the chat so far and plays the action it names."""

    name = "one-call"
    kind = "lm"

    def __init__(self, lm: FakeLM):
        self.lm = lm

    async def act(self, episode: Episode) -> Decision:
        messages = [{"role": "system", "content": episode.env.instructions()},
                    {"role": "user", "content": episode.obs.text}]
        (comp,) = await self.lm.complete(ChatRequest(messages, Sampling(n=1), role="policy"))
        episode.usage.record("policy", Usage(comp.usage.prompt_tokens,
                                             comp.usage.completion_tokens, 1))
        action = comp.text.rpartition("Action:")[2].strip()
        return Decision(action, raw=comp.text)


def tasks(n: int, tag: str) -> list[Task]:
    return [Task("bench-countdown", {"steps": STEPS}, seed=i, id=f"{tag}-{i}") for i in range(n)]


async def timed_run(n: int, concurrency: int, latency: float, tag: str,
                    root: str | None = None) -> float:
    lm = FakeLM(lambda req, i: "I should tick.\nAction: tick", latency=latency)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        run = RunDir(f"{tmp}/run")
        run.open({"benchmark": "concurrency"}, resume=False)
        t0 = time.perf_counter()
        counts = await run_suite(lambda: OneCallAgent(lm), tasks(n, tag), run,
                                 concurrency=concurrency, max_steps=STEPS + 1, progress=False)
        seconds = time.perf_counter() - t0
        assert counts["finished"] == n, counts
        assert len(lm.calls) == n * STEPS
    return seconds


def efficiencies(latency: float, root: str | None) -> tuple[float, dict[str, float]]:
    seq = asyncio.run(timed_run(SEQ_EPISODES, 1, latency, "seq", root)) / SEQ_EPISODES
    eff = {}
    for k in KS:
        conc = asyncio.run(timed_run(k, k, latency, f"k{k}", root))
        eff[str(k)] = round(seq * k / conc / k, 3)
    return seq, eff


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.05, help="seconds per model call")
    args = ap.parse_args()
    register("bench-countdown", f"{__name__}:CountdownEnv")
    asyncio.run(timed_run(2, 2, 0.0, "warmup"))
    seq, eff = efficiencies(args.latency, None)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    eff_tmpfs = efficiencies(args.latency, shm)[1] if shm else None
    print(json.dumps({
        "benchmark": "concurrency_efficiency", "latency_s": args.latency,
        "steps_per_episode": STEPS, "sequential_s_per_episode": round(seq, 4),
        "ideal_s_per_episode": round(STEPS * args.latency, 4),
        "efficiency": eff, "efficiency_tmpfs": eff_tmpfs,
        "target_at_32": 0.9, "meets_target": eff["32"] >= 0.9,
    }))


if __name__ == "__main__":
    main()
