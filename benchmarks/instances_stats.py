"""Instance statistics behind ``docs/methods/instances.md``: grid-map openness, rooms
random walks. Prints one JSON line per row and writes the markdown tables to ``--table``.

* ``gridmap``: the open-cell distribution per preset (exploration level × DAG level) and
  generator version, over seeds ``0..seeds-1``: open cells / W·H (mean, min, 10th percentile,
  median, max), the mean open-cell count and the mean budget B = 3·|M|.
* ``rooms``: the random-walk baseline through the episode runner, per grid size
  and layout version (``--versions``): on the suites' frozen test layouts (3 per size, 10 runs
  each, the paper's protocol) and, for the family, on ``--layouts`` freshly generated layouts
  per size (seeds 50000.., ``--runs`` runs each), and pooled over the sizes. Columns: C, R^max,
  last-episode and mean-over-episodes gaps (total, exploration, exploitation; normalised by
  R^max), coverage (observation sets, rooms, objects), redundancy, sample efficiency and
  steps per run; means with standard errors over runs.
* ``rooms-variants``: the same over version 3's family with other options (pooled over the
  sizes): the door budget C = ⌈f · e⌉ for f in 1, 1.25, 1.5, 1.75, 2, then a start within the
  radius + 4 and a uniformly random start.
* ``rooms-typical``: the family means behind version 3's typical-test-layout rule.

Usage: ``python benchmarks/instances_stats.py [--part gridmap,rooms,rooms-variants,rooms-typical]
[--seeds 200] [--layouts 60] [--runs 2] [--versions 1,2,3] [--table instances_stats.md]``.
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
                 "object_coverage", "redundancy", "sample_efficiency", "valid_steps")
ROOMS_SUITES = {1: "rooms-{n}x{n}", 2: "rooms-v2-{n}x{n}", 3: "rooms-v3-{n}x{n}"}
SIZES = (4, 5, 7)
#: version 3's family under other options: the door budget factor f (C = ceil(f · e)), then
#: other start rules at f = 1.5
VARIANTS = ([{"door_budget_factor": f} for f in (1.0, 1.25, 1.5, 1.75, 2.0)]
            + [{"centre_slack": 4}, {"start": "random"}])


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
    """Metrics of ``runs`` random walks per task through the episode runner."""
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


def _stats_row(per_run: list[dict], **head) -> dict:
    row = {"part": "rooms", **head, "runs": len(per_run)}
    for col in ROOMS_COLUMNS:
        mean, se, k = _mean_se([float(m[col]) if m.get(col) is not None else math.nan
                                for m in per_run])
        row[col] = round(mean, 3)
        row[col + "_se"] = round(se, 3)
        if k != len(per_run):
            row[col + "_n"] = k
    return row


def rooms_rows(n_layouts: int, runs: int, versions: tuple[int, ...] = (1, 2, 3)) -> list[dict]:
    """Per version, size and sample (frozen test layouts, generated layouts), and pooled over
    the sizes (equal runs per size, so the pooled mean is the mean of the sizes' means)."""
    from clew.envs.registry import generate
    from clew.envs.suites import resolve

    rows = []
    for version in versions:
        pooled: dict[str, list[dict]] = {}
        for n in SIZES:
            samples = {"frozen test layouts": resolve(ROOMS_SUITES[version].format(n=n) +
                                                      ":test")}
            if n_layouts:
                fresh = [generate("rooms", {"size": n, "generator_version": version}, 50000 + i)
                         for i in range(n_layouts)]
                samples[f"{n_layouts} generated layouts"] = fresh  # runs: the episode keys
            for what, tasks in samples.items():
                per_run = asyncio.run(_random_walks(tasks, 1 if what.startswith("frozen")
                                                    else runs))
                pooled.setdefault(what, []).extend(per_run)
                rows.append(_stats_row(per_run, version=version, size=f"{n}x{n}", sample=what))
        rows += [_stats_row(per_run, version=version, size="pooled", sample=what)
                 for what, per_run in pooled.items()]
    return rows


def rooms_variant_rows(n_layouts: int, runs: int) -> list[dict]:
    """Version 3's family under the options of :data:`VARIANTS`: what the door budget and the
    start rule do to the random walk's statistics, sample efficiency included (pooled over the
    sizes)."""
    from clew.envs.registry import generate

    rows = []
    for options in VARIANTS:
        per_run = []
        for n in SIZES:
            tasks = [generate("rooms", {"size": n, "generator_version": 3, **options}, 50000 + i)
                     for i in range(n_layouts)]
            per_run += asyncio.run(_random_walks(tasks, runs))
        rows.append(_stats_row(per_run, version=3, size="pooled", options=options,
                               sample=f"{n_layouts} generated layouts per size"))
    return rows


def rooms_typical_rows(n_layouts: int) -> list[dict]:
    """The family means behind version 3's typical test layouts (FAMILY_WALK in
    clew.envs.rooms.generator): random_walk_stats with 10 walks on ``n_layouts`` layouts from
    seed 50000 and as many from seed 80000, per size."""
    import statistics

    from clew.envs.rooms.generator import make_layout, random_walk_stats

    rows = []
    for n in SIZES:
        stats = [random_walk_stats(make_layout(n, first + i, generator_version=3), walks=10)
                 for first in (50000, 80000) for i in range(n_layouts)]
        rows.append({"part": "rooms-typical", "size": f"{n}x{n}", "layouts": len(stats),
                     "gap_exploration": round(statistics.mean(s[0] for s in stats), 3),
                     "coverage": round(statistics.mean(s[1] for s in stats), 3)})
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
                 "room coverage", "object coverage", "redundancy", "sample efficiency",
                 "steps per run"]
        out += ["Rooms: the random walk, mean ± SE over runs.", "",
                "| version | options | size | sample | runs | " + " | ".join(heads) + " |",
                "|" + "---|" * (5 + len(heads))]
        for r in rooms:
            cells = [f"{r[c]:.3g} ± {r[c + '_se']:.2g}" if c in ("door_budget", "rmax",
                                                                 "sample_efficiency",
                                                                 "valid_steps")
                     else f"{r[c]:.3f} ± {r[c + '_se']:.3f}" for c in ROOMS_COLUMNS]
            options = ", ".join(f"{k} {v}" for k, v in r.get("options", {}).items())
            out.append(f"| v{r['version']} | {options or 'as the version'} | {r['size']} | "
                       f"{r['sample']} | {r['runs']} | " + " | ".join(cells) + " |")
        out.append("")
    typical = [r for r in rows if r["part"] == "rooms-typical"]
    if typical:
        out += [("Rooms v3 family: random-walk means per layout (10 walks), the typical-test "
                 "rule's centres."), "", "| size | layouts | gap explore | coverage |",
                "|---|---|---|---|"]
        out += [f"| {r['size']} | {r['layouts']} | {r['gap_exploration']:.3f} | "
                f"{r['coverage']:.3f} |" for r in typical]
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="gridmap,rooms",
                    help="any of gridmap, rooms, rooms-variants, rooms-typical (comma-separated)")
    ap.add_argument("--seeds", type=int, default=200, help="grid-map seeds per preset")
    ap.add_argument("--layouts", type=int, default=60,
                    help="generated rooms layouts per size and version (0: frozen only)")
    ap.add_argument("--runs", type=int, default=2, help="random-walk runs per generated layout")
    ap.add_argument("--versions", default="1,2,3", help="rooms generator versions (rooms part)")
    ap.add_argument("--table", type=Path, default=Path("instances_stats.md"))
    args = ap.parse_args(argv)
    parts = {p.strip() for p in args.part.split(",") if p.strip()}
    known = {"gridmap", "rooms", "rooms-variants", "rooms-typical"}
    if not parts or parts - known:
        print(f"error: --part {args.part!r}: choose from {', '.join(sorted(known))}",
              file=sys.stderr)
        return 2
    try:
        versions = tuple(int(v) for v in args.versions.split(","))
    except ValueError:
        print(f"error: --versions {args.versions!r}: comma-separated integers", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    rows = []
    if "gridmap" in parts:
        rows += gridmap_rows(args.seeds)
    if "rooms" in parts:
        rows += rooms_rows(args.layouts, args.runs, versions)
    if "rooms-variants" in parts:
        rows += rooms_variant_rows(args.layouts, args.runs)
    if "rooms-typical" in parts:
        rows += rooms_typical_rows(args.layouts)
    for row in rows:
        print(json.dumps({"benchmark": "instances_stats", **row}), flush=True)
    args.table.write_text(tables(rows))
    print(json.dumps({"benchmark": "instances_stats", "seconds": round(time.perf_counter() - t0,
                                                                        1),
                      "table": str(args.table)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
