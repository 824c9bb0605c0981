"""Supervised fine-tuning on EL / IL chats: TRL ``SFTTrainer`` with PEFT LoRA or full weights
(docs/methods/exploratory-learning.md#samples-and-loss-weights, docs/scale-out.md#training-throughput).

* Data: a chat dataset (``clew data`` output folder or a JSONL of ``{"messages": [...]}``).
  Per-turn weights become TRL's masks: each row is split into a conversational ``prompt`` (every
  message before the first weighted assistant turn) and ``completion`` (the rest), and the loss
  runs on assistant tokens of the completion only (``completion_only_loss`` and
  ``assistant_only_loss``, which needs ``{% generation %}`` markers in the chat template; TRL
  patches the templates of the common model families itself). A weight-0 assistant turn after a
  weighted one cannot be expressed this way and is an error naming the row.
* Batches: a step's ``batch_size x grad_accum`` random samples are cut into ``grad_accum``
  micro-batches of like lengths and about equal tokens (transformers' ``batch_rebalance``,
  seeded with the run's seed), and on the CPU TRL's LM head scores only the labelled positions:
  the same step, without padding or prompt scoring (docs/scale-out.md#training-throughput).
* ``batch_by_env``: batches of one env each (:class:`EnvBatches`), where envs' samples differ
  in length by an order of magnitude (docs/methods/loop.md#history-per-family). On the CPU
  experiment's mixed data the grid-map rule did not come in the same steps as with random
  batches (measured there), so nothing uses it by default.

The config is :class:`clew.training.config.TrainConfig`; :mod:`clew.training.train` runs it.
"""

from __future__ import annotations

import importlib.util
import random
from typing import Any

from clew.training.config import (
    SFT_DEFAULTS,
    TrainConfig,
    TrainError,
    make_trainer,
    trainer_args,
    trl_config,
)
from clew.training.datasets import load_chat_dataset


# --- data ---------------------------------------------------------------------------------------
def to_prompt_completion(messages: list[dict[str, Any]], where: str = "row"
                         ) -> dict[str, list[dict[str, str]]] | None:
    """Split a weighted chat into TRL's conversational prompt / completion (None: no target).

    An assistant message without a weight counts as weight 1 (plain chat data)."""
    def weighted(m):
        return m.get("role") == "assistant" and (m.get("weight") is None or m["weight"] > 0)

    first = next((i for i, m in enumerate(messages) if weighted(m)), None)
    if first is None:
        return None
    for i, m in enumerate(messages[first:], first):
        if m.get("role") == "assistant" and not weighted(m):
            raise TrainError(f"{where}: assistant message {i} has weight 0 after a weighted "
                             f"assistant message; only a weighted suffix can be trained")
    clean = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
    return {"prompt": clean[:first], "completion": clean[first:]}


def prepare_dataset(cfg: TrainConfig):
    """The training set in TRL's prompt/completion form, and how many rows had no target."""
    from datasets import Dataset

    ds = load_chat_dataset(cfg.data)
    if cfg.envs is not None:
        if "env" not in ds.column_names:
            raise TrainError(f"envs: dataset {cfg.data} does not name its rows' env "
                             "(clew data output does)")
        wanted = set(cfg.envs)
        ds = ds.filter(lambda row: row["env"] in wanted)
        if not len(ds):
            raise TrainError(f"envs: dataset {cfg.data} has no sample of {sorted(wanted)}")
    if cfg.limit is not None:
        ds = ds.select(range(min(cfg.limit, len(ds))))
    if cfg.batch_by_env and ("env" not in ds.column_names or not all(ds["env"])):
        raise TrainError(f"batch_by_env: dataset {cfg.data} does not name every row's env "
                         "(clew data output does)")
    rows, empty = [], 0
    for i, row in enumerate(ds):
        pc = to_prompt_completion(row["messages"], f"{cfg.data} row {i}")
        if pc is None:
            empty += 1
        else:
            rows.append({**pc, "env": row["env"]} if cfg.batch_by_env else pc)
    if not rows:
        raise TrainError(f"dataset {cfg.data}: no row has a weighted assistant turn to train on")
    return Dataset.from_list(rows), empty


def sft_config(cfg: TrainConfig):
    """TRL ``SFTConfig``: clew's derived settings and defaults, then the ``sft`` section.

    Micro-batches are balanced by tokens unless the ``sft`` section names another
    ``train_sampling_strategy`` (or ``batch_by_env`` brings its own sampler): transformers'
    ``batch_rebalance`` draws each optimizer step's ``per_device_train_batch_size x
    gradient_accumulation_steps`` samples at random, as the default sampler does, then sorts them
    by length and cuts them into ``gradient_accumulation_steps`` micro-batches of about equal
    cost. A step trains on the same random samples, with the loss averaged over the step's
    tokens, and hardly any padding (docs/scale-out.md#training-throughput).
    """
    from trl import SFTConfig

    args = trainer_args(cfg)
    defaults = dict(SFT_DEFAULTS)
    if not cfg.batch_by_env:
        defaults["train_sampling_strategy"] = "batch_rebalance"
    kernels = gpu_kernels(args["use_cpu"], args["model_init_kwargs"]["dtype"],
                          installed=lambda name: importlib.util.find_spec(name) is not None)
    if "attn_implementation" in kernels:
        args["model_init_kwargs"] = {**args["model_init_kwargs"],
                                     "attn_implementation": kernels.pop("attn_implementation")}
    defaults.update(kernels)
    return trl_config(SFTConfig, "sft", cfg.sft, args, defaults)


def gpu_kernels(use_cpu: bool, dtype: str, installed) -> dict[str, Any]:
    """Faster kernels on a GPU where their package is installed; none is required.

    FlashAttention 2 (``flash_attn``; half precision only) attends within each sample of a padded
    batch without computing the padding; Liger's layer kernels (``liger_kernel``: RMSNorm, SwiGLU,
    rotary embedding) fuse what the model runs as several. The fused linear cross-entropy is TRL's
    own LM head already, which never builds the logits (docs/scale-out.md#training-throughput).
    """
    if use_cpu:
        return {}
    out: dict[str, Any] = {}
    if dtype != "float32" and installed("flash_attn"):
        out["attn_implementation"] = "flash_attention_2"
    if installed("liger_kernel"):
        out["use_liger_kernel"] = True
    return out


# --- batches of one env -------------------------------------------------------------------------
class EnvBatches:
    """A sampler whose consecutive runs of ``batch_size`` indices share a group (an env).

    Each epoch shuffles every group, cuts it into batches (the last one topped up with other
    samples of the group, so a batch never spans two groups), and shuffles the batches; the
    mix of envs over an epoch is the data's own. Deterministic in ``seed`` and the epoch."""

    def __init__(self, groups: list[str], batch_size: int, seed: int = 0):
        self.members: dict[str, list[int]] = {}
        for i, g in enumerate(groups):
            self.members.setdefault(g, []).append(i)
        self.batch_size, self.seed, self.epoch = batch_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def batches(self) -> list[list[int]]:
        rng = random.Random(f"{self.seed}/{self.epoch}")
        out = []
        for group in sorted(self.members):
            idx = rng.sample(self.members[group], len(self.members[group]))
            short = -len(idx) % self.batch_size
            idx += [rng.choice(self.members[group]) for _ in range(short)]
            out += [idx[k:k + self.batch_size] for k in range(0, len(idx), self.batch_size)]
        rng.shuffle(out)
        return out

    def __iter__(self):
        order = [i for batch in self.batches() for i in batch]
        self.epoch += 1
        return iter(order)

    def __len__(self) -> int:
        return sum(-(-len(m) // self.batch_size) * self.batch_size for m in self.members.values())


def sampled(trainer_cls: type, by_env: bool) -> type:
    """``trainer_cls`` whose training batches come from :class:`EnvBatches` over the prepared
    dataset's ``env`` column (``by_env``; read once, before the Trainer drops columns the model
    lacks), or from its own sampler seeded with the run's seed: transformers' token-balanced
    sampler draws its steps with a fixed seed of its own, so runs with other seeds would see the
    same order."""

    class SampledTrainer(trainer_cls):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.batch_envs = list(self.train_dataset["env"]) if by_env else None

        def _get_train_sampler(self, train_dataset=None):
            if self.batch_envs is not None:
                return EnvBatches(self.batch_envs, self._train_batch_size, self.args.seed)
            sampler = super()._get_train_sampler(train_dataset)
            if self.args.train_sampling_strategy == "batch_rebalance":
                sampler.seed = self.args.data_seed
            return sampler

    return SampledTrainer


def build_sft_trainer(cfg: TrainConfig, base: str):
    """The configured TRL ``SFTTrainer`` (data prepared, masks built) on the base model ``base``,
    its tokenizer, ``base`` and the number of rows without a target."""
    from trl import SFTTrainer

    args = sft_config(cfg)
    dataset, empty = prepare_dataset(cfg)
    return (*make_trainer(cfg, sampled(SFTTrainer, cfg.batch_by_env), base, args, dataset),
            empty)
