"""Supervised fine-tuning on EL / IL chats: TRL ``SFTTrainer`` with PEFT LoRA or full weights.

docs/architecture.md#command-line (``clew train``), docs/methods/exploratory-learning.md ("both are supervised fine-tuning on multi-turn
chats"), docs/methods/exploratory-learning.md#samples-and-loss-weights (per-turn weights).

* Data: a chat dataset (``clew data`` output folder or a JSONL of ``{"messages": [...]}``).
  Per-turn weights become TRL's masks: each row is split into a conversational ``prompt`` (every
  message before the first weighted assistant turn) and ``completion`` (the rest), and the loss
  runs on assistant tokens of the completion only (``completion_only_loss`` and
  ``assistant_only_loss``, which needs ``{% generation %}`` markers in the chat template; TRL
  patches the templates of the common model families itself). A weight-0 assistant turn after a
  weighted one cannot be expressed this way and is an error naming the row.
* ``objective: dpo`` trains preference pairs with TRL's ``DPOTrainer`` instead
  (:mod:`clew.training.dpo`, docs/methods/exploratory-learning.md#preference-pairs-and-dpo);
  the fields below mean the same for both.
* Batches: a step's ``batch_size x grad_accum`` random samples are cut into ``grad_accum``
  micro-batches of like lengths and about equal tokens (transformers' ``batch_rebalance``,
  seeded with the run's seed), and on the CPU TRL's LM head scores only the labelled positions:
  the same step, without padding or prompt scoring (docs/scale-out.md#training-throughput).
* ``batch_by_env``: batches of one env each (:class:`EnvBatches`), where envs' samples differ
  in length by an order of magnitude (docs/methods/loop.md#history-per-family). On the CPU
  experiment's mixed data the grid-map rule did not come in the same steps as with random
  batches (measured there), so nothing uses it by default.
* Runs under ``accelerate launch`` unchanged (the Trainer picks up DDP / FSDP / DeepSpeed);
  on a machine without CUDA it trains on CPU (``use_cpu``, fp32).
* Output: the adapter (LoRA) or the full model, with the tokenizer, in ``output_dir``;
  ``clew_train.json`` records the config, the base model and the loss curve; checkpoints go to
  ``output_dir/checkpoint-*`` every ``save_steps``. ``merge: true`` also writes a merged model
  to ``output_dir/merged`` (:mod:`clew.training.adapters`) that vLLM serves directly.

Decisions: the config is a pydantic model (like the eval config) so a bad field is named in the
error; ``cpu_threads`` exists because a tiny model's operations are too small for threads:
on a busy 2-core machine one thread trained the tiny model ~20x faster than two (measured);
``model: tiny:PATH`` builds the tiny local model of :mod:`clew.agents.lm.tiny` first
(demo and CPU tests, no download); defaults follow common LoRA SFT practice (r 16, alpha 32,
all linear layers, lr 2e-4, cosine schedule).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from clew.records.compat import Rename, move_renamed
from clew.training.datasets import load_chat_dataset
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class TrainError(ValueError):
    """A training set-up that cannot run (data, model, device, a TRL section): the CLI reports it
    as one ``error:`` line naming the thing."""


class LoraSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.05, ge=0.0, lt=1.0)
    target_modules: str | list[str] = "all-linear"


#: the trainer settings clew chooses where TRL's defaults are not what clew trains with (common
#: LoRA SFT practice, docs/methods/exploratory-learning.md#training); a config's ``sft`` (or
#: ``dpo``) section overrides any of them
TRAINER_DEFAULTS: dict[str, Any] = {
    "per_device_train_batch_size": 1, "gradient_accumulation_steps": 8, "learning_rate": 2e-4,
    "lr_scheduler_type": "cosine", "seed": 0, "max_length": 2048, "truncation_mode": "keep_end",
    "logging_steps": 10, "save_total_limit": 2, "gradient_checkpointing": False,
    "report_to": [], "logging_first_step": True, "disable_tqdm": False,
}
#: what SFT trains on by default: the weighted assistant turns of the completion
SFT_DEFAULTS: dict[str, Any] = {"assistant_only_loss": True, "completion_only_loss": True}
#: SFTConfig fields DPO does not read (the full list is TRL's: dpo_config checks it)
SFT_ONLY = {"assistant_only_loss", "completion_only_loss", "packing", "packing_strategy",
            "dataset_text_field", "eval_packing"}
#: trainer settings clew derives from its own fields; a section that sets them is an error
DERIVED = {"output_dir": "output_dir", "use_cpu": "device", "bf16": "precision",
           "fp16": "precision", "model_init_kwargs": "precision"}


class TrainConfig(BaseModel):
    """What ``clew train`` runs: clew's own fields (the data, the model, how its weights are held,
    the device) and the trainer's settings, passed to TRL as given: ``sft`` (TRL's
    ``SFTConfig``: transformers' ``TrainingArguments`` and SFT's own fields) or, with
    ``objective: dpo``, ``dpo`` (``DPOConfig``) over the fields of ``sft`` that ``DPOConfig``
    shares, so one preset serves both objectives."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(..., description="base model: PATH, hub id, hf:PATH, or tiny:PATH")
    data: str = Field(..., description="dataset folder (clew data output) or .jsonl file")
    output_dir: str
    objective: Literal["sft", "dpo"] = Field(
        "sft", description="sft: chats (EL/IL); dpo: preference pairs (clew data's pairs)")
    method: Literal["lora", "full"] = "lora"
    lora: LoraSettings = Field(default_factory=LoraSettings)
    sft: dict[str, Any] = Field(
        default_factory=dict, description="TRL SFTConfig fields (learning_rate, max_steps, "
                                          "per_device_train_batch_size, ...), passed through")
    dpo: dict[str, Any] = Field(
        default_factory=dict, description="TRL DPOConfig fields (beta, loss_type, ...) over the "
                                          "sft section's shared ones, passed through")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    cpu_threads: int | None = Field(None, ge=1, description="torch threads when on CPU")
    precision: Literal["auto", "bf16", "fp16", "fp32"] = "auto"
    batch_by_env: bool = Field(
        False, description="each batch holds samples of one env (rows' 'env'), in random order; "
                           "long samples of one env then do not pad another's short ones")
    envs: list[str] | None = Field(
        None, min_length=1, description="train on the samples of these envs only (rows' 'env'; "
                                        "clew loop's model per family)")
    limit: int | None = Field(None, ge=1, description="train on the first N samples only")
    merge: bool = False

    #: trainer settings that were clew's own fields before the sections held them all (read
    #: with a warning: the ``sft`` key to write instead)
    RENAMED: ClassVar[dict[str, Rename]] = {
        "epochs": "sft.num_train_epochs", "max_steps": "sft.max_steps",
        "batch_size": "sft.per_device_train_batch_size",
        "grad_accum": "sft.gradient_accumulation_steps", "learning_rate": "sft.learning_rate",
        "lr_scheduler": "sft.lr_scheduler_type", "warmup_steps": "sft.warmup_steps",
        "weight_decay": "sft.weight_decay", "max_grad_norm": "sft.max_grad_norm",
        "seed": "sft.seed", "max_length": "sft.max_length",
        "truncation_mode": "sft.truncation_mode",
        "gradient_checkpointing": "sft.gradient_checkpointing",
        "assistant_only_loss": "sft.assistant_only_loss", "packing": "sft.packing",
        "report_to": "sft.report_to", "run_name": "sft.run_name",
        "logging_steps": "sft.logging_steps", "save_steps": "sft.save_steps",
        "save_total_limit": "sft.save_total_limit",
        "resume_from_checkpoint": "sft.resume_from_checkpoint",
        "save_checkpoints": ("sft.save_strategy", lambda keep: "steps" if keep else "no"),
    }

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return move_renamed(data, cls.RENAMED, "train: ")

    @field_validator("method", mode="before")
    @classmethod
    def _method(cls, value: Any) -> Any:
        if value == "dpo":
            raise ValueError("dpo is an objective, not a way to hold the weights: write "
                             "objective=dpo (method: lora | full picks LoRA or full weights)")
        return value

    @model_validator(mode="after")
    def _unread(self) -> TrainConfig:
        """An option the chosen objective does not read is an error naming it."""
        unread = {"sft": ["dpo"] if self.dpo else [],
                  "dpo": sorted({"batch_by_env", "envs"} & self.model_fields_set)
                  + [f"sft.{k}" for k in sorted(SFT_ONLY & set(self.sft))]}
        if unread[self.objective]:
            raise ValueError(f"{', '.join(unread[self.objective])}: not read when objective is "
                             f"{self.objective}")
        derived = sorted((set(self.sft) | set(self.dpo)) & set(DERIVED))
        if derived:
            raise ValueError(f"{derived[0]}: clew sets it from {DERIVED[derived[0]]}")
        packing, mode = self.sft.get("packing"), self.trainer("truncation_mode")
        if self.batch_by_env and packing:
            raise ValueError("batch_by_env: packing joins samples into one sequence, so a batch "
                             "has no single env; use one or the other")
        if packing and mode == "keep_end" and self.trainer("max_length"):
            raise ValueError("sft.packing: TRL's packing cuts a sample longer than max_length at "
                             "its end, which would drop the answer of a long sample; set "
                             "sft.truncation_mode=keep_start with a max_length above the longest "
                             "sample, or leave packing off (micro-batches are balanced by tokens)")
        return self

    def trainer(self, name: str) -> Any:
        """A trainer setting as it will train: the objective's section, else ``sft`` (for
        DPO, the sections' shared fields), else clew's default (None: TRL's)."""
        for section in ((self.dpo, self.sft) if self.objective == "dpo" else (self.sft,)):
            if name in section:
                return section[name]
        return {**TRAINER_DEFAULTS, **SFT_DEFAULTS}.get(name)


@dataclass
class TrainResult:
    output_dir: Path
    merged_dir: Path | None
    losses: list[float] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)


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


# --- model --------------------------------------------------------------------------------------
def resolve_model(spec: str) -> str:
    """A path or hub id for ``from_pretrained``; ``tiny:PATH`` builds the tiny model there."""
    if spec.startswith("tiny:"):
        from clew.agents.lm.tiny import build_tiny_model

        return str(build_tiny_model(spec[len("tiny:"):]))
    spec = spec.removeprefix("hf:")
    if "+lora:" in spec:
        raise TrainError(f"model {spec!r}: train from a base or merged model, not base+adapter "
                         f"(merge it first with `clew train --merge-only`)")
    return spec


def _check_reporters(names: list[str]) -> None:
    needs = {"tensorboard": ("tensorboard", "tensorboardX"), "wandb": ("wandb",)}
    for name in names:
        if not any(importlib.util.find_spec(m) for m in needs[name]):
            raise TrainError(f"report_to: {name} needs the {needs[name][0]!r} package, which is "
                             f"not installed (pip install {needs[name][0]})")


def _checkpointing_field(config_class) -> str:
    """The training argument that turns on activation (gradient) checkpointing.

    transformers 5.23 renamed ``gradient_checkpointing`` to ``activation_checkpointing`` (the old
    name warns); vLLM pins transformers below 5.21, which knows only the old name. One config must
    train in both venvs, so the name is read from the installed dataclass.
    """
    import dataclasses

    names = {f.name for f in dataclasses.fields(config_class)}
    return "activation_checkpointing" if "activation_checkpointing" in names \
        else "gradient_checkpointing"


def trainer_args(cfg: TrainConfig) -> dict[str, Any]:
    """The trainer settings clew derives from its own fields, SFT and DPO alike: the output
    folder, the device and the precision (with the model's dtype)."""
    import torch

    cuda = torch.cuda.is_available()
    if cfg.device == "cuda" and not cuda:
        raise TrainError("device: cuda was asked for but no CUDA device is visible")
    use_cpu = cfg.device == "cpu" or (cfg.device == "auto" and not cuda)
    precision = cfg.precision
    if precision == "auto":
        precision = "bf16" if not use_cpu and torch.cuda.is_bf16_supported() else "fp32"
    if use_cpu and precision != "fp32":
        raise TrainError(f"precision: {precision} needs a GPU; use fp32 (or auto) on CPU")
    # transformers takes accelerate's setting when bf16 and fp16 are both off: fp32 would
    # silently train in the launcher's precision
    launcher = os.environ.get("ACCELERATE_MIXED_PRECISION")
    if launcher and launcher != {"bf16": "bf16", "fp16": "fp16", "fp32": "no"}[precision]:
        raise TrainError(f"precision: the config trains in {precision} but accelerate launch asks "
                         f"for mixed precision {launcher} (--mixed_precision, or its config "
                         "file); make them agree")
    reporters = cfg.trainer("report_to")
    _check_reporters([reporters] if isinstance(reporters, str) else list(reporters or []))
    dtype = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}[precision]
    return {"output_dir": cfg.output_dir, "use_cpu": use_cpu, "bf16": precision == "bf16",
            "fp16": precision == "fp16", "model_init_kwargs": {"dtype": dtype}}


def trl_config(config_cls: type, section: str, given: dict[str, Any], args: dict[str, Any],
               defaults: dict[str, Any] | None = None):
    """``config_cls``: clew's derived ``args``, then clew's ``defaults`` (:data:`TRAINER_DEFAULTS`
    and the objective's), then the config's section as given. A name TRL's config lacks is an
    error naming it (``<section>.<name>``)."""
    import dataclasses

    import trl

    known = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise TrainError(f"{section}.{unknown[0]}: not a field of TRL's {config_cls.__name__} "
                         f"(trl {trl.__version__}); see its documentation")
    settings = {k: v for k, v in {**TRAINER_DEFAULTS, **(defaults or {})}.items() if k in known}
    settings.update(_typed(config_cls, section, given))
    # one config trains under either name of activation checkpointing (_checkpointing_field)
    name = _checkpointing_field(config_cls)
    if "gradient_checkpointing" in settings and name != "gradient_checkpointing":
        settings[name] = settings.pop("gradient_checkpointing")
    settings.setdefault("data_seed", settings["seed"])
    if not settings.get("report_to"):
        settings["report_to"] = "none"
    return config_cls(**args, **settings)


def _typed(config_cls: type, section: str, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` with YAML 1.1's readings undone where the field's type says otherwise: a number
    written without a dot (``1e-4``) arrives as text, a word such as ``no`` (``save_strategy``)
    as a boolean; TRL's dataclasses take values as they come."""
    import dataclasses

    types = {f.name: str(f.type) for f in dataclasses.fields(config_cls)}
    out = dict(given)
    for name, value in given.items():
        kind = types[name]
        if isinstance(value, bool) and "str" in kind and "bool" not in kind:
            out[name] = "yes" if value else "no"
        elif isinstance(value, str) and "str" not in kind and ("float" in kind or "int" in kind):
            try:
                out[name] = float(value) if "float" in kind else int(value)
            except ValueError:
                raise TrainError(f"{section}.{name}: {value!r} is not a number") from None
    return out


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


def peft_config(cfg: TrainConfig):
    if cfg.method != "lora":
        return None
    from peft import LoraConfig

    return LoraConfig(r=cfg.lora.r, lora_alpha=cfg.lora.alpha, lora_dropout=cfg.lora.dropout,
                      target_modules=cfg.lora.target_modules, task_type="CAUSAL_LM")


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


# --- training -----------------------------------------------------------------------------------
def build_trainer(cfg: TrainConfig):
    """The configured TRL ``SFTTrainer`` (data prepared, masks built) or, with ``objective:
    dpo``, ``DPOTrainer`` (:mod:`clew.training.dpo`); its tokenizer, the base model path and the
    number of rows without a target."""
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    if cfg.objective == "dpo":
        from clew.training.dpo import build_dpo_trainer

        return build_dpo_trainer(cfg)
    base = resolve_model(cfg.model)
    args = sft_config(cfg)
    dataset, empty = prepare_dataset(cfg)
    tokenizer = AutoTokenizer.from_pretrained(base)
    trainer = sampled(SFTTrainer, cfg.batch_by_env)(
        model=base, args=args, train_dataset=dataset, processing_class=tokenizer,
        peft_config=peft_config(cfg))
    return trainer, tokenizer, base, empty


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
            from clew.training.adapters import merge_adapter

            result.merged_dir = merge_adapter(cfg.output_dir, Path(cfg.output_dir) / "merged",
                                              base=base)
    return result
