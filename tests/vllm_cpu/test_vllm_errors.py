"""What the vLLM backend turns into LMError: vLLM's own errors only; a bug propagates unchanged
(issue 11 item 5). No engine is started: the backend's request path runs against a stand-in.

Runs in .venv-vllm (scripts/setup_vllm_cpu.sh); skipped where vllm is not installed.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

pytest.importorskip("vllm.sampling_params")  # a stray folder named vllm must not count

from clew.agents.lm.base import ChatRequest, LMError, Sampling
from clew.agents.lm.vllm_backend import VLLMModel
from vllm.v1.engine.exceptions import EngineDeadError

pytestmark = pytest.mark.vllm


class Engine:
    def __init__(self, exc: BaseException):
        self.exc = exc

    async def generate(self, *args, **kwargs):
        raise self.exc
        yield  # an async generator, like AsyncLLM.generate


def backend(exc: BaseException) -> VLLMModel:
    lm = object.__new__(VLLMModel)        # no engine start: only the request path is tested
    lm.name, lm.engine, lm.lora, lm._ids = "vllm:stand-in", Engine(exc), None, itertools.count()
    lm.prompt_ids = lambda messages: [1, 2, 3]
    lm.context_length = 256
    return lm


def request() -> ChatRequest:
    return ChatRequest([{"role": "user", "content": "hi"}], Sampling(max_tokens=4))


def test_a_dead_engine_is_an_lm_error_naming_the_model():
    with pytest.raises(LMError, match="vllm:stand-in: request failed: EngineDeadError"):
        asyncio.run(backend(EngineDeadError())._one(request()))


def test_a_bug_propagates_unchanged():
    with pytest.raises(TypeError, match="a bug of ours"):
        asyncio.run(backend(TypeError("a bug of ours"))._one(request()))
