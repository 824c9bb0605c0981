"""Run directories built from hand-written episode records, for the report and merge tests."""

from __future__ import annotations

import asyncio
import copy
import random
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clew.records import RunDir
from clew.runner.evaluate import finalize
from clew.search.algorithm import Evaluation, Transition
from clew.search.mcts import MCTS, MCTSConfig
from clew.search.tree import tree_to_dict

#: text that would break out of a <script> block if the viewer embedded it raw
EVIL = "</script><script>window.pwned=1</script><b>"


def record(i: int, *, success: bool | None, agent: str = "agent", kind: str = "lm",
           env: str = "toy", params: dict[str, Any] | None = None, metrics: dict[str, Any] | None = None,
           usage: dict[str, dict[str, int]] | None = None, executed: int = 5,
           simulated: int = 0, wall: float = 1.0, steps: int = 5, repeat: int = 0) -> dict:
    return {
        "key": f"task-{i}#{repeat}", "agent": agent, "agent_kind": kind,
        "task": {"env": env, "params": params or {}, "seed": i, "id": f"task-{i}",
                 "split": "test"},
        "actions": ["right"] * steps, "steps": [],
        "interactions": {"executed": executed, "simulated": simulated},
        "usage": usage or {},
        "outcome": {"success": success, "grade": float(bool(success)), "return": 0.0,
                    "steps": steps, "invalid": 0, "stopped_by": "done"},
        "metrics": metrics or {}, "wall_s": wall,
    }


def write_run(path: Path, records: list[dict], *, agent: str = "agent",
              agent_options: dict | None = None, suite: str = "toy-suite:test",
              **config: Any) -> Path:
    run = RunDir(path)
    run.open({"agent": agent, "agent_options": agent_options or {}, "suite": suite, **config},
             resume=False)
    for rec in records:
        run.append_episode(rec)
    finalize(run)
    run.close()
    return path


@dataclass
class Prop:
    action: str
    key: str
    raw: str
    count: int
    prior: float
    is_stop: bool = False


class RandomHooks:
    """A toy world whose priors and values are pseudo-random functions of the action path."""

    def __init__(self, seed: int):
        self.seed, self.state = seed, ()

    def _rng(self):
        return random.Random(zlib.crc32(f"{self.seed}:{'/'.join(self.state)}".encode()))

    async def expand(self, node):
        rng = self._rng()
        acts = ["left", "right", "up", "stop"]
        ws = [rng.random() + 0.05 for _ in acts]
        props = [Prop(a, a, f"raw {a} {EVIL}", int(w * 9) + 1, w / sum(ws), a == "stop")
                 for a, w in zip(acts, ws)]
        return sorted(props, key=lambda p: -p.prior)

    async def evaluate(self, node):
        return Evaluation(self._rng().random() * 0.9, {"samples": [0.5]})

    def to_root(self):
        self.state = ()

    def apply(self, node, edge):
        self.state += (edge.action,)
        return Transition(obs=f"at {'/'.join(self.state)} {EVIL}")

    def snapshot(self):
        return self.state

    def restore(self, snap):
        self.state = snap

    def fork(self):
        return copy.copy(self)


def mcts_tree(seed: int, sims: int, wave_size: int = 1, pipeline: bool = False) -> dict:
    cfg = MCTSConfig(branching_factor=3, n_simulations=sims, max_depth_actions=4,
                     wave_size=wave_size, wave_pipeline=pipeline)
    return tree_to_dict(asyncio.run(MCTS(cfg).plan(RandomHooks(seed), "root obs")).tree)


def compute_runs(root: Path) -> list[Path]:
    """Three agents at three budgets (nodes per tree 2, 5, 10): four episodes each, whose
    success, tokens and engine and GPU time grow with the budget, for the cost report."""
    paths = []
    for a, agent in enumerate(("react", "mcts", "rmcts")):
        for nodes in (2, 5, 10):
            recs = []
            for i in range(4):
                tokens = 100 * nodes * (a + 1) + 10 * i
                recs.append(record(
                    i, success=i < min(4, 1 + nodes // 4 + a), agent=agent,
                    usage={"policy": {"prompt_tokens": tokens, "completion_tokens": tokens // 10,
                                      "calls": nodes}},
                ) | {"compute": {"policy": {"engine_s": 0.1 * tokens, "busy_s": 0.01 * tokens,
                                            "gpu_s": 0.01 * tokens,
                                            "cached_tokens": tokens // 2}}})
            paths.append(write_run(root / f"{agent}-{nodes}", recs, agent=agent,
                                   agent_options={"n_simulations": nodes}))
    return paths
