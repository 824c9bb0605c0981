"""``clew train``: the objective's trainer built from the config, run, and its output saved
(docs/methods/exploratory-learning.md#training).

* ``objective: sft`` trains chats with TRL's ``SFTTrainer`` (:mod:`clew.training.sft`),
  ``objective: dpo`` preference pairs with ``DPOTrainer`` (:mod:`clew.training.dpo`).
* Runs under ``accelerate launch`` unchanged (the Trainer picks up DDP / FSDP / DeepSpeed);
  on a machine without CUDA it trains on CPU (``use_cpu``, fp32).
* Output: the adapter (LoRA) or the full model, with the tokenizer, in ``output_dir``;
  ``clew_train.json`` records the config, the base model and the loss curve; checkpoints go to
  ``output_dir/checkpoint-*`` every ``save_steps``. ``merge: true`` also writes a merged model
  to ``output_dir/merged`` (:mod:`clew.training.adapters`) that vLLM serves directly.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from pathlib import Path

from clew.training.adapters import merge_adapter
from clew.training.config import TrainConfig, TrainResult, resolve_model
from clew.training.dpo import build_dpo_trainer
from clew.training.sft import build_sft_trainer


def build_trainer(cfg: TrainConfig):
    """The objective's configured trainer (TRL's ``SFTTrainer`` or ``DPOTrainer``), its
    tokenizer, the base model path and the number of rows without a target.

    The base model is resolved first (a ``tiny:`` one built): the trainer's arguments start the
    process group of a distributed launch, after which transformers saves from rank 0 only, so a
    tiny model that another rank built then would have no weights."""
    base = resolve_model(cfg.model)
    return (build_dpo_trainer if cfg.objective == "dpo" else build_sft_trainer)(cfg, base)


@contextmanager
def train_threads(cfg: TrainConfig):
    """torch's threads set to ``cpu_threads`` while training on the CPU, restored after."""
    import torch

    threads = torch.get_num_threads()
    if cfg.cpu_threads and (cfg.device == "cpu" or not torch.cuda.is_available()):
        torch.set_num_threads(cfg.cpu_threads)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def train(cfg: TrainConfig) -> TrainResult:
    """Fine-tune ``cfg.model`` on ``cfg.data``; save the adapter or model (and merge)."""
    with train_threads(cfg):
        return _train(cfg)


@contextmanager
def labelled_positions_only(device):
    """On the CPU, TRL's fused LM head scores only the positions that carry a label.

    TRL (``trl.trainer.utils``) scores only those on GPUs and every position elsewhere, so that a
    compiled device (Neuron) sees one tile shape; the loss, its gradient and the logged metrics are
    the same either way. An eager CPU compiles nothing, and in a chat sample the label is the
    answer, a small part of it: scoring the prompt too took half of a step of the tiny model on
    TextMiniGrid samples (docs/scale-out.md#training-throughput). A TRL without that switch keeps
    its own path.
    """
    import trl.trainer.utils as trl_utils

    decide = getattr(trl_utils, "_use_triton", None)
    if device.type != "cpu" or decide is None:
        yield
        return
    trl_utils._use_triton = lambda dev: dev.type == "cpu" or decide(dev)
    try:
        yield
    finally:
        trl_utils._use_triton = decide


def run_trainer(trainer, resume_from_checkpoint: str | bool | None = None):
    """``trainer.train()`` with the CPU's labelled-positions LM head."""
    with labelled_positions_only(trainer.args.device):
        return trainer.train(resume_from_checkpoint=resume_from_checkpoint)


def _train(cfg: TrainConfig) -> TrainResult:
    trainer, tokenizer, base, empty = build_trainer(cfg)
    dataset = trainer.train_dataset
    start = time.perf_counter()
    out = run_trainer(trainer, cfg.trainer("resume_from_checkpoint"))
    seconds = time.perf_counter() - start
    trainer.save_model(cfg.output_dir)
    losses = [float(h["loss"]) for h in trainer.state.log_history if "loss" in h]
    metrics = {**out.metrics, "global_step": out.global_step, "wall_s": round(seconds, 3),
               "samples": len(dataset), "rows_without_target": empty,
               "steps_per_s": round(out.global_step / seconds, 3) if seconds else None}
    result = TrainResult(Path(cfg.output_dir), None, losses, metrics)
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(cfg.output_dir)
        record = {"config": cfg.model_dump(), "base_model": base, "method": cfg.method,
                  "objective": cfg.objective,
                  "losses": losses, "metrics": metrics}
        Path(cfg.output_dir, "clew_train.json").write_text(json.dumps(record, indent=1))
        if cfg.merge and cfg.method == "lora":
            result.merged_dir = merge_adapter(cfg.output_dir, Path(cfg.output_dir) / "merged",
                                              base=base)
    return result
