"""Calling a model with usage accounting (spec_002 §7.3).

Every LM call made for an episode goes through :func:`call`, which adds the request's usage
(prompt tokens once, completion tokens over the ``n`` samples, one call) to
``episode.usage`` under the request's role, so ``episodes.jsonl`` can break tokens down by role.
"""

from __future__ import annotations

import asyncio
from typing import Any

from clew.agents.lm.base import ChatRequest, Completion, LanguageModel, request_usage


async def call(lm: LanguageModel, request: ChatRequest, episode: Any = None) -> list[Completion]:
    """``lm.complete(request)``; its usage is recorded in ``episode.usage`` by ``request.role``."""
    completions = await lm.complete(request)
    if episode is not None:
        episode.usage.record(request.role, request_usage(completions))
    return completions


async def call_many(lm: LanguageModel, requests: list[ChatRequest],
                    episode: Any = None) -> list[list[Completion]]:
    """Several requests sent concurrently (e.g. the two debaters), each one recorded."""
    return list(await asyncio.gather(*(call(lm, r, episode) for r in requests)))
