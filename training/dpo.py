"""``clew train objective=dpo``: TRL ``DPOTrainer`` on the preference pairs that ``clew data``
draws from search trees (docs/methods/exploratory-learning.md#preference-pairs-and-dpo).

The config is :class:`clew.training.config.TrainConfig`, read the same way as for SFT: ``method``
(``lora`` | ``full``), the ``lora`` section, device, precision and ``merge`` mean what they mean
there, and the ``sft`` section's trainer settings that ``DPOConfig`` shares (the optimiser,
steps, batches, checkpoints, ``max_length``) carry over, so an SFT preset trains DPO too. DPO's
own settings are TRL's: the ``dpo`` section is passed to ``DPOConfig`` as it is (``beta``,
``loss_type``, ``precompute_ref_log_probs``, ...) over those, and TRL's defaults hold for what
both leave out. The reference model is TRL's choice too: with
LoRA the base model with the adapter switched off, with full weights a frozen copy of the base.

``data`` is ``clew data``'s ``pairs`` folder or a JSONL of conversational ``prompt`` /
``chosen`` / ``rejected`` rows (:func:`clew.training.preferences.load_preference_dataset`).
The output is an adapter or a model like SFT's, run with ``clew eval --agent distilled``.
"""

from __future__ import annotations

import dataclasses

from clew.training.config import TrainConfig, TrainError, make_trainer, trainer_args, trl_config
from clew.training.preferences import load_preference_dataset


def dpo_config(cfg: TrainConfig):
    """TRL ``DPOConfig``: clew's derived settings and defaults, the ``sft`` section's fields
    (those ``DPOConfig`` shares: ``TrainingArguments``, ``max_length``, ...), then the ``dpo``
    section. A field of ``sft`` that DPO lacks is an error naming it: a preset that serves both
    objectives keeps its SFT-only settings out of ``sft``."""
    from trl import DPOConfig

    known = {f.name for f in dataclasses.fields(DPOConfig)}
    sft_only = sorted(set(cfg.sft) - known)
    if sft_only:
        raise TrainError(f"sft.{sft_only[0]}: not read when objective is dpo (DPOConfig has no "
                         "such field)")
    return trl_config(DPOConfig, "dpo", {**cfg.sft, **cfg.dpo}, trainer_args(cfg))


def build_dpo_trainer(cfg: TrainConfig, base: str):
    """The configured ``DPOTrainer`` on the base model ``base``, its tokenizer, ``base`` and 0
    (every pair is a target; the count mirrors SFT's rows without a target)."""
    from trl import DPOTrainer

    args = dpo_config(cfg)
    dataset = load_preference_dataset(cfg.data)
    if cfg.limit is not None:
        dataset = dataset.select(range(min(cfg.limit, len(dataset))))
    return (*make_trainer(cfg, DPOTrainer, base, args, dataset), 0)
