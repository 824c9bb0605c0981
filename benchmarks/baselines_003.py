"""Baseline figures on ``paper-003-main:test`` (spec_003 §4, §3.8): one JSON line per family.

Each explore–exploit baseline (and the random-query baseline, for reference) plays every task of
its family through the episode runner, with the paper's baseline run counts (Table 4: Hill 500,
Tree 200, MaxSat 200 episodes per budget). Reported per budget: the mean normalised best-found
reward r = R/OPT and its standard error (std/sqrt(runs); §6.7's bootstrap over runs gives the same
to sampling noise for a plain mean), plus the §5.1 pooled best-of-p estimate at budget N/p
computed from extra runs at that budget (p = 2, 3, 4) for the parallel-thread comparison.

Usage: ``python benchmarks/baselines_003.py [--runs-scale 0.2] [--no-parallel]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from clew.agents.heuristics.explore_exploit import ExploreExploit, RandomQuery
from clew.agents.interventions import pooled_best_of_p
from clew.envs.suites import resolve
from clew.eval.metrics import mean_and_stderr
from clew.eval.runner import run_episode

RUNS = {"hillsearch": 500, "treesearch": 200, "maxsatsearch": 200}
FAMILY = {"hillsearch": "hill", "treesearch": "tree", "maxsatsearch": "maxsat"}
PARAMS = {"hillsearch": {"alpha": 0.8, "beta": 0.05}, "treesearch": {"tau": 4.0},
          "maxsatsearch": {"alpha": 0.5}}


async def rewards(agent_factory, task, runs: int) -> list[float]:
    out = []
    for r in range(runs):
        rec = await run_episode(agent_factory(), task, key=f"{task.id}#{r}",
                                max_invalid_streak=None)
        out.append(rec["metrics"]["normalized_reward"])
    return out


def with_budget(task, budget):
    from dataclasses import replace

    return replace(task, params={**task.params, "budget": budget}, id=f"{task.id}@{budget}")


async def main(scale: float, parallel: bool) -> None:
    tasks = resolve("paper-003-main:test")
    for env in ("hillsearch", "treesearch", "maxsatsearch"):
        t0 = time.perf_counter()
        runs = max(2, int(RUNS[env] * scale))
        line: dict = {"benchmark": "baselines_003", "suite": "paper-003-main:test",
                      "family": FAMILY[env], "baseline_params": PARAMS[env], "runs": runs,
                      "budgets": {}}
        for task in [t for t in tasks if t.env == env]:
            n = task.params["budget"]
            base = await rewards(ExploreExploit, task, runs)
            rand = await rewards(RandomQuery, task, runs)
            mean, se, _ = mean_and_stderr(base)
            rmean, rse, _ = mean_and_stderr(rand)
            cell = {"instance": task.params.get("instance"), "mean": round(mean, 4),
                    "se": round(se, 4), "random_query_mean": round(rmean, 4),
                    "random_query_se": round(rse, 4)}
            if parallel:
                pooled = {}
                for p in (2, 3, 4):
                    sub = await rewards(ExploreExploit, with_budget(task, n // p), runs)
                    pooled[f"p{p}"] = round(pooled_best_of_p(sub, p), 4)
                cell["parallel_pooled"] = pooled
            line["budgets"][str(n)] = cell
        line["seconds"] = round(time.perf_counter() - t0, 2)
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs-scale", type=float, default=1.0,
                    help="fraction of the paper's baseline run counts (default 1)")
    ap.add_argument("--no-parallel", action="store_true",
                    help="skip the pooled parallel-thread estimates")
    args = ap.parse_args()
    asyncio.run(main(args.runs_scale, not args.no_parallel))
