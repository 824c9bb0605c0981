"""``clew demo``: the loop on the embedded defaults, on a CPU machine with no model weights.

Stage 1 (this version): heuristic agents on a small grid-map suite, with success rate and the
exploration/exploitation errors of spec_000, printed as one comparison table.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from clew.eval.config import EvalConfig
from clew.eval.evaluate import evaluate
from clew.eval.summary import summary_table

# (run name, agent, agent options, suite)
HEURISTIC_RUNS = [
    ("random", "random", {}, "gridmap-mini:test"),
    ("frontier", "frontier", {}, "gridmap-mini:test"),
]


def run_demo(out: Path, quick: bool = False) -> int:
    start = time.perf_counter()
    if out.exists():
        shutil.rmtree(out)  # the demo always starts fresh
    rows = []
    for name, agent, options, suite in HEURISTIC_RUNS:
        cfg = EvalConfig(agent=agent, agent_options=options, suite=suite,
                         out=str(out / name), concurrency=4, repeats=1 if quick else 3)
        print(f"[demo] {name}: {agent} on {suite}", flush=True)
        run, agg = evaluate(cfg, progress=False)
        rows.append((name, agg))
    print()
    print("Heuristic agents (no LM): random = uniform over admissible moves; frontier = BFS to the")
    print("nearest pending task or unexplored cell from its own map of what it has seen.")
    print()
    print(summary_table(rows), end="")
    print(f"\nruns written to {out}/ in {time.perf_counter() - start:.1f} s")
    return 0
