"""``clew train --config FILE [key=value ...]``: LoRA / full SFT with TRL (:mod:`clew.training.train`);
with ``objective=dpo``, DPO on ``clew data``'s preference pairs (:mod:`clew.training.dpo`).

Runs as is or under ``accelerate launch -m clew.cli train ...`` on several GPUs.
``--merge-only ADAPTER --out DIR`` merges a trained adapter into its base model instead.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from clew.agents.lm.spec import ModelSpecError
from clew.cli.model_check import check_base_model
from clew.runner.config import ConfigError, load_config
from clew.training.adapters import merge_adapter
from clew.training.config import TrainConfig
from clew.training.train import train


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML config (fields of training.config.TrainConfig) or the name "
                                    "of a preset shipped with clew: lora-tiny, lora-7b, "
                                    "full-tiny (configs/train/)")
    p.add_argument("--data", help="dataset folder or .jsonl (clew data output; pairs for dpo)")
    p.add_argument("--model", help="base model: PATH, hub id, hf:PATH or tiny:PATH")
    p.add_argument("--out", dest="output_dir", help="output folder (adapter or model)")
    p.add_argument("--merge", action="store_true", default=None,
                   help="after training, also write OUT/merged (base + adapter)")
    p.add_argument("--merge-only", metavar="ADAPTER",
                   help="do not train: merge ADAPTER into its base model and save to --out")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config overrides, e.g. max_steps=50 lora.r=8 report_to=[tensorboard]")


def config(args: argparse.Namespace):
    flags = {k: getattr(args, k) for k in ("data", "model", "output_dir", "merge")
             if getattr(args, k, None) is not None}
    return load_config(TrainConfig, args.config, list(args.overrides), base=flags,
                       presets="train")


def run(args: argparse.Namespace) -> int:
    if args.merge_only:
        if not args.output_dir:
            raise ConfigError("--merge-only needs --out DIR for the merged model")
        if not (Path(args.merge_only) / "adapter_config.json").exists():
            raise ModelSpecError(f"--merge-only: {args.merge_only} is not a LoRA adapter folder "
                                 f"(no adapter_config.json)")
        if args.model:
            check_base_model(args.model, "--model")
        out = merge_adapter(args.merge_only, args.output_dir,
                            base=args.model.removeprefix("hf:") if args.model else None)
        print(f"merged model written to {out}")
        return 0
    from accelerate import PartialState

    cfg = config(args)
    check_base_model(cfg.model)
    result = train(cfg)
    # under `accelerate launch` every process gets here; the first one wrote the output and
    # speaks for all, and each leaves its process group before it exits
    state = PartialState()
    state.destroy_process_group()
    if not state.is_main_process:
        return 0
    m = result.metrics
    first = f"{result.losses[0]:.3f}" if result.losses else "?"
    last = f"{result.losses[-1]:.3f}" if result.losses else "?"
    print(f"trained {m.get('global_step')} step(s) on {m.get('samples')} sample(s) in "
          f"{m.get('wall_s')} s ({m.get('steps_per_s')} steps/s); loss {first} -> {last}")
    print(f"{'adapter' if cfg.method == 'lora' else 'model'} written to {result.output_dir}"
          + (f"; merged model in {result.merged_dir}" if result.merged_dir else ""))
    return 0
