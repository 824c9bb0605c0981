"""Scripted backend for tests (docs/architecture.md#language-models): answers come from a list, a dict or a function.

Every request it receives is kept in ``calls`` so tests can assert call patterns (one request
with ``n`` samples for a policy, two concurrent debate arguments, ...).

Constrained answers (``Sampling.choices``): a scripted text whose answer (read without an env,
:func:`clew.agents.parsing.answer_text`) is one of the choices is returned as it is; any other
gets the first choice's answer line appended (``\nNext action: ```CHOICE``` ``), so an agent
asking for choices always reads one of them.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence

from clew.agents.lm.base import (
    ChatRequest,
    Completion,
    ContextLengthError,
    LanguageModel,
    LMError,
    answer_suffix,
)
from clew.agents.parsing import answer_text
from clew.agents.usage import Usage

Responder = Callable[[ChatRequest, int], str]


class FakeLM(LanguageModel):
    """``script`` is a sequence of texts used in order, or ``responder(request, i) -> text``.

    ``latency`` (seconds) makes each ``generate`` call sleep, to model a server; ``jitter``
    (seconds) adds a random delay up to that much, drawn without a seed, so that concurrent calls
    finish in another order on every run. ``gpus`` says how many GPUs the model pretends to run
    on (for compute accounting; None: unknown, like a server). A text that is an
    ``Exception`` instance is raised instead of returned (to test failure handling). A
    ``(text, finish_reason)`` pair sets the finish reason (``"length"``: cut by the token limit).
    ``context_length`` (tokens, counted by the base class's estimate) makes it refuse longer
    requests the way a real server does, with :class:`ContextLengthError`.
    """

    def __init__(self, script: Sequence[str | Exception | tuple[str, str]] | Responder = (),
                 latency: float = 0.0, spec: str = "fake", context_length: int | None = None,
                 jitter: float = 0.0, gpus: int | None = None):
        self.script = script
        self.context_length = context_length
        self.latency, self.jitter, self.gpus = latency, jitter, gpus
        self._rng = random.Random()   # unseeded on purpose: the timing differs per run
        self.spec = spec
        self.calls: list[ChatRequest] = []
        self.batches: list[int] = []
        self._i = 0

    def _next(self, request: ChatRequest) -> str | tuple[str, str]:
        if callable(self.script):
            text = self.script(request, self._i)
        else:
            if self._i >= len(self.script):
                raise LMError(f"{self.spec}: script exhausted after {self._i} completions")
            text = self.script[self._i]
        self._i += 1
        if isinstance(text, Exception):
            raise text
        return text

    async def generate(self, requests: list[ChatRequest]) -> list[list[Completion]]:
        self.calls.extend(requests)
        self.batches.append(len(requests))
        if self.latency or self.jitter:
            await asyncio.sleep(self.latency + self._rng.uniform(0.0, self.jitter))
        out = []
        for req in requests:
            if self.context_length is not None:
                need = self.count_tokens(req.messages) + req.sampling.max_tokens
                if need > self.context_length:
                    raise ContextLengthError(f"{self.spec}: the request needs {need} tokens "
                                             f"(prompt + max_tokens); the context holds "
                                             f"{self.context_length}")
            prompt_tokens = sum(len(m["content"].split()) for m in req.messages)
            comps = []
            for _ in range(req.sampling.n):
                text, reason = self._next(req), "stop"
                if isinstance(text, tuple):
                    text, reason = text
                choices = req.sampling.choices
                if choices and answer_text(text, req.sampling.answer_phrase) not in choices:
                    suffix = answer_suffix(choices[0], req.sampling.answer_phrase)
                    text, reason = (f"{text}\n{suffix}" if text else suffix), "stop"
                comps.append(Completion(text, reason, Usage(prompt_tokens, len(text.split()), 1)))
            out.append(comps)
        return out
