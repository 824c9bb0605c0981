"""``clew loop --config FILE [key=value ...]``: search on the train tasks -> EL/IL data ->
fine-tune -> evaluate the checkpoints beside the baselines, in rounds (docs/methods/loop.md).

--config takes a file or a preset shipped with clew (configs/loop/): demo, cpu-experiment,
cpu-experiment-one-model, cpu-experiment-history, cpu-experiment-one-turn. Each round is a folder
of run directories under --out; --resume goes on with a loop that stopped, or adds rounds
(rounds=N).

Examples:
  clew loop --config demo --out runs/demo
  clew loop --config cpu-experiment --out runs/cpu-exp
  clew loop --config cpu-experiment --out runs/cpu-exp --resume rounds=2
"""

from __future__ import annotations

import argparse

from clew.loop.pipeline import LoopConfig, run_loop
from clew.runner.config import load_config


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True,
                   help="YAML config (fields of eval.loop.LoopConfig) or a preset name")
    p.add_argument("--out", help="output folder (default: the config's out)")
    p.add_argument("--resume", action="store_true",
                   help="go on with the loop in --out: finished stages are skipped")
    p.add_argument("--no-html", action="store_true", help="skip the per-family HTML reports")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config overrides, e.g. rounds=2 limit_test=1 train.max_steps=50")


def run(args: argparse.Namespace) -> int:
    base = {"out": args.out} if args.out else None
    cfg = load_config(LoopConfig, args.config, list(args.overrides), base=base, presets="loop")
    loop = run_loop(cfg, resume=args.resume, say=lambda s: print(f"[loop] {s}", flush=True),
                    html=not args.no_html)
    print()
    print((loop.out / "report.md").read_text(), end="")
    return 0
