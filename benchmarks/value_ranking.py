"""Do learned values rank the states of a search? (docs/methods/exploratory-learning.md#learned-value)

``clew diagnose`` measures the value a search ran with, on that search's own nodes. To compare
value models without running a search with each, this grades the same held-out nodes with every
model given: the nodes of a diagnosed run (``RUN/diagnose/nodes.jsonl``: ground-truth
``progress`` per node) joined with their prompts (``clew data RUN 'subsets=[values]'`` with the
window the models were trained on: ``values.jsonl``), a seeded sample of ``--nodes`` of them,
each graded as a search would (:meth:`clew.agents.distilled_value.DistilledValue.grade_chat`).
The sample takes whole trees (seeded order) until it holds ``--nodes``, because a search compares
the states of one tree: ``spearman_within`` is the mean Spearman over the sampled trees whose
nodes differ in progress, beside the Spearman over all nodes (which also rewards telling an
early state of an episode from a late one). One JSON line per model: both Spearmans, Pearson,
MAE, the number of distinct grades and of nodes; a first line with the run's own value on the
same nodes.

  python benchmarks/value_ranking.py --run RUN --values DATA/values.jsonl \\
      --model hf:runs/value/a --model hf:runs/value/b [--nodes 600] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from pathlib import Path

import numpy as np
from clew.agents.distilled_value import DistilledValue
from clew.agents.options import DistilledValueOptions
from clew.records.jsonl import read_jsonl
from clew.reports.diagnose import spearman


def joined(run: Path, values: Path) -> list[dict]:
    """Value rows of the diagnosed nodes: ``progress`` and the run's ``value`` beside the
    ``prompt``; nodes without a prompt (an ended episode) are left out."""
    truth = {(r["episode"], r["t"], r["node"]): r
             for r in read_jsonl(run / "diagnose" / "nodes.jsonl") if r.get("row") == "value"}
    out = []
    for row in read_jsonl(values):
        node = truth.get((row["episode"], row["t"], row["node"]))
        if node is not None and node.get("progress") is not None:
            out.append({"prompt": row["prompt"], "progress": node["progress"],
                        "run_value": node.get("value"), "tree": (row["episode"], row["t"])})
    return out


def sample_trees(rows: list[dict], nodes: int, seed: int) -> list[dict]:
    """Whole trees, in a seeded order, until ``nodes`` rows are taken."""
    trees: dict[tuple, list[dict]] = {}
    for row in rows:
        trees.setdefault(tuple(row["tree"]), []).append(row)
    order = sorted(trees)
    random.Random(seed).shuffle(order)
    out: list[dict] = []
    for key in order:
        if len(out) >= nodes:
            break
        out += trees[key]
    return out


def stats(name: str, values: list[float | None], progress: list[float],
          trees: list | None = None) -> dict:
    trees = trees or [0] * len(values)
    kept = [(v, p, t) for v, p, t in zip(values, progress, trees) if v is not None]
    v, p = (np.array([k[i] for k in kept], dtype=float) for i in (0, 1))
    pearson = float(np.corrcoef(v, p)[0, 1]) if len(v) > 2 and v.std() and p.std() else None
    by_tree: dict = {}
    for x, y, t in kept:
        by_tree.setdefault(t, []).append((x, y))
    within = [spearman([x for x, _ in pts], [y for _, y in pts]) for pts in by_tree.values()]
    within = [w for w in within if not np.isnan(w)]
    return {"value": name, "nodes": len(kept), "unknown": len(values) - len(kept),
            "spearman": spearman(list(v), list(p)),
            "spearman_within": float(np.mean(within)) if within else None,
            "trees": len(within), "pearson": pearson,
            "mae": float(np.abs(v - p).mean()) if len(v) else None,
            "distinct": len(set(np.round(v, 3)))}


async def grade_all(model: str, rows: list[dict], n_samples: int, seed: int) -> list[float | None]:
    value = DistilledValue(DistilledValueOptions(model=model, n_samples=n_samples,
                                                 max_tokens=16, constrain=True))
    out = []
    for i, row in enumerate(rows):
        out.append((await value.grade_chat(row["prompt"], seed + i)).v)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", type=Path, required=True, help="a run `clew diagnose` has read")
    ap.add_argument("--values", type=Path, required=True, help="clew data's values.jsonl of it")
    ap.add_argument("--model", action="append", required=True, help="a value model spec")
    ap.add_argument("--nodes", type=int, default=600)
    ap.add_argument("--samples", type=int, default=8, help="grades drawn per node")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rows = joined(args.run, args.values)
    if not rows:
        raise SystemExit(f"error: no node of {args.run}/diagnose/nodes.jsonl has a row in "
                         f"{args.values}")
    rows = sample_trees(rows, args.nodes, args.seed)
    progress, trees = [r["progress"] for r in rows], [r["tree"] for r in rows]
    print(json.dumps(stats(f"{args.run} (its own)", [r["run_value"] for r in rows], progress,
                           trees)))
    for model in args.model:
        graded = asyncio.run(grade_all(model, rows, args.samples, args.seed))
        print(json.dumps(stats(model, graded, progress, trees)))


if __name__ == "__main__":
    main()
