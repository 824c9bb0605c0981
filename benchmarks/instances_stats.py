"""Instance statistics behind ``docs/methods/instances.md``: grid-map openness, rooms
random walks. Prints one JSON line per row and writes the markdown tables to ``--table``.

* ``gridmap``: the open-cell distribution per preset (exploration level × DAG level) and
  generator version, over seeds ``0..seeds-1``: open cells / W·H (mean, min, 10th percentile,
  median, max), the mean open-cell count and the mean budget B = 3·|M|.
* ``rooms``: the random-walk baseline through the episode runner, per grid size
  and layout version: on the suites' frozen test layouts (3 per size, 10 runs each, the
  paper's protocol) and, for the family, on ``--layouts`` freshly generated layouts per size
  (seeds 50000.., ``--runs`` runs each). Columns: C, R^max, last-episode and mean-over-episodes
  gaps (total, exploration, exploitation; normalised by R^max), coverage (observation sets,
  rooms, objects), redundancy and sample efficiency; means with standard errors over runs.

Usage: ``python benchmarks/instances_stats.py [--part gridmap,rooms] [--seeds 200]
[--layouts 60] [--runs 2] [--table instances_stats.md]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
from pathlib import Path

ROOMS_COLUMNS = ("door_budget", "rmax", "gap_total", "gap_exploration", "gap_exploitation",
                 "gap_total_mean", "gap_exploration_mean", "coverage", "room_coverage",
                 "object_coverage", "redundancy", "sample_efficiency")


def gridmap_rows(seeds: int) -> list[dict]:
    from clew.envs.gridmap.generator import DAG_LEVELS, EXPLORATION_LEVELS, generate_instance

    rows = []
    for version in (1, 2):
        for level in EXPLORATION_LEVELS:
            for dag in DAG_LEVELS:
                fr, cells, budgets = [], [], []
                for seed in range(seeds):
                    inst = generate_instance({"exploration_level": level, "dag_level": dag,
                                              "generator_version": version}, seed)
                    fr.append(len(inst.cells) / (inst.width * inst.height))
                    cells.append(len(inst.cells))
                    budgets.append(inst.budget)
                fr.sort()
                rows.append({
                    "part": "gridmap", "version": version, "exploration": level, "dag": dag,
                    "grid": f"{inst.width}x{inst.height}", "seeds": seeds,
                    "open_mean": round(statistics.mean(fr), 3), "open_min": round(fr[0], 3),
                    "open_p10": round(fr[len(fr) // 10], 3),
                    "open_median": round(statistics.median(fr), 3), "open_max": round(fr[-1], 3),
                    "cells_mean": round(statistics.mean(cells), 1),
                    "budget_mean": round(statistics.mean(budgets), 1),
                })
    return rows


def _mean_se(xs: list[float]) -> tuple[float, float, int]:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    if not xs:
        return math.nan, math.nan, 0
    se = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else math.nan
    return statistics.mean(xs), se, len(xs)


async def _random_walks(tasks, runs: int) -> list[dict]:
    from clew.agents.heuristics.rooms_random_walk import RoomsRandomWalk
    from clew.runner.episodes import run_episode

    out = []
    for task in tasks:
        for r in range(runs):
            rec = await run_episode(RoomsRandomWalk(), task, key=f"{task.id}#{r}")
            m = dict(rec["metrics"])
            m["door_budget"] = task.params["layout"]["door_budget"]
            out.append(m)
    return out


def rooms_rows(n_layouts: int, runs: int) -> list[dict]:
    from clew.envs.registry import generate
    from clew.envs.suites import resolve

    suites = {1: "rooms-{n}x{n}", 2: "rooms-v2-{n}x{n}"}
    rows = []
    for version in (1, 2):
        for n in (4, 5, 7):
            samples = {"frozen test layouts": resolve(suites[version].format(n=n) + ":test")}
            if n_layouts:
                fresh = [generate("rooms", {"size": n, "generator_version": version}, 50000 + i)
                         for i in range(n_layouts)]
                samples[f"{n_layouts} generated layouts"] = fresh  # runs: the episode keys
            for what, tasks in samples.items():
                per_run = asyncio.run(_random_walks(tasks, 1 if what.startswith("frozen")
                                                    else runs))
                row = {"part": "rooms", "version": version, "size": f"{n}x{n}", "sample": what,
                       "runs": len(per_run)}
                for col in ROOMS_COLUMNS:
                    mean, se, k = _mean_se([float(m[col]) if m.get(col) is not None
                                            else math.nan for m in per_run])
                    row[col] = round(mean, 3)
                    row[col + "_se"] = round(se, 3)
                    if k != len(per_run):
                        row[col + "_n"] = k
                rows.append(row)
    return rows


def tables(rows: list[dict]) -> str:
    out = []
    grid = [r for r in rows if r["part"] == "gridmap"]
    if grid:
        out += [("Grid maps: open cells / W·H per preset and generator version "
                 f"(seeds 0–{grid[0]['seeds'] - 1})."), "",
                ("| version | exploration | DAG | grid | mean | min | p10 | median | max "
                 "| open cells | budget 3·|M| |"),
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in grid:
            out.append(f"| v{r['version']} | {r['exploration']} | {r['dag']} | {r['grid']} | "
                       f"{r['open_mean']:.2f} | {r['open_min']:.2f} | {r['open_p10']:.2f} | "
                       f"{r['open_median']:.2f} | {r['open_max']:.2f} | {r['cells_mean']:.1f} | "
                       f"{r['budget_mean']:.0f} |")
        out.append("")
    rooms = [r for r in rows if r["part"] == "rooms"]
    if rooms:
        heads = ["C", "R^max", "gap total (last)", "gap explore (last)", "gap exploit (last)",
                 "gap total (mean)", "gap explore (mean)", "coverage (obs sets)",
                 "room coverage", "object coverage", "redundancy", "sample efficiency"]
        out += ["Rooms: the random walk, mean ± SE over runs.", "",
                "| version | size | sample | runs | " + " | ".join(heads) + " |",
                "|" + "---|" * (4 + len(heads))]
        for r in rooms:
            cells = [f"{r[c]:.3g} ± {r[c + '_se']:.2g}" if c in ("door_budget", "rmax",
                                                                 "sample_efficiency")
                     else f"{r[c]:.3f} ± {r[c + '_se']:.3f}" for c in ROOMS_COLUMNS]
            out.append(f"| v{r['version']} | {r['size']} | {r['sample']} | {r['runs']} | "
                       + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="gridmap,rooms", help="gridmap, rooms or both")
    ap.add_argument("--seeds", type=int, default=200, help="grid-map seeds per preset")
    ap.add_argument("--layouts", type=int, default=60,
                    help="generated rooms layouts per size and version (0: frozen only)")
    ap.add_argument("--runs", type=int, default=2, help="random-walk runs per generated layout")
    ap.add_argument("--table", type=Path, default=Path("instances_stats.md"))
    args = ap.parse_args(argv)
    parts = {p.strip() for p in args.part.split(",") if p.strip()}
    if not parts or parts - {"gridmap", "rooms"}:
        print(f"error: --part {args.part!r}: choose from gridmap, rooms", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    rows = (gridmap_rows(args.seeds) if "gridmap" in parts else []) + (
        rooms_rows(args.layouts, args.runs) if "rooms" in parts else [])
    for row in rows:
        print(json.dumps({"benchmark": "instances_stats", **row}), flush=True)
    args.table.write_text(tables(rows))
    print(json.dumps({"benchmark": "instances_stats", "seconds": round(time.perf_counter() - t0,
                                                                        1),
                      "table": str(args.table)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
