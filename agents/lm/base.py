"""One async interface to language models (docs/architecture.md#language-models).

``LanguageModel.generate(requests) -> list[list[Completion]]``: one list of ``n`` completions per
request. Backends batch whatever arrives concurrently; callers send ``n`` samples as one request
so the prompt is processed once.

Context (docs/methods/parsing.md#context-length): every backend says how many tokens its model
takes, prompt and completion together (``context_length``; ``None`` when unknown), and counts the
tokens of a chat prompt (``count_tokens``): with the model's tokenizer where the backend has one,
else with :func:`estimate_tokens`, a deliberate over-estimate. Roles fit their prompts to
``context_length - max_tokens`` (:mod:`clew.agents.fitting`); a request that cannot fit raises
:class:`ContextLengthError`, which fails that episode only.
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from clew.agents.parsing import ANSWER_PHRASE
from clew.agents.usage import Usage

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": ...}


class LMError(RuntimeError):
    """A model call failed for good (after the backend's retries); the message names the model."""


class ContextLengthError(RuntimeError):
    """A request does not fit the model's context, even with its history left out. Not an
    :class:`LMError`: the runner records the episode as failed with reason ``context_length``
    and the run goes on."""


#: tokens of chat-template framing counted per message and once per prompt by the estimate
MESSAGE_OVERHEAD, PROMPT_OVERHEAD = 8, 32
_PIECES = re.compile(r"[A-Za-z]+|[0-9]|\n+|[ \t]{2,}|[^\sA-Za-z0-9]")


def estimate_tokens(messages: list[Message]) -> int:
    """A token count for a chat prompt without a tokenizer, meant to over-count.

    Runs of letters count one token per 4 letters (rounded up; BPE vocabularies of
    instruction-tuned models hold most English words whole, so this over-counts prose), runs
    of capitals one per 2 (codes such as ``GK;EM;`` split more often), every
    digit and every other symbol one token, every non-ASCII character one token per UTF-8 byte
    (a byte-level BPE never needs more), single spaces none (they join the next word), and
    ``MESSAGE_OVERHEAD`` per message plus ``PROMPT_OVERHEAD`` for the chat template.
    """
    total = PROMPT_OVERHEAD
    for m in messages:
        total += MESSAGE_OVERHEAD
        for piece in _PIECES.findall(m.get("content") or ""):
            if piece[0].isascii() and piece[0].isalpha():
                total += (len(piece) + 1) // 2 if piece.isupper() else (len(piece) + 3) // 4
            elif piece.isascii():
                total += 1
            else:
                total += len(piece.encode("utf-8"))
    return total


@dataclass
class Sampling:
    """How to sample a request's ``n`` completions.

    ``choices`` constrains the answer (docs/methods/parsing.md#constrained-answers): every
    completion then ends with ``answer_phrase``, a space and one of ``choices`` inside a
    triple-backtick fence, exactly as the action parser reads it
    (``Next action: ```up``` ``, :func:`answer_suffix`); the text before the phrase
    (reasoning, ``Assessment: ...``) stays free. ``None`` (the default) constrains nothing.
    Each backend guarantees it its own way: hf scores the choices (exact), vLLM and vLLM's
    OpenAI server decode under :func:`choices_regex`.
    """

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256
    stop: list[str] | None = None
    seed: int | None = None
    logprobs: int | None = None
    #: the answers allowed after ``answer_phrase`` (None: unconstrained)
    choices: list[str] | None = None
    #: the phrase a constrained answer follows (the parser's ``ANSWER_PHRASE``)
    answer_phrase: str = ANSWER_PHRASE


#: the fence around a constrained answer (``Next action: ```up``` ``)
FENCE = "```"


def answer_suffix(choice: str, phrase: str = ANSWER_PHRASE) -> str:
    """How a constrained completion ends: ``Next action: ```CHOICE``` ``."""
    return f"{phrase} {FENCE}{choice}{FENCE}"


def choices_regex(choices: list[str], phrase: str = ANSWER_PHRASE) -> str:
    """A regex for structured-output decoders (vLLM): free text, then the answer phrase and
    one of ``choices`` in the fence, then the end."""
    def escape(text: str) -> str:   # re.escape, spaces left bare (xgrammar warns on "\ ")
        return re.escape(text).replace("\\ ", " ")

    options = "|".join(escape(c) for c in choices)
    return rf"[\s\S]*{escape(f'{phrase} {FENCE}')}({options}){escape(FENCE)}"


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


class BusyClock:
    """Splits a model's busy time among the requests in flight (docs/methods/recording.md#compute-accounting):
    while k requests are in flight each is charged 1/k of the elapsed time, so the shares of all
    requests add up to the time the model had any request in flight."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.last = 0.0
        self.charged = 0.0   # seconds charged to each request in flight since the clock began

    def _advance(self, now: float) -> float:
        if self.in_flight:
            self.charged += (now - self.last) / self.in_flight
        self.last = now
        return self.charged

    def start(self, now: float) -> float:
        mark = self._advance(now)
        self.in_flight += 1
        return mark

    def stop(self, now: float, mark: float) -> float:
        """The share of the request started at ``mark``."""
        share = self._advance(now) - mark
        self.in_flight -= 1
        return share


class LanguageModel(ABC):
    """Base of all backends. ``spec`` is the model spec string it was built from;
    ``context_length`` the tokens one request may hold, prompt and completion (None: unknown,
    prompts are not fitted); ``gpus`` the GPUs the model runs on, where the backend knows them
    (None: unknown, e.g. behind a server)."""

    spec: str = ""
    context_length: int | None = None
    gpus: int | None = None

    def count_tokens(self, messages: list[Message]) -> int:
        """Tokens of the chat prompt ``messages``; default: :func:`estimate_tokens`."""
        return estimate_tokens(messages)

    @abstractmethod
    async def generate(self, requests: list[ChatRequest]) -> list[list[Completion]]:
        """Complete each request with ``request.sampling.n`` samples."""

    async def complete(self, request: ChatRequest) -> list[Completion]:
        """One request, timed: its completions carry the request's engine and busy time
        (:class:`~clew.agents.usage.Usage`; docs/methods/recording.md#compute-accounting)."""
        clock = self.__dict__.get("_busy_clock")
        if clock is None:   # backends do not call a base __init__: made on first use
            clock = self._busy_clock = BusyClock()
        start = time.perf_counter()
        mark = clock.start(start)
        try:
            completions = (await self.generate([request]))[0]
        finally:
            end = time.perf_counter()
            share = clock.stop(end, mark)
        engine_us, busy_us = round((end - start) * 1e6), round(share * 1e6)
        gpu_us = None if self.gpus is None else busy_us * self.gpus
        for c in completions:
            c.usage.engine_us, c.usage.busy_us, c.usage.gpu_us = engine_us, busy_us, gpu_us
        return completions

    async def aclose(self) -> None:
        return None


class LocalTokenizerModel(LanguageModel):
    """A backend that holds the model's own tokenizer (``self.tokenizer``: hf, vLLM): prompts
    are counted exactly as the model renders them."""

    tokenizer: Any

    def count_tokens(self, messages: list[Message]) -> int:
        """Tokens of the rendered chat prompt, with the model's tokenizer."""
        return len(self.prompt_ids(messages))

    def prompt_ids(self, messages: list[Message]) -> list[int]:
        """Token ids of the rendered chat prompt (what usage counts as prompt tokens)."""
        text = self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=True)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]


def request_usage(completions: list[Completion]) -> Usage:
    """Usage of one request: the prompt (its cached part and the request's times too) counted
    once, completions summed, one call."""
    if not completions:
        return Usage(calls=1)
    first = completions[0].usage
    return Usage(
        prompt_tokens=first.prompt_tokens,
        completion_tokens=sum(c.usage.completion_tokens for c in completions),
        calls=1, cached_tokens=first.cached_tokens, engine_us=first.engine_us,
        busy_us=first.busy_us, gpu_us=first.gpu_us,
    )
