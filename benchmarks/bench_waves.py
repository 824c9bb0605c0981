"""Benchmark: the critical path of one R-MCTS_MAD tree, in LM round trips and wall time, with and
without leaf-parallel waves (docs/methods/mcts.md#leaf-parallel-waves).

The model answers every request after a fixed ``--latency`` with unlimited capacity (requests
in flight never wait for one another), so the time a search takes is its number of dependent
round trips times the latency, plus framework time. Its answers depend only on the request
(messages, role, seed and sample index), never on arrival order. The agent is the ``rmcts-mad``
preset (LM policy, debate value, reflection and memory) at ``--simulations`` simulations; one
grid-map episode of ``--steps`` real steps is played per variant, each with an empty memory of
its own (so no retrieval runs: the first task of a run):

* ``before_waves``: k = 1 with each new leaf's evaluation started only once its expansion has
  returned: the call pattern of the search before waves (its trees are the same as k = 1's,
  ``tests/test_search_waves.py``), i.e. policy, then the two debate arguments, then the judge;
* ``k1``: k = 1, a new leaf's expansion and evaluation in flight together;
* ``k4``, ``k8``: waves of 4 and 8 leaves;
* ``k4p``: waves of 4 with ``wave_pipeline`` (the next wave selected once this wave's
  expansions are back, its values backed up a wave later).

Per variant and real step: the round trips on the critical path (the longest chain of requests
each sent after the previous one returned, within one search), wall seconds, requests, and the
shape of the tree. The ratios to ``before_waves`` come from this one run. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import statistics
import tempfile
import time
from typing import Any

from clew.agents.lm.base import ChatRequest, Completion, LanguageModel
from clew.agents.usage import Usage
from clew.envs.suites import resolve
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent

MOVES = ("up", "down", "left", "right")


class LatencyLM(LanguageModel):
    """Every request answered after ``latency`` seconds, all in parallel; logs (sent, done)."""

    spec = "latency-fake"

    def __init__(self, latency: float):
        self.latency = latency
        self.log: list[tuple[float, float, str]] = []

    @staticmethod
    def text(req: ChatRequest, j: int) -> str:
        blob = json.dumps([req.messages, req.role, req.sampling.seed, j]).encode()
        h = int.from_bytes(hashlib.sha256(blob).digest()[:8], "big")
        if req.role == "policy":
            return f"Thoughts: try it.\nNext action: ```{MOVES[h % 4]}```"
        if req.role in ("value", "judge"):
            # never six A's in a row: no value-one path ends a search early
            return f"Thoughts: maybe.\nSTATUS CODE: {'BCDE'[h % 4]}"
        return f"Argument {h % 997}: the last move {'helps' if h % 2 else 'hurts'}."

    async def generate(self, requests: list[ChatRequest]) -> list[list[Completion]]:
        sent = time.perf_counter()
        await asyncio.sleep(self.latency)
        done = time.perf_counter()
        out = []
        for r in requests:
            self.log.append((sent, done, r.role))
            out.append([Completion(t, "stop", Usage(100, len(t.split()), 1))
                        for t in (self.text(r, j) for j in range(r.sampling.n))])
        return out


class SerialHooks:
    """Hooks whose evaluation of a new leaf waits for that leaf's expansion (the call order of
    the search before waves)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.expanded: dict[int, asyncio.Event] = {}

    async def expand(self, node):
        event = self.expanded.setdefault(node.node_id, asyncio.Event())
        try:
            return await self.inner.expand(node)
        finally:
            event.set()

    async def evaluate(self, node):
        await asyncio.sleep(0)              # let a sibling expansion of this node register
        event = self.expanded.get(node.node_id)
        if event is not None:
            await event.wait()
        return await self.inner.evaluate(node)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class TimedAlgorithm:
    """The agent's algorithm, timing each search (and optionally serialising its hooks)."""

    def __init__(self, inner: Any, serial: bool):
        self.inner, self.serial, self.spans = inner, serial, []
        self.config = inner.config

    async def plan(self, hooks, root_obs):
        t0 = time.perf_counter()
        result = await self.inner.plan(SerialHooks(hooks) if self.serial else hooks, root_obs)
        self.spans.append((t0, time.perf_counter()))
        return result


def round_trips(calls: list[tuple[float, float, str]]) -> int:
    """The longest chain of requests each sent after the one before it returned."""
    calls = sorted(calls)
    depth: list[int] = []
    for j, (sent, _, _) in enumerate(calls):
        depth.append(1 + max((depth[i] for i in range(j) if calls[i][1] <= sent), default=0))
    return max(depth, default=0)


def shape(tree: dict) -> dict[str, float]:
    depths = [n["depth"] for n in tree["nodes"]]
    return {"nodes": len(depths), "depth": max(depths),
            "width": max(depths.count(d) for d in set(depths))}


async def variant(task, k: int, serial: bool, memory_dir: str, args,
                  pipeline: bool = False) -> dict[str, Any]:
    lm = LatencyLM(args.latency)
    agent = build_agent("rmcts-mad", model=lm, seed=args.seed,
                        # the grid map's outcome mode gives "zero"; stated so that the agent
                        # keeps the timed algorithm instead of building one per outcome mode
                        search={"n_simulations": args.simulations, "wave_size": k,
                                "wave_pipeline": pipeline, "horizon_value": "zero"},
                        memory={"dir": memory_dir})
    timed = TimedAlgorithm(agent.algorithm, serial)
    agent.algorithm = timed
    act = agent.act

    async def act_then_end(episode):
        # the step limit stays the env's (it sets the trees' horizon); the agent ends the
        # episode after --steps searches
        decision = await act(episode)
        if len(timed.spans) >= args.steps:
            decision.info["end_episode"] = True
        return decision
    agent.act = act_then_end
    trees: list[dict] = []
    await run_episode(agent, task, on_tree=lambda t, tr: trees.append(tr))
    rts, walls, reqs = [], [], []
    for t0, t1 in timed.spans:
        inside = [c for c in lm.log if t0 <= c[0] and c[1] <= t1]
        rts.append(round_trips(inside))
        walls.append(t1 - t0)
        reqs.append(len(inside))
    shapes = [shape(t) for t in trees]
    mean = lambda xs: round(statistics.fmean(xs), 3)
    return {"steps": len(timed.spans), "round_trips_per_step": mean(rts),
            "wall_s_per_step": mean(walls), "requests_per_step": mean(reqs),
            "nodes": mean(s["nodes"] for s in shapes), "depth": mean(s["depth"] for s in shapes),
            "width": mean(s["width"] for s in shapes)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.05, help="seconds per request")
    ap.add_argument("--simulations", type=int, default=20)
    ap.add_argument("--steps", type=int, default=3, help="real steps (searches) per variant")
    ap.add_argument("--wave-sizes", default="4,8,4p",
                    help="k, or kp for k with wave_pipeline")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    task = resolve("gridmap-v1:test")[0]
    variants = {"before_waves": (1, True, False), "k1": (1, False, False)}
    variants.update({f"k{k}": (int(k.rstrip("p")), False, k.endswith("p"))
                     for k in args.wave_sizes.split(",")})
    out: dict[str, Any] = {"benchmark": "waves_critical_path", "agent": "rmcts-mad",
                           "task": task.id, "latency_s": args.latency,
                           "simulations": args.simulations}
    for name, (k, serial, pipeline) in variants.items():
        with tempfile.TemporaryDirectory() as memory_dir:
            out[name] = asyncio.run(variant(task, k, serial, memory_dir, args, pipeline))
    base = out["before_waves"]
    for name in variants:
        if name != "before_waves":
            out[f"round_trip_ratio_{name}"] = round(
                out[name]["round_trips_per_step"] / base["round_trips_per_step"], 3)
            out[f"wall_ratio_{name}"] = round(
                out[name]["wall_s_per_step"] / base["wall_s_per_step"], 3)
    out["target_round_trip_ratio_k4"] = 0.25
    out["meets_target"] = bool(out.get("round_trip_ratio_k4", 1.0) <= 0.25)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
