"""The transformers backend on a tiny local model (docs/architecture.md#contracts)."""

from __future__ import annotations

import asyncio

import pytest
import torch
from clew.agents.lm.base import ChatRequest, LMError, Sampling, request_usage
from clew.agents.lm.hf import HFModel
from clew.agents.lm.spec import load_model
from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPTS = [f"move {w} to the key {i} and open the door" for i, w in
           enumerate(["up", "down", "left", "right", "up up", "back", "pick", "go"])]


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": text}]


def greedy(text: str, max_tokens: int = 24, **kw) -> ChatRequest:
    return ChatRequest(chat(text), Sampling(temperature=0.0, max_tokens=max_tokens, **kw))


@pytest.fixture(scope="module")
def lm(lively_model_dir) -> HFModel:
    return HFModel(lively_model_dir)


@pytest.fixture(scope="module")
def tok(lively_model_dir):
    return AutoTokenizer.from_pretrained(lively_model_dir)


def chatml_ids(tok, messages) -> list[int]:
    """The prompt written out by hand in ChatML, independently of the chat template code."""
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return tok(text + "<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]


def manual_greedy(model, ids: list[int], max_new: int, eos: int) -> list[int]:
    """Reference decode: argmax of a full forward pass per token, no ``generate``."""
    out: list[int] = []
    with torch.no_grad():
        for _ in range(max_new):
            logits = model(torch.tensor([ids + out])).logits[0, -1]
            out.append(int(logits.argmax()))
            if out[-1] == eos:
                break
    return out


def assert_streamed(text: str, full: str) -> None:
    """``text`` is ``full`` minus an unfinished multi-byte character at the end."""
    assert full.startswith(text)
    assert set(full[len(text):]) <= {"\ufffd"}


def test_greedy_matches_a_manual_decode_and_usage_counts(lm, tok, lively_model_dir):
    model = AutoModelForCausalLM.from_pretrained(lively_model_dir, dtype=torch.float32)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    for text in PROMPTS[:4]:
        ids = chatml_ids(tok, chat(text))
        ref = manual_greedy(model, ids, 24, eos)
        [c] = asyncio.run(lm.complete(greedy(text)))
        assert c.usage.prompt_tokens == len(ids)
        assert c.usage.completion_tokens == len(ref)  # the EOS token is counted, as vLLM does
        assert c.finish_reason == ("stop" if ref[-1] == eos else "length")
        assert_streamed(c.text, tok.decode(ref, skip_special_tokens=True))


def test_concurrent_requests_are_batched_and_equal_one_by_one(lm):
    one_by_one = [asyncio.run(lm.complete(greedy(p)))[0].text for p in PROMPTS]
    assert len(set(one_by_one)) > 1, "the model should answer different prompts differently"
    before = len(lm.batches)

    async def together():
        return await asyncio.gather(*(lm.complete(greedy(p)) for p in PROMPTS))

    batched = [c[0].text for c in asyncio.run(together())]
    assert batched == one_by_one
    assert max(lm.batches[before:]) > 1, "concurrent requests should share a batch"


def test_mixed_sampling_in_one_window_keeps_greedy_exact(lm):
    alone = asyncio.run(lm.complete(greedy(PROMPTS[0])))[0].text

    async def mixed():
        return await asyncio.gather(
            lm.complete(greedy(PROMPTS[0])),
            lm.complete(ChatRequest(chat(PROMPTS[1]), Sampling(temperature=1.0, n=2))),
            lm.complete(greedy(PROMPTS[0], max_tokens=5)),
        )

    g, s, short = asyncio.run(mixed())
    assert g[0].text == alone and len(s) == 2
    assert alone.startswith(short[0].text) and short[0].usage.completion_tokens <= 5


def test_n_samples_greedy_copies_and_seeded_sampling(lm):
    [*copies] = asyncio.run(lm.complete(greedy(PROMPTS[2], n=3)))
    assert len(copies) == 3 and len({c.text for c in copies}) == 1
    req = ChatRequest(chat(PROMPTS[2]), Sampling(temperature=1.0, n=4, max_tokens=12, seed=7))
    first = [c.text for c in asyncio.run(lm.complete(req))]
    assert len(first) == 4 and len(set(first)) > 1

    async def with_neighbours():  # a seeded request does not depend on what runs beside it
        other = ChatRequest(chat(PROMPTS[3]), Sampling(temperature=1.0, n=3, max_tokens=12))
        out = await asyncio.gather(lm.complete(other), lm.complete(req))
        return [c.text for c in out[1]]

    assert asyncio.run(with_neighbours()) == first
    usage = request_usage(asyncio.run(lm.complete(req)))
    assert usage.calls == 1 and usage.completion_tokens <= 4 * 12


def test_stop_strings_cut_the_text(lm):
    full = asyncio.run(lm.complete(greedy(PROMPTS[4], max_tokens=30)))[0]
    assert len(full.text) > 8
    stop = full.text[5:8]
    cut = asyncio.run(lm.complete(greedy(PROMPTS[4], max_tokens=30, stop=["zzzz", stop])))[0]
    assert cut.text == full.text[: full.text.find(stop)]
    assert cut.finish_reason == "stop"
    assert cut.usage.completion_tokens < full.usage.completion_tokens


def test_logprobs_of_a_greedy_decode(lm):
    [c] = asyncio.run(lm.complete(greedy(PROMPTS[5], max_tokens=6, logprobs=3)))
    assert len(c.logprobs) == c.usage.completion_tokens
    for entry in c.logprobs:
        assert len(entry["top_logprobs"]) == 3
        top = [t["logprob"] for t in entry["top_logprobs"]]
        assert top == sorted(top, reverse=True)
        assert entry["id"] == entry["top_logprobs"][0]["id"]  # greedy takes the top token
        assert entry["logprob"] == pytest.approx(top[0])
        assert entry["logprob"] <= 0.0


def test_lora_adapter_changes_output_and_equals_the_merged_model(lively_model_dir,
                                                                 lively_lora_dir, tok):
    from peft import PeftModel

    lora = load_model(f"hf:{lively_model_dir}+lora:{lively_lora_dir}", shared=False)
    base = AutoModelForCausalLM.from_pretrained(lively_model_dir, dtype=torch.float32)
    merged = PeftModel.from_pretrained(base, str(lively_lora_dir)).merge_and_unload()
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    plain = load_model(f"hf:{lively_model_dir}")
    assert load_model(f"hf:{lively_model_dir}") is plain  # weights are loaded once per process
    differs = 0
    for text in PROMPTS[:3]:
        [c] = asyncio.run(lora.complete(greedy(text, max_tokens=16)))
        ref = manual_greedy(merged, chatml_ids(tok, chat(text)), 16, eos)
        assert c.usage.completion_tokens == len(ref)
        assert_streamed(c.text, tok.decode(ref, skip_special_tokens=True))
        differs += c.text != asyncio.run(plain.complete(greedy(text, max_tokens=16)))[0].text
    assert differs > 0


def test_errors_name_the_model(lm, tmp_path):
    with pytest.raises(LMError, match=r"hf:.*n must be >= 1"):
        asyncio.run(lm.complete(ChatRequest(chat("x"), Sampling(n=0))))
    with pytest.raises(LMError, match="max_tokens"):
        asyncio.run(lm.complete(ChatRequest(chat("x"), Sampling(max_tokens=0))))
    with pytest.raises(LMError, match=r"hf:.*cannot load the model"):
        HFModel(tmp_path / "missing")
    bad = ChatRequest([{"role": "user"}], Sampling(temperature=0.0, max_tokens=2))
    with pytest.raises(LMError, match="cannot render the chat prompt"):
        asyncio.run(lm.complete(bad))


EXIT_MID_BATCH = """
import asyncio, sys, threading, time
from clew.agents.lm.base import ChatRequest, Sampling
from clew.agents.lm.hf import HFModel
lm = HFModel(sys.argv[1])
req = ChatRequest([{"role": "user", "content": "hello " * 50}],
                  Sampling(max_tokens=2000, temperature=0.0))
threading.Thread(target=lambda: asyncio.run(lm.generate([req] * 8)), daemon=True).start()
time.sleep(1.5)   # the worker is inside generate() when the interpreter exits
"""


def test_exit_while_the_worker_generates_does_not_abort(lively_model_dir):
    """A process that exits mid-batch (e.g. after SIGTERM) lets the worker finish its batch
    instead of aborting inside torch ("terminate called without an active exception")."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", EXIT_MID_BATCH, str(lively_model_dir)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "terminate called" not in done.stderr
