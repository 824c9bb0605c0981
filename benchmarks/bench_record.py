"""Benchmark: what recording the LM calls costs (docs/methods/recording.md#overhead).

Runs the same search twice per repeat, once with the recording off and once on (the order
alternating between repeats), through :func:`clew.runner.evaluate.evaluate` as ``clew search``
does, on ``gridmap-mini:test`` with the ``fake`` model: R-MCTS_MAD with its reflection memory by
default. With no model latency the run is nothing but framework time, which is the worst case
for the recording's share; ``--latency`` adds a fixed delay per call, as a served model would.
Overhead = (median wall time on) / (median wall time off) - 1. Also prints the recording's size
per episode, and the time of one replay of the recorded run (no model). Torch runs on one
thread (the memory's embedding model): on a shared machine its thread pool is what varies most
from run to run. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from clew.runner.config import EvalConfig
from clew.runner.evaluate import evaluate

#: a fake model whose answers every role reads (an action, a status code), cycling
MODEL = "fake:" + "|".join(
    f"{why}\nNext action: ```{a}```\nSTATUS CODE: {code}"
    for why, a, code in (("Plan.", "up", "B"), ("Hmm.", "right", "C"), ("Try left.", "left", "A"),
                         ("Down it is.", "down", "D")))


def config(out: Path, agent: str, tasks: int, latency: float, record: bool,
           replay: str | None = None) -> EvalConfig:
    return EvalConfig(
        agent=agent, suite="gridmap-mini:test", out=str(out), limit=tasks, concurrency=4,
        max_episode_steps=4, record=record, replay=replay, parse_failure_rate=None,
        agent_options={"model": MODEL, "model_options": {"latency": latency},
                       "search": {"n_simulations": 4},
                       "reflection": {"policy": {"threshold": 0.0},
                                      "value": {"threshold": 0.0}}})


def timed(cfg: EvalConfig) -> float:
    start = time.perf_counter()
    evaluate(cfg, progress=False)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agent", default="rmcts-mad")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds per model call")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="clew-bench-record-") as tmp:
        root = Path(tmp)
        timed(config(root / "warm", args.agent, 1, 0.0, True))   # imports, embedding model
        times: dict[bool, list[float]] = {False: [], True: []}
        for i in range(args.repeats):
            for record in ((False, True) if i % 2 == 0 else (True, False)):
                out = root / f"{'on' if record else 'off'}-{i}"
                times[record].append(timed(config(out, args.agent, args.tasks, args.latency,
                                                   record)))
        recorded = root / "on-0"
        files = list((recorded / "lm").glob("[!._]*.json.gz"))
        size = sum(p.stat().st_size for p in files)
        replay = timed(config(root / "replay", args.agent, args.tasks, args.latency, True,
                              replay=str(recorded)))
    off, on = statistics.median(times[False]), statistics.median(times[True])
    print(json.dumps({
        "benchmark": "record", "agent": args.agent, "tasks": args.tasks,
        "latency_s": args.latency, "repeats": args.repeats,
        "wall_off_s": round(off, 3), "wall_on_s": round(on, 3),
        "overhead": round(on / off - 1, 4), "target_overhead": 0.2,
        "recording_kb_per_episode": round(size / 1e3 / max(len(files), 1), 2),
        "replay_s": round(replay, 3),
    }))


if __name__ == "__main__":
    main()
