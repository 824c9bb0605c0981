"""Explore–exploit baselines on the HillSearch/TreeSearch/MaxSatSearch suites, at the paper's
run counts, as one table (``docs/results.md``).

Covers ``paper-003-main:test`` (H-E3, T-main, M-main), ``paper-003-additional:test`` (H-B2,
T-alt1, T-alt2, M-alt1..3) and ``paper-003-general:test`` (50 instances per family at N = 48).
Each baseline plays every task through the episode runner, exactly as a model would. Run counts
(the paper's Table 4): Hill 500, Tree 200, MaxSat 200 episodes per fixed instance and budget;
200 episodes per instance of the general sets.

Reported per (suite, instance, N): the mean normalised best-found reward r = R/OPT and its
standard error over runs (std/sqrt(runs); the paper's bootstrap over runs gives the same for a
plain mean, up to resampling noise). A general-set row is the mean of the 50 per-instance
means; its ``se`` is the run noise of that mean, sqrt(Σ se_i²)/50 (the instances are fixed),
and ``sd_inst`` the spread of the instance means.

Output: one JSON line per row on stdout (the benchmarks' convention) and the markdown table in
``--table`` (default ``baselines_003.md``). ``--published FILE.json`` adds the published
baseline rows for comparison: ``{"paper-003-main/H-E3/N36": [mean, se], ...}`` (``se`` may be
null); the table then shows the difference and whether it lies within the standard errors
(|ours − published| <= ours_se + published_se, or <= 2·ours_se without a published se).

Usage::

    python benchmarks/baselines_003.py [--runs-scale 0.1] [--jobs 2] [--suites main,additional]
        [--random-query] [--parallel] [--published rows.json] [--table baselines_003.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

RUNS = {"hillsearch": 500, "treesearch": 200, "maxsatsearch": 200}  # Table 4, fixed instances
GENERAL_RUNS = 200  # E.4: baseline episodes per instance
SUITES = {"main": "paper-003-main", "additional": "paper-003-additional",
          "general": "paper-003-general"}
FAMILY = {"hillsearch": "Hill", "treesearch": "Tree", "maxsatsearch": "MaxSat"}
PARAMS = {"hillsearch": "α=0.8, β=0.05", "treesearch": "τ=4", "maxsatsearch": "α=0.5"}


@contextmanager
def _best_found_only():
    """Score episodes with the best-found metric alone while inside; restore the registry after.

    The table needs r = R/OPT (the family's own metric); the metrics that travel (coverage,
    redundancy, gap) take about two thirds of an episode's time and are not reported here.
    """
    from clew import metrics

    saved = dict(metrics.METRICS)      # the registered ones; best_found is the family's own
    metrics.METRICS.clear()
    try:
        yield
    finally:
        metrics.METRICS.clear()
        metrics.METRICS.update(saved)


def _rewards(agent_name: str, task_json: str, runs: int) -> list[float]:
    """``runs`` episodes of one task (in a worker process)."""
    from clew.agents.heuristics.query_baselines import ExploreExploit, RandomQuery
    from clew.envs.base import Task
    from clew.runner.episodes import run_episode


    agent_cls = {"explore-exploit": ExploreExploit, "random-query": RandomQuery}[agent_name]
    task = Task.from_dict(json.loads(task_json))

    async def play() -> list[float]:
        out = []
        for r in range(runs):
            rec = await run_episode(agent_cls(), task, key=f"{task.id}#{r}",
                                    max_invalid_streak=None)
            out.append(float(rec["metrics"]["normalized_reward"]))
        return out

    with _best_found_only():
        return asyncio.run(play())


def _with_budget(task, budget: int):
    return replace(task, params={**task.params, "budget": budget}, id=f"{task.id}@{budget}")


def plan(suites: list[str], scale: float, random_query: bool, parallel: bool) -> list[dict]:
    """The cells to run: one per (suite, task, agent[, thread budget])."""
    from clew.envs.suites import resolve

    cells = []
    for key in suites:
        for task in resolve(f"{SUITES[key]}:test"):
            full = GENERAL_RUNS if key == "general" else RUNS[task.env]
            runs = max(2, round(full * scale))
            agents = ["explore-exploit"] + (["random-query"] if random_query else [])
            for agent in agents:
                cells.append({"suite": key, "task": task, "agent": agent, "runs": runs, "p": 1})
            if parallel and key != "general":
                for p in (2, 3, 4):
                    cells.append({"suite": key, "task": task, "agent": "explore-exploit",
                                  "runs": runs, "p": p})
    return cells


def run_cells(cells: list[dict], jobs: int) -> list[list[float]]:
    def job(cell: dict) -> tuple[str, str, int]:
        task = cell["task"]
        if cell["p"] > 1:
            task = _with_budget(task, task.params["budget"] // cell["p"])
        return cell["agent"], task.to_json(), cell["runs"]

    if jobs <= 1:
        return [_rewards(*job(c)) for c in cells]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_rewards, *job(c)) for c in cells]
        return [f.result() for f in futures]


def _stats(values: list[float]) -> tuple[float, float]:
    from clew.envs.measures import mean_and_stderr

    mean, se, _ = mean_and_stderr(values)
    return mean, se


def row_key(row: dict) -> str:
    """The key of a row in ``--published``: suite/instance/N, or suite/family/N (general)."""
    what = row["family"] if row["suite"] == SUITES["general"] else row["instance"]
    return f"{row['suite']}/{what}/N{row['N']}"


def summarise(cells: list[dict], results: list[list[float]]) -> list[dict]:
    """Rows of the table: fixed instances per (instance, N); general sets per family."""
    from clew.agents.interventions import pooled_best_of_p

    rows: dict[tuple, dict] = {}
    general: dict[tuple, list[tuple[float, float, int]]] = {}
    for cell, values in zip(cells, results, strict=True):
        task, agent = cell["task"], cell["agent"]
        n = task.params["budget"]
        if cell["suite"] == "general":
            general.setdefault((task.env, n, agent), []).append((*_stats(values), len(values)))
            continue
        key = (cell["suite"], task.params.get("instance"), n)
        row = rows.setdefault(key, {"suite": SUITES[cell["suite"]], "family": FAMILY[task.env],
                                    "instance": task.params.get("instance"), "N": n,
                                    "baseline": PARAMS[task.env]})
        if cell["p"] > 1:
            row[f"pooled_p{cell['p']}"] = round(pooled_best_of_p(values, cell["p"]), 4)
        elif agent == "random-query":
            m, se = _stats(values)
            row.update(random_query_mean=round(m, 4), random_query_se=round(se, 4))
        else:
            m, se = _stats(values)
            row.update(mean=round(m, 4), se=round(se, 4), runs=len(values))
    out = list(rows.values())
    order = list(FAMILY)  # Hill, Tree, MaxSat
    for (env, n, agent), stats in sorted(general.items(),
                                         key=lambda kv: (order.index(kv[0][0]), kv[0][1:])):
        means = [m for m, _, _ in stats]
        mean = sum(means) / len(means)
        se = math.sqrt(sum(s * s for _, s, _ in stats)) / len(stats)
        sd = math.sqrt(sum((m - mean) ** 2 for m in means) / (len(means) - 1)) if len(
            means) > 1 else math.nan
        row = next((r for r in out if r["suite"] == SUITES["general"]
                    and r["family"] == FAMILY[env] and r["N"] == n), None)
        if row is None:
            row = {"suite": SUITES["general"], "family": FAMILY[env],
                   "instance": f"{len(stats)} instances", "N": n, "baseline": PARAMS[env]}
            out.append(row)
        if agent == "random-query":
            row.update(random_query_mean=round(mean, 4), random_query_se=round(se, 4))
        else:
            row.update(mean=round(mean, 4), se=round(se, 4), sd_inst=round(sd, 4),
                       runs=f"{len(stats)}x{stats[0][2]}")
    return out


def compare(rows: list[dict], published: dict[str, list]) -> None:
    for row in rows:
        key = row_key(row)
        if key not in published:
            continue
        p_mean, p_se = (list(published[key]) + [None])[:2]
        diff = row["mean"] - p_mean
        tol = row["se"] + p_se if p_se is not None else 2 * row["se"]
        row.update(published_mean=p_mean, published_se=p_se, diff=round(diff, 4),
                   within_se=abs(diff) <= tol)


def table(rows: list[dict]) -> str:
    has_pub = any("published_mean" in r for r in rows)
    has_rand = any("random_query_mean" in r for r in rows)
    has_pool = any("pooled_p2" in r for r in rows)
    head = ["suite", "family", "instance", "N", "runs", "baseline r ± SE"]
    head += ["published"] * has_pub + ["diff", "within SE"] * has_pub
    head += ["random query r ± SE"] * has_rand + ["pooled p=2/3/4"] * has_pool
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["suite"], r["family"], str(r["instance"]), str(r["N"]), str(r["runs"]),
                 f"{r['mean']:.3f} ± {r['se']:.3f}"
                 + (f" (sd over instances {r['sd_inst']:.3f})" if "sd_inst" in r else "")]
        if has_pub:
            if "published_mean" in r:
                se = r["published_se"]
                cells += [f"{r['published_mean']:.3f}" + (f" ± {se:.3f}" if se is not None else ""),
                          f"{r['diff']:+.3f}", "yes" if r["within_se"] else "no"]
            else:
                cells += ["—", "—", "—"]
        if has_rand:
            cells.append(f"{r['random_query_mean']:.3f} ± {r['random_query_se']:.3f}"
                         if "random_query_mean" in r else "—")
        if has_pool:
            cells.append("/".join(f"{r[f'pooled_p{p}']:.3f}" for p in (2, 3, 4))
                         if "pooled_p2" in r else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suites", default="main,additional,general",
                    help="comma list of main, additional, general (default: all three)")
    ap.add_argument("--runs-scale", type=float, default=1.0,
                    help="fraction of the paper's baseline run counts (default 1)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--random-query", action="store_true", help="add the random-query baseline")
    ap.add_argument("--parallel", action="store_true",
                    help="add pooled best-of-p estimates at budget N/p (fixed instances)")
    ap.add_argument("--published", type=Path, help="JSON of published rows to compare with")
    ap.add_argument("--table", type=Path, default=Path("baselines_003.md"),
                    help="where to write the markdown table (default baselines_003.md)")
    args = ap.parse_args(argv)
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    bad = [s for s in suites if s not in SUITES]
    if bad:
        print(f"error: unknown suite(s) {', '.join(bad)}; known: {', '.join(SUITES)}",
              file=sys.stderr)
        return 2
    published = {}
    if args.published:
        try:
            published = json.loads(args.published.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            print(f"error: --published {args.published}: {exc}", file=sys.stderr)
            return 2
    t0 = time.perf_counter()
    cells = plan(suites, args.runs_scale, args.random_query, args.parallel)
    rows = summarise(cells, run_cells(cells, args.jobs))
    compare(rows, published)
    for row in rows:
        print(json.dumps({"benchmark": "baselines_003", **row}), flush=True)
    args.table.write_text(table(rows))
    print(json.dumps({"benchmark": "baselines_003", "cells": len(cells),
                      "seconds": round(time.perf_counter() - t0, 1),
                      "table": str(args.table)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
