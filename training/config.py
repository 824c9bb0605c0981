"""What ``clew train`` runs (docs/methods/exploratory-learning.md#training): the training config,
and the trainer settings it gives TRL.

:class:`TrainConfig` holds clew's own fields, what TRL does not know (the data, the model and how
its weights are held, the device and precision), and the trainer's settings in the sections
passed to TRL as given: ``sft`` (``SFTConfig``) and ``dpo`` (``DPOConfig``, over the ``sft``
section's fields it shares, so one preset serves both objectives). clew's own choices where TRL's
defaults differ are stated once (:data:`TRAINER_DEFAULTS`). The trainer settings that were
clew's own fields before (``epochs``, ``max_steps``, ``batch_size``, ...) are read as their
``sft`` keys, with a warning (:data:`TrainConfig.RENAMED`).

Decisions: the config is a pydantic model (like the run config) so a bad field is named in the
error; ``cpu_threads`` exists because a tiny model's operations are too small for threads: on a
busy 2-core machine one thread trained the tiny model ~20x faster than two (measured);
``model: tiny:PATH`` builds the tiny local model of :mod:`clew.agents.lm.tiny` first (demo and
CPU tests, no download); defaults follow common LoRA SFT practice (r 16, alpha 32, all linear
layers, lr 2e-4, cosine schedule).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from clew.agents.lm.tiny import build_tiny_model
from clew.records.compat import Rename, move_renamed
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


# --- model --------------------------------------------------------------------------------------
def resolve_model(spec: str) -> str:
    """A path or hub id for ``from_pretrained``; ``tiny:PATH`` builds the tiny model there."""
    if spec.startswith("tiny:"):
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


def peft_config(cfg: TrainConfig):
    if cfg.method != "lora":
        return None
    from peft import LoraConfig

    return LoraConfig(r=cfg.lora.r, lora_alpha=cfg.lora.alpha, lora_dropout=cfg.lora.dropout,
                      target_modules=cfg.lora.target_modules, task_type="CAUSAL_LM")


def make_trainer(cfg: TrainConfig, trainer_cls: type, base: str, args: Any, dataset: Any):
    """``trainer_cls`` (a TRL trainer) on the base model ``base`` (:func:`resolve_model`) with its
    tokenizer and, for LoRA, ``cfg``'s adapter settings; the trainer, the tokenizer and ``base``."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    trainer = trainer_cls(model=base, args=args, train_dataset=dataset,
                          processing_class=tokenizer, peft_config=peft_config(cfg))
    return trainer, tokenizer, base
