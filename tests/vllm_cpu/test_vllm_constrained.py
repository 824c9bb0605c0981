"""Constrained answers on the in-process vLLM engine (docs/methods/parsing.md#constrained-answers):
with ``Sampling.choices`` every completion of the tiny random model ends with the answer phrase
and one of the choices, and parses to it.

Runs in .venv-vllm (scripts/setup_vllm_cpu.sh); skipped where vllm is not installed.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("vllm.sampling_params")  # a stray folder named vllm must not count

from clew.agents.lm.base import ChatRequest, Sampling, answer_suffix
from clew.agents.parsing import answer_text
from vllm_helpers import CHATS

pytestmark = pytest.mark.vllm

CHOICES = ["up", "down", "left", "backtrack S1"]


@pytest.fixture(scope="module")
def engine(base_engine):
    return base_engine


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("max_tokens", [24, 96])
def test_every_completion_ends_with_a_choice(engine, temperature, max_tokens):
    n = 1 if temperature == 0 else 3   # vLLM refuses n > 1 with greedy sampling
    requests = [ChatRequest(c, Sampling(n=n, temperature=temperature, max_tokens=max_tokens,
                                        seed=5, choices=CHOICES)) for c in CHATS]

    async def run():
        return await asyncio.gather(*(engine.complete(r) for r in requests))

    for comps in asyncio.run(run()):
        for c in comps:
            assert any(c.text.endswith(answer_suffix(x)) for x in CHOICES), c.text[-80:]
            assert answer_text(c.text) in CHOICES
            assert c.finish_reason == "stop"
            # about max_tokens at most: a sampled constrained decode may split the appended
            # answer into more tokens than the tokenizer would (one per character at worst)
            assert 0 < c.usage.completion_tokens <= max_tokens + len("backtrack S1```")


def test_without_choices_the_random_model_does_not_answer(engine):
    [c] = asyncio.run(engine.complete(ChatRequest(CHATS[0], Sampling(temperature=0.0,
                                                                     max_tokens=24))))
    assert answer_text(c.text) not in CHOICES
