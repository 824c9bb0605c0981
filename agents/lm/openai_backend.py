"""OpenAI-compatible server backend: ``openai:http://host:8000/v1#MODEL`` (docs/architecture.md#contracts).

Talks to any server with ``/v1/chat/completions`` (vLLM's ``api_server``, SGLang, llama.cpp,
...) through ``openai.AsyncOpenAI``. Each request is one HTTP call with ``n`` samples, so the
server processes the prompt once (docs/methods/rmcts.md#roles-and-models).

Failure handling ("Nothing lost, clear errors", docs/architecture.md#principles-in-the-code):

* at most ``max_concurrency`` requests in flight per model (a semaphore), so thousands of
  concurrent episode steps do not open thousands of connections;
* every attempt has a ``timeout`` (seconds; connect, read and write each);
* connection errors, timeouts, 408/409/429 and 5xx answers are retried ``retries`` times with
  exponential backoff (``backoff * 2**k`` seconds, at most ``max_backoff``); other answers (a bad
  request, an unknown model, a refused key) are not retried;
* every retry is logged (this module's logger, level WARNING, one line: what failed, why, the wait
  and the attempt number), so a run that slows down says why;
* then an :class:`LMError` names the server, the model, what happened and how many attempts over
  how long. A call therefore fails within about
  ``(retries + 1) * timeout + sum(backoffs)`` seconds;
* anything else (a bug of ours, a ``TypeError`` in the arguments) is not caught: it propagates
  with its traceback on the first attempt.

Usage: the server's ``usage`` (prompt tokens once, completion tokens over all ``n`` samples,
docs/methods/rmcts.md#token-accounting). Decision: the server reports one completion-token total per request; it is split
evenly over the samples (the first ones get the remainder), which keeps every per-request and
per-role total exact.

Sampling: the request names every sampling setting the in-process ``vllm:`` engine uses, so the
two routes sample alike: temperature and top-p from :class:`Sampling`, and top-k, min-p and the
repetition, presence and frequency penalties at their neutral values (:data:`NEUTRAL_SAMPLING`).
Why: ``vllm serve`` fills settings a request leaves out from the model's ``generation_config.json``
(often top_k 20, a repetition penalty), while the in-process engine takes only the EOS tokens from
it. Launch the server with ``--generation-config vllm`` as well (docs/scale-out.md). For a server
that rejects the non-OpenAI fields, pass ``neutral_sampling=False``.

Decision: the ``AsyncOpenAI`` client and the semaphore are made per event loop (an HTTP
connection pool belongs to the loop that opened it), so one model object serves a CLI run and a
series of ``asyncio.run`` calls in tests alike. ``#MODEL`` may be omitted when the server serves
exactly one model; it is then asked once with ``/v1/models``.

Constrained answers (``Sampling.choices``, docs/methods/parsing.md#constrained-answers): the
request body carries :func:`~clew.agents.lm.base.choices_regex` as vLLM's OpenAI-compatible
server reads it, ``"structured_outputs": {"regex": ...}`` (the ``structured_outputs`` field of
``ChatCompletionRequest`` in vLLM 0.32; ``guided_regex`` before vLLM 0.10). Servers without
structured outputs reject or ignore the field.

Context: the server's limit is not asked for; ``context_length`` (the server's
``max_model_len``) turns on prompt fitting, and ``tokenizer`` (a local path or hub id of the
served model's tokenizer) makes token counts exact instead of estimated
(docs/methods/parsing.md#context-length). A 400 answer about the context length becomes
:class:`~clew.agents.lm.base.ContextLengthError`: that episode fails, the run goes on.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from clew.agents.lm.base import (
    ChatRequest,
    Completion,
    ContextLengthError,
    LanguageModel,
    LMError,
    choices_regex,
)
from clew.agents.lm.sampling import validate_sampling
from clew.agents.usage import Usage

RETRY_STATUS = {408, 409, 429}
#: sampling settings outside the OpenAI schema, sent in the body so that a vLLM (or SGLang)
#: server does not fill them from the model's generation config; -1 disables top-k in both
NEUTRAL_SAMPLING = {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}
log = logging.getLogger(__name__)


class OpenAIModel(LanguageModel):
    """Any OpenAI-compatible chat-completions server; see the module docstring."""

    def __init__(self, base_url: str, model: str | None = None, *, api_key: str | None = None,
                 max_concurrency: int = 64, timeout: float = 120.0, retries: int = 3,
                 backoff: float = 0.5, max_backoff: float = 8.0,
                 extra_body: dict[str, Any] | None = None, neutral_sampling: bool = True,
                 context_length: int | None = None, tokenizer: str | None = None):
        import openai  # noqa: F401  (fail at construction, not at the first call)

        if max_concurrency < 1 or retries < 0 or timeout <= 0:
            raise LMError(f"openai:{base_url}: need max_concurrency >= 1, retries >= 0 and "
                          f"timeout > 0 (got {max_concurrency}, {retries}, {timeout})")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.max_concurrency = max_concurrency
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        # the caller's extra_body wins over the neutral values
        self.extra_body = {**(NEUTRAL_SAMPLING if neutral_sampling else {}), **(extra_body or {})}
        self.neutral_sampling = neutral_sampling
        self.spec = f"openai:{self.base_url}" + (f"#{model}" if model else "")
        #: the served model's context (the server's max_model_len); None: prompts are not fitted
        self.context_length = context_length
        self.tokenizer = None
        if tokenizer:  # counts exactly; without it the estimate of LanguageModel.count_tokens
            from transformers import AutoTokenizer

            try:
                self.tokenizer = AutoTokenizer.from_pretrained(tokenizer)
            except (OSError, ValueError) as e:
                raise LMError(f"{self.spec}: cannot load the tokenizer {tokenizer!r}: {e}") from e
        self._per_loop: dict[int, tuple[Any, Any, asyncio.Semaphore]] = {}

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        """Tokens of the chat prompt: the configured tokenizer's count, else the estimate."""
        if self.tokenizer is None or not getattr(self.tokenizer, "chat_template", None):
            return super().count_tokens(messages)
        text = self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=True)
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    @property
    def name(self) -> str:
        return f"openai server {self.base_url} (model {self.model or '?'})"

    # --- per-loop client -----------------------------------------------------------------
    def _client(self) -> tuple[Any, asyncio.Semaphore]:
        from openai import AsyncOpenAI

        loop = asyncio.get_running_loop()
        entry = self._per_loop.get(id(loop))
        if entry is None or entry[0] is not loop:
            client = AsyncOpenAI(base_url=self.base_url, api_key=self.api_key,
                                 timeout=self.timeout, max_retries=0)
            entry = (loop, client, asyncio.Semaphore(self.max_concurrency))
            # drop clients of loops that are gone
            self._per_loop = {k: v for k, v in self._per_loop.items() if not v[0].is_closed()}
            self._per_loop[id(loop)] = entry
        return entry[1], entry[2]

    # --- public API ----------------------------------------------------------------------
    async def generate(self, requests: list[ChatRequest]) -> list[list[Completion]]:
        for r in requests:
            validate_sampling(self.name, r.sampling)
        if self.model is None:
            await self._discover_model()
        return list(await asyncio.gather(*(self._one(r) for r in requests)))

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        entry = self._per_loop.pop(id(loop), None)
        if entry is not None:
            await entry[1].close()

    async def _discover_model(self) -> None:
        client, sem = self._client()

        async def ask():
            async with sem:
                return await client.models.list()

        page = await self._with_retries(ask, "listing models")
        names = [m.id for m in page.data]
        if len(names) != 1:
            raise LMError(f"{self.name}: the spec names no model and the server serves "
                          f"{len(names)} ({', '.join(names) or 'none'}); write "
                          f"openai:{self.base_url}#MODEL")
        self.model = names[0]

    async def _one(self, request: ChatRequest) -> list[Completion]:
        s = request.sampling
        client, sem = self._client()
        kwargs: dict[str, Any] = {
            "model": self.model, "messages": request.messages, "n": s.n,
            "temperature": s.temperature, "top_p": s.top_p, "max_tokens": s.max_tokens,
        }
        if self.neutral_sampling:
            kwargs.update(presence_penalty=0.0, frequency_penalty=0.0)
        if s.stop:
            kwargs["stop"] = list(s.stop)
        if s.seed is not None:
            kwargs["seed"] = s.seed
        if s.logprobs is not None:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = s.logprobs
        extra = dict(self.extra_body)
        if s.choices:
            # vLLM's ChatCompletionRequest.structured_outputs (StructuredOutputsParams)
            extra["structured_outputs"] = {"regex": choices_regex(s.choices, s.answer_phrase)}
        if extra:
            kwargs["extra_body"] = extra

        async def ask():
            async with sem:
                return await client.chat.completions.create(**kwargs)

        resp = await self._with_retries(ask, f"{request.role} request")
        return _completions(resp, s.n, self.name)

    async def _with_retries(self, call, what: str):
        import openai

        start = time.monotonic()
        last = "no attempt"
        for attempt in range(self.retries + 1):
            if attempt:
                wait = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
                log.warning("%s: %s failed (%s); retry %d of %d in %.2g s", self.name, what, last,
                            attempt, self.retries, wait)
                await asyncio.sleep(wait)
            try:
                return await call()
            except openai.APITimeoutError:
                last = f"no answer within {self.timeout:g} s (timeout)"
            except openai.APIConnectionError as e:
                last = f"cannot connect ({_cause(e)})"
            except openai.APIStatusError as e:
                detail = f"HTTP {e.status_code}: {_message(e)}"
                if e.status_code == 400 and "context length" in detail.lower():
                    # vLLM and OpenAI servers refuse an over-long prompt this way: the episode
                    # fails (context_length), the run goes on
                    raise ContextLengthError(f"{self.name}: {what} refused, {detail}") from e
                if e.status_code not in RETRY_STATUS and e.status_code < 500:
                    raise LMError(f"{self.name}: {what} refused, {detail}") from e
                last = detail
            except openai.OpenAIError as e:
                raise LMError(f"{self.name}: {what} failed: {type(e).__name__}: {e}") from e
        elapsed = time.monotonic() - start
        raise LMError(f"{self.name}: {what} failed after {self.retries + 1} attempt(s) over "
                      f"{elapsed:.1f} s; last error: {last}")


def _cause(e: BaseException) -> str:
    inner = e.__cause__ or e.__context__
    return f"{type(inner).__name__}: {inner}" if inner else str(e)


def _message(e: Any) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(e, "message", e))


def _completions(resp: Any, n: int, name: str) -> list[Completion]:
    choices = sorted(resp.choices or [], key=lambda c: c.index)
    if len(choices) != n:
        raise LMError(f"{name}: asked for {n} sample(s), the server returned {len(choices)}")
    usage = resp.usage
    prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
    total = int(getattr(usage, "completion_tokens", 0) or 0)
    share, extra = divmod(total, n)
    # prefix-cache hits, where the server tells (vLLM's with --enable-prompt-tokens-details)
    cached = getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None)
    out = []
    for i, c in enumerate(choices):
        logprobs = None
        content = getattr(c.logprobs, "content", None) if c.logprobs else None
        if content is not None:
            logprobs = [{"token": t.token, "logprob": t.logprob,
                         "top_logprobs": [{"token": x.token, "logprob": x.logprob}
                                          for x in (t.top_logprobs or [])]}
                        for t in content]
        out.append(Completion(c.message.content or "", c.finish_reason or "stop",
                              Usage(prompt, share + (1 if i < extra else 0), 1,
                                    cached if isinstance(cached, int) else None), logprobs))
    return out
