"""vLLM with a LoRA adapter (LoRARequest) equals transformers + PEFT (docs/architecture.md#tests-and-benchmarks)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("vllm.sampling_params")

from clew.agents.lm.spec import load_model
from vllm_helpers import CHATS, ENGINE, greedy, summary

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def engine(lively_model_dir, lively_lora_dir):
    lm = load_model(f"vllm:{lively_model_dir}+lora:{lively_lora_dir}", shared=False, **ENGINE)
    yield lm
    lm.close()


async def _all(lm, requests):
    return await asyncio.gather(*(lm.complete(r) for r in requests))


def test_lora_greedy_equals_hf_with_peft_and_differs_from_base(engine, lively_model_dir,
                                                               lively_lora_dir):
    hf_lora = load_model(f"hf:{lively_model_dir}+lora:{lively_lora_dir}", shared=False)
    hf_base = load_model(f"hf:{lively_model_dir}", shared=False)
    requests = [greedy(c, max_tokens=24) for c in CHATS]
    v = asyncio.run(_all(engine, requests))
    h = asyncio.run(_all(hf_lora, requests))
    base = asyncio.run(_all(hf_base, requests))
    assert [summary(x) for x in v] == [summary(x) for x in h]
    assert sum(a[0].text != b[0].text for a, b in zip(v, base)) > 0
