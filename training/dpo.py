"""``clew train objective=dpo``: TRL ``DPOTrainer`` on the preference pairs that ``clew data``
draws from search trees (docs/methods/exploratory-learning.md#preference-pairs-and-dpo).

The config is :class:`clew.training.sft.TrainConfig`, read the same way as for SFT: ``method``
(``lora`` | ``full``), the ``lora`` section, the optimiser, device, precision, checkpoint and
``merge`` fields mean what they mean there. DPO's own settings are TRL's: the ``dpo`` section is
passed to ``DPOConfig`` as it is (``beta``, ``loss_type``, ``precompute_ref_log_probs``, ...),
and TRL's defaults hold for what it leaves out. The reference model is TRL's choice too: with
LoRA the base model with the adapter switched off, with full weights a frozen copy of the base.

``data`` is ``clew data``'s ``pairs`` folder or a JSONL of conversational ``prompt`` /
``chosen`` / ``rejected`` rows (:func:`clew.training.preferences.load_preference_dataset`).
The output is an adapter or a model like SFT's, run with ``clew eval --agent distilled``.
"""

from __future__ import annotations

from typing import Any

from clew.training.preferences import load_preference_dataset
from clew.training.sft import (
    TrainConfig,
    _checkpointing_field,
    peft_config,
    resolve_model,
    trainer_args,
    trl_config,
)


def dpo_config(cfg: TrainConfig):
    """TRL ``DPOConfig``: the shared training fields, then the ``dpo`` section as given."""
    from trl import DPOConfig

    args: dict[str, Any] = {_checkpointing_field(DPOConfig): cfg.gradient_checkpointing,
                            **trainer_args(cfg)}
    return trl_config(DPOConfig, "dpo", cfg.dpo, args)


def build_dpo_trainer(cfg: TrainConfig):
    """The configured ``DPOTrainer``, its tokenizer, the base model path and 0 (every pair is a
    target; the count mirrors SFT's rows without a target)."""
    from transformers import AutoTokenizer
    from trl import DPOTrainer

    base = resolve_model(cfg.model)
    args = dpo_config(cfg)
    dataset = load_preference_dataset(cfg.data)
    if cfg.limit is not None:
        dataset = dataset.select(range(min(cfg.limit, len(dataset))))
    tokenizer = AutoTokenizer.from_pretrained(base)
    trainer = DPOTrainer(model=base, args=args, train_dataset=dataset,
                         processing_class=tokenizer, peft_config=peft_config(cfg))
    return trainer, tokenizer, base, 0
