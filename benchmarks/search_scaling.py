"""Search scaling with heuristic roles: search algorithms at equal simulation budgets vs the same
policy without search (docs/methods/rmcts.md#compute-scaling; best-of-N and AB-MCTS beside MCTS).

Every agent uses the heuristic policy of :mod:`clew.agents.heuristics.search_roles` (legal actions with
priors from the frequencies of 20 uniform draws by default, like an LM's sampled priors).
``policy-only`` draws one action per step from those priors; the search agents (``--agents``:
any of ``mcts``, ``best-of-n``, ``ab-mcts``, ``best-first``, ``tot-bfs``, ``tot-dfs``) search with
a **noisy** heuristic value (ground-truth progress + Gaussian noise, an imperfect judge
stand-in; ``uses_oracle``) at several budgets (``search.n_simulations``: simulations, sampled
episodes or pops per tree). Same tasks, same seeds. Prints one JSON line per (suite, agent,
budget), a summary line, and a success table (agents x budgets) per suite.

    python benchmarks/search_scaling.py --suite gridmap-v1:test --suite textminigrid-v1:test
    nice -n 10 python benchmarks/search_scaling.py --agents mcts,best-of-n,ab-mcts --budgets 8,16,32

``--q-init`` (repeatable: a number or ``parent``) runs every budget once per initial Q of
unvisited edges (docs/methods/mcts.md#first-play-urgency); ``--seeds 0,1,2`` on the 45 tasks of
``gridmap-v1:test`` gives 135 episodes per cell. With two values, one more line per budget gives
the paired difference in success (second minus first, the same task and seed on both sides)
with a 95% bootstrap interval over episodes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import time

from clew.envs.suites import resolve
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent


def bootstrap_ci(xs: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(xs, k=len(xs))) for _ in range(n))
    return means[int(0.025 * n)], means[int(0.975 * n) - 1]


async def run_one(make, tasks, seeds, max_steps, concurrency):
    sem = asyncio.Semaphore(concurrency)

    async def one(task, seed):
        async with sem:
            trees = []
            rec = await run_episode(make(seed), task, max_steps=max_steps,
                                    on_tree=lambda t, d: trees.append(d))
            rec["_trees"] = trees
            return rec
    return await asyncio.gather(*(one(t, s) for t in tasks for s in seeds))


def _per_step(recs, counter):
    """Mean of a tree counter over every searched step of ``recs`` (NaN without trees)."""
    xs = [t["counters"].get(counter, 0) for r in recs for t in r.get("_trees", [])]
    return statistics.fmean(xs) if xs else math.nan


def table(suite, agents, budgets, summary):
    """A success table: one row per agent, one column per budget."""
    head = f"| {suite} | " + " | ".join(str(b) for b in budgets) + " |"
    lines = [head, "|---|" + "---:|" * len(budgets)]
    for agent in agents:
        cells = [f"{summary.get(f'{agent}@{b}', math.nan):.3f}" for b in budgets]
        lines.append(f"| {agent} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summarise(suite, agent, budget, recs, wall):
    succ = [1.0 if r["outcome"]["success"] else 0.0 for r in recs]
    lo, hi = bootstrap_ci(succ)
    return {"suite": suite, "agent": agent, "nodes_per_tree": budget, "episodes": len(recs),
            "success": round(statistics.fmean(succ), 4), "ci95": [round(lo, 4), round(hi, 4)],
            "mean_steps": round(statistics.fmean(r["outcome"]["steps"] for r in recs), 2),
            "mean_simulated": round(statistics.fmean(r["interactions"]["simulated"]
                                                     for r in recs), 1),
            "value_calls_per_step": round(_per_step(recs, "value_calls"), 2),
            "policy_calls_per_step": round(_per_step(recs, "policy_calls"), 2),
            "wall_s": round(wall, 2)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", action="append", help="SUITE:SPLIT (repeatable)")
    p.add_argument("--agents", default="mcts", help="search presets, comma-separated")
    p.add_argument("--budgets", default="2,5,10,15", help="simulations per tree")
    p.add_argument("--noise", type=float, default=0.3, help="std of the value noise")
    p.add_argument("--prior", default="sampled", help="heuristic policy prior")
    p.add_argument("--seeds", default="0", help="agent seeds (value noise, sampling)")
    p.add_argument("--limit", type=int, default=None, help="first N tasks of each suite")
    p.add_argument("--max-steps", type=int, default=None, help="runner step limit")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--q-init", action="append", help="MCTS q_init: a number or 'parent' "
                   "(repeatable; default 0)")
    p.add_argument("--no-policy-only", action="store_true", help="skip the no-search row")
    args = p.parse_args()
    q_inits = [q if q == "parent" else float(q) for q in (args.q_init or ["0"])]
    suites = args.suite or ["gridmap-v1:test"]
    budgets = [int(b) for b in args.budgets.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    agents = args.agents.split(",")
    summary = {}
    cells: dict[tuple, list[float]] = {}
    for suite in suites:
        tasks = resolve(suite)[: args.limit]
        variants = [] if args.no_policy_only else [("policy-only", None, None)]
        variants += [(a, b, q) for a in agents for b in budgets
                     for q in (q_inits if a == "mcts" else [None])]
        for agent, budget, q_init in variants:
            def make(seed, budget=budget, agent=agent, q_init=q_init):
                common = {"seed": seed, "policy": {"prior": args.prior}}
                if agent == "policy-only":
                    return build_agent("policy-only", **common)
                search = {"n_simulations": budget}
                if q_init is not None:
                    search["q_init"] = q_init
                return build_agent(agent, search=search,
                                   value={"noise": args.noise}, **common)
            t0 = time.perf_counter()
            recs = asyncio.run(run_one(make, tasks, seeds, args.max_steps, args.concurrency))
            row = summarise(suite, agent, budget, recs, time.perf_counter() - t0)
            row.update({"noise": args.noise, "prior": args.prior, "seeds": seeds})
            name = agent
            if budget:
                row["q_init"] = q_init
                name = f"{agent}@{budget}" + (f"/q_init={q_init}" if len(q_inits) > 1 else "")
            print(json.dumps(row), flush=True)
            summary.setdefault(suite, {})[name] = row["success"]
            cells[(agent, budget, q_init)] = [1.0 if r["outcome"]["success"] else 0.0
                                              for r in recs]
            if agent == "mcts" and len(q_inits) == 2 and q_init == q_inits[1]:
                first, second = cells[(agent, budget, q_inits[0])], cells[(agent, budget, q_init)]
                diff = [b - a for a, b in zip(first, second)]
                lo, hi = bootstrap_ci(diff)
                print(json.dumps({"suite": suite, "nodes_per_tree": budget,
                                  "paired_diff": f"q_init={q_init} minus q_init={q_inits[0]}",
                                  "success_diff": round(statistics.fmean(diff), 4),
                                  "ci95": [round(lo, 4), round(hi, 4)],
                                  "episodes": len(diff)}), flush=True)
    print(json.dumps({"summary": summary}), flush=True)
    for suite in suites:
        alone = summary[suite].get("policy-only", math.nan)
        print(f"\nsuccess (policy-only: {alone:.3f}; noise {args.noise}, "
              f"seeds {args.seeds})")
        print(table(suite, agents, budgets, summary[suite]), flush=True)


if __name__ == "__main__":
    main()
