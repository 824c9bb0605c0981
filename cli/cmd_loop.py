"""``clew loop --config FILE [key=value ...]``: search on the train tasks -> EL/IL data ->
fine-tune -> evaluate the checkpoints beside the baselines, in rounds (docs/methods/loop.md).

--config takes a file or a preset shipped with clew (configs/loop/): demo, cpu-experiment,
cpu-experiment-oracle-free, cpu-experiment-one-model, cpu-experiment-history,
cpu-experiment-one-turn. Each round is a folder
of run directories under --out; --resume goes on with a loop that stopped, or adds rounds
(rounds=N).

Examples:
  clew loop --config demo --out runs/demo
  clew loop --config cpu-experiment --out runs/cpu-exp
  clew loop --config cpu-experiment --out runs/cpu-exp --resume rounds=2
"""

from __future__ import annotations

import argparse
from pathlib import Path

from clew.cli.model_check import check_agent_models, check_base_model
from clew.loop.pipeline import LoopConfig, fill, run_loop, train_config
from clew.runner.config import load_config


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True,
                   help="YAML config (fields of eval.loop.LoopConfig) or a preset name")
    p.add_argument("--out", help="output folder (default: the config's out)")
    p.add_argument("--resume", action="store_true",
                   help="go on with the loop in --out: finished stages are skipped")
    p.add_argument("--no-html", action="store_true", help="skip the per-family HTML reports")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config overrides, e.g. rounds=2 limit_test=1 train.sft.max_steps=50")


def check_loop_models(cfg: LoopConfig) -> None:
    """Every model the loop names, before its first stage: the agents' (a ``{el}`` / ``{il}``
    model of a later round is not there yet) and the base model it trains."""
    out = {"out": cfg.out}
    agents = [("search", cfg.search), ("next_search", cfg.next_search)]
    agents += [(f"baselines.{i}", a) for i, a in enumerate(cfg.baselines)]
    agents += [(f"round_agents.{i}", a) for i, a in enumerate(cfg.round_agents)]
    for field, spec in agents:
        if spec is not None:
            check_agent_models(spec.agent, fill(spec.agent_options, out),
                               f"{field}.agent_options")
    check_base_model(str(train_config(cfg, Path("-"), Path("-"), Path(cfg.out)).model),
                     "train.model")


def run(args: argparse.Namespace) -> int:
    base = {"out": args.out} if args.out else None
    cfg = load_config(LoopConfig, args.config, list(args.overrides), base=base, presets="loop")
    check_loop_models(cfg)
    loop = run_loop(cfg, resume=args.resume, say=lambda s: print(f"[loop] {s}", flush=True),
                    html=not args.no_html)
    print()
    print((loop.out / "report.md").read_text(), end="")
    return 0
