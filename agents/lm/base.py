"""One async interface to language models (DESIGN §2 "Language models").

``LanguageModel.generate(requests) -> list[list[Completion]]``: one list of ``n`` completions per
request. Backends batch whatever arrives concurrently; callers send ``n`` samples as one request
so the prompt is processed once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from clew.agents.usage import Usage

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": ...}


class LMError(RuntimeError):
    """A model call failed for good (after the backend's retries); the message names the model."""


@dataclass
class Sampling:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256
    stop: list[str] | None = None
    seed: int | None = None
    logprobs: int | None = None


@dataclass
class ChatRequest:
    messages: list[Message]
    sampling: Sampling = field(default_factory=Sampling)
    #: who is asking (policy, value, debate, judge, reflection, simulate): for usage accounting
    role: str = "other"


@dataclass
class Completion:
    text: str
    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)
    logprobs: list[Any] | None = None


class LanguageModel(ABC):
    """Base of all backends. ``spec`` is the model spec string it was built from."""

    spec: str = ""

    @abstractmethod
    async def generate(self, requests: list[ChatRequest]) -> list[list[Completion]]:
        """Complete each request with ``request.sampling.n`` samples."""

    async def complete(self, request: ChatRequest) -> list[Completion]:
        """Convenience for one request."""
        return (await self.generate([request]))[0]

    async def aclose(self) -> None:
        return None


def request_usage(completions: list[Completion]) -> Usage:
    """Usage of one request: the prompt is counted once, completions summed, one call."""
    if not completions:
        return Usage(calls=1)
    return Usage(
        prompt_tokens=completions[0].usage.prompt_tokens,
        completion_tokens=sum(c.usage.completion_tokens for c in completions),
        calls=1,
    )
