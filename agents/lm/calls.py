"""The one path by which roles and agents call a model: usage accounting per role.

:func:`call` sends one request and adds its usage (prompt tokens once, completion tokens over the
``n`` samples, one call) to ``usage`` under the request's role, so ``episodes.jsonl`` breaks
tokens down by role. It does not retry: the backends retry transport failures themselves (the
``openai`` backend: connection errors, timeouts, 408/409/429, 5xx) and raise
:class:`~clew.agents.lm.base.LMError` when they give up; any other exception is a bug and
propagates with its traceback.
"""

from __future__ import annotations

from clew.agents.lm.base import ChatRequest, Completion, LanguageModel, request_usage
from clew.agents.usage import UsageByRole


async def call(lm: LanguageModel, request: ChatRequest,
               usage: UsageByRole | None = None) -> list[Completion]:
    """``lm.complete(request)``; its usage is recorded under ``request.role``."""
    completions = await lm.complete(request)
    if usage is not None:
        usage.record(request.role, request_usage(completions))
    return completions
