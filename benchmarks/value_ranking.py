"""Do learned values rank the states of a search? (docs/methods/exploratory-learning.md#learned-value)

``clew diagnose`` measures the value a search ran with, on that search's own nodes. To compare
value models without running a search with each, this grades the same held-out nodes with every
model given: the nodes of a diagnosed run (``RUN/diagnose/nodes.jsonl``: ground-truth
``progress`` per node) joined with their prompts (``clew data RUN 'subsets=[values]'`` with the
window the models were trained on: ``values.jsonl``), a seeded sample of ``--nodes`` of them,
each graded as a search would (:meth:`clew.agents.distilled_value.DistilledValue.grade_chat`).
One JSON line per model: Spearman and Pearson against progress, MAE, the share of distinct
grades, the number of nodes; a first line with the run's own value on the same nodes.

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
                        "run_value": node.get("value")})
    return out


def stats(name: str, values: list[float | None], progress: list[float]) -> dict:
    pairs = [(v, p) for v, p in zip(values, progress) if v is not None]
    v, p = (np.array(x, dtype=float) for x in zip(*pairs)) if pairs else (np.array([]),) * 2
    pearson = float(np.corrcoef(v, p)[0, 1]) if len(v) > 2 and v.std() and p.std() else None
    return {"value": name, "nodes": len(pairs), "unknown": len(values) - len(pairs),
            "spearman": spearman(list(v), list(p)), "pearson": pearson,
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
    rows = random.Random(args.seed).sample(rows, min(args.nodes, len(rows)))
    progress = [r["progress"] for r in rows]
    print(json.dumps(stats(f"{args.run} (its own)", [r["run_value"] for r in rows], progress)))
    for model in args.model:
        graded = asyncio.run(grade_all(model, rows, args.samples, args.seed))
        print(json.dumps(stats(model, graded, progress)))


if __name__ == "__main__":
    main()
