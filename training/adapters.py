"""Merge a LoRA adapter into its base model and save a standalone model (docs/architecture.md#command-line ``clew
train``; docs/methods/exploratory-learning.md#distilled-agent runs distilled checkpoints as ``vllm:MERGED`` or ``hf:MERGED``).

The output folder holds the merged weights (safetensors), the config, the generation config
and the tokenizer with its chat template: ``vllm serve DIR`` and ``hf:DIR`` load it as is.

Decision: the tokenizer comes from the adapter folder when training saved one there (it is the
tokenizer the model was trained with), else from the base model.
"""

from __future__ import annotations

import json
from pathlib import Path


def adapter_base(adapter_dir: str | Path) -> str:
    """The base model an adapter was trained on (``adapter_config.json``)."""
    file = Path(adapter_dir) / "adapter_config.json"
    if not file.exists():
        raise FileNotFoundError(f"{adapter_dir} is not a PEFT adapter folder "
                                f"(no adapter_config.json)")
    base = json.loads(file.read_text()).get("base_model_name_or_path")
    if not base:
        raise ValueError(f"{file}: no base_model_name_or_path; pass the base model explicitly")
    return str(base)


def merge_adapter(adapter_dir: str | Path, out_dir: str | Path, base: str | None = None,
                  dtype: str = "auto") -> Path:
    """``merge_and_unload`` the adapter into ``base`` and save the result with its tokenizer."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    adapter_dir, out_dir = Path(adapter_dir), Path(out_dir)
    base = base or adapter_base(adapter_dir)
    torch_dtype = dtype if dtype == "auto" else getattr(torch, dtype)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch_dtype)
    merged = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    out_dir.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(str(out_dir), safe_serialization=True)
    has_tokenizer = any((adapter_dir / f).exists()
                        for f in ("tokenizer.json", "tokenizer_config.json"))
    tokenizer = AutoTokenizer.from_pretrained(str(adapter_dir) if has_tokenizer else base)
    tokenizer.save_pretrained(str(out_dir))
    (out_dir / "clew_merge.json").write_text(json.dumps(
        {"base_model": base, "adapter": str(adapter_dir)}, indent=1))
    return out_dir
