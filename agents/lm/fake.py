"""Scripted backend for tests (DESIGN §2): answers come from a list, a dict or a function.

Every request it receives is kept in ``calls`` so tests can assert call patterns (one request
with ``n`` samples for a policy, two concurrent debate arguments, ...).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from clew.agents.lm.base import ChatRequest, Completion, LanguageModel, LMError
from clew.agents.usage import Usage

Responder = Callable[[ChatRequest, int], str]


class FakeLM(LanguageModel):
    """``script`` is a sequence of texts used in order, or ``responder(request, i) -> text``.

    ``latency`` (seconds) makes each ``generate`` call sleep, to model a server. A text that is an
    ``Exception`` instance is raised instead of returned (to test failure handling).
    """

    def __init__(self, script: Sequence[str | Exception] | Responder = (), latency: float = 0.0,
                 spec: str = "fake"):
        self.script = script
        self.latency = latency
        self.spec = spec
        self.calls: list[ChatRequest] = []
        self.batches: list[int] = []
        self._i = 0

    def _next(self, request: ChatRequest) -> str:
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
        if self.latency:
            await asyncio.sleep(self.latency)
        out = []
        for req in requests:
            prompt_tokens = sum(len(m["content"].split()) for m in req.messages)
            comps = []
            for _ in range(req.sampling.n):
                text = self._next(req)
                comps.append(Completion(text, "stop", Usage(prompt_tokens, len(text.split()), 1)))
            out.append(comps)
        return out
