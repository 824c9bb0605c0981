"""What leaf-parallel waves do to the search: MCTS with heuristic roles at several
wave sizes k, same tasks, same seeds (docs/methods/mcts.md#leaf-parallel-waves).

The agent is ``search_scaling.py``'s MCTS (sampled-frequency priors over the legal actions, a
noisy ground-truth value, ``uses_oracle``) at ``--simulations`` simulations per tree. Per k it
prints one JSON line: success ± its standard error, real steps, the shape of the trees (nodes,
depth, width = the most nodes at one depth, root edges visited), how often the value-one rule
ended a search, and how often the first real step (the same root state for every k) decided the
same action as k = 1.

    python benchmarks/search_waves.py --suite gridmap-v1:test --seeds 0,1,2 --wave-sizes 1,2,4,8
    python benchmarks/search_waves.py --wave-sizes 1,1p,2p,4p     # pipelined waves
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import time
from collections import Counter

from clew.envs.suites import resolve
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent


def shape(tree: dict) -> dict:
    depths = Counter(n["depth"] for n in tree["nodes"])
    root = tree["nodes"][tree["root"]]
    return {"nodes": len(tree["nodes"]), "depth": max(depths), "width": max(depths.values()),
            "root_edges": sum(tree["edges"][e]["n"] > 0 for e in root["edges"]),
            "value_one": tree["counters"]["stopped_by"] == "value_one",
            "waves": max(tree["waves"]["traversals"], default=0) if tree.get("waves") else None}


async def run_cell(tasks, seeds, options, max_steps, concurrency):
    sem = asyncio.Semaphore(concurrency)

    async def one(task, seed):
        trees: list[dict] = []
        async with sem:
            rec = await run_episode(build_agent("mcts", seed=seed, **options), task,
                                    max_steps=max_steps, on_tree=lambda t, tr: trees.append(tr))
        return rec, trees
    return await asyncio.gather(*(one(t, s) for t in tasks for s in seeds))


def first_action(trees: list[dict]) -> str | None:
    if not trees:
        return None
    t = trees[0]
    return t["edges"][t["decision"]["edges"][0]]["key"] if t["decision"]["edges"] else None


def summarise(k, results, wall, reference):
    succ = [1.0 if r["outcome"]["success"] else 0.0 for r, _ in results]
    p = statistics.fmean(succ)
    shapes = [shape(t) for _, trees in results for t in trees]
    mean = lambda key: round(statistics.fmean(s[key] for s in shapes), 3)
    firsts = [first_action(trees) for _, trees in results]
    same = None
    if reference is not None:
        same = round(statistics.fmean(a == b for a, b in zip(firsts, reference)), 3)
    return {"wave_size": k, "episodes": len(results), "success": round(p, 4),
            "se": round(math.sqrt(p * (1 - p) / len(succ)), 4),
            "mean_steps": round(statistics.fmean(r["outcome"]["steps"] for r, _ in results), 2),
            "trees": len(shapes), "nodes": mean("nodes"), "depth": mean("depth"),
            "width": mean("width"), "root_edges_visited": mean("root_edges"),
            "waves_per_tree": mean("waves"), "value_one_rate": mean("value_one"),
            "first_decision_as_k1": same, "wall_s": round(wall, 1)}, firsts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", default="gridmap-v1:test")
    p.add_argument("--wave-sizes", default="1,2,4,8",
                   help="k, or kp for k with wave_pipeline (values backed up a wave later)")
    p.add_argument("--simulations", type=int, default=20)
    p.add_argument("--noise", type=float, default=0.3, help="std of the value noise")
    p.add_argument("--seeds", default="0,1,2", help="agent seeds")
    p.add_argument("--virtual-loss", type=int, default=None, help="search.virtual_loss")
    p.add_argument("--virtual-value", default=None,
                   help="search.virtual_value (a number, or 'none' for Q unchanged)")
    p.add_argument("--limit", type=int, default=None, help="first N tasks")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--concurrency", type=int, default=8)
    args = p.parse_args()
    tasks = resolve(args.suite)[: args.limit]
    seeds = [int(s) for s in args.seeds.split(",")]
    reference = None
    for variant in args.wave_sizes.split(","):
        k, pipeline = int(variant.rstrip("p")), variant.endswith("p")
        search = {"n_simulations": args.simulations, "wave_size": k, "wave_pipeline": pipeline}
        if args.virtual_loss is not None:
            search["virtual_loss"] = args.virtual_loss
        if args.virtual_value is not None:
            search["virtual_value"] = (None if args.virtual_value == "none"
                                       else float(args.virtual_value))
        options = {"policy": {"prior": "sampled"}, "value": {"noise": args.noise},
                   "search": search}
        t0 = time.perf_counter()
        results = asyncio.run(run_cell(tasks, seeds, options, args.max_steps, args.concurrency))
        row, firsts = summarise(k, results, time.perf_counter() - t0, reference)
        row["wave_pipeline"] = pipeline
        if variant == "1":
            reference = firsts
        row.update({"suite": args.suite, "simulations": args.simulations, "seeds": seeds,
                    "noise": args.noise, "virtual_loss": args.virtual_loss,
                    "virtual_value": args.virtual_value})
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
