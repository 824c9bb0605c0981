"""LM policy: proposals with priors from sampled-action frequencies (spec_002 §1.3, §8.1).

One request with ``n = max(2b, n_min)`` samples (the prompt is processed once), each completion
parsed (answer phrase + fence, then ``env.parse_action``), identical actions merged by
``env.canonical``, the top-b kept by count (ties: first appearance), priors renormalised over the
kept ones. The representative raw text of an action is its first sample.

Also home of :func:`lm_call`, the one place where roles call a model: it records usage per role
(prompt tokens once per request, completions summed; spec_002 §7.3) and retries failed requests.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clew.agents.lm.base import (
    ChatRequest,
    Completion,
    LanguageModel,
    LMError,
    Sampling,
    request_usage,
)
from clew.agents.prompts import Context, extract_action_text, policy_messages
from clew.agents.usage import UsageByRole


@dataclass
class Proposal:
    """A merged candidate action (what the MCTS core turns into an edge)."""

    action: str | None
    key: str
    raw: str
    count: int = 1
    prior: float = 0.0
    is_stop: bool = False


def merge_samples(samples: Sequence[Proposal], b: int) -> list[Proposal]:
    """Merge by key, count, keep the top-b by count (stable: first appearance wins ties) and
    renormalise priors over the kept ones (spec_002 §1.3 steps 4–6)."""
    merged: dict[str, Proposal] = {}
    for s in samples:
        if s.action is None:
            continue
        if s.key in merged:
            merged[s.key].count += s.count
        else:
            merged[s.key] = Proposal(s.action, s.key, s.raw, s.count, 0.0, s.is_stop)
    kept = sorted(merged.values(), key=lambda p: -p.count)[:b]   # sorted() is stable
    total = sum(p.count for p in kept)
    for p in kept:
        p.prior = p.count / total
    return kept


def derive_seed(base: int | None, *parts: Any) -> int | None:
    """Per-request seed from (run seed, task, step, node, role) (spec_002 D20); salt-free."""
    if base is None:
        return None
    return zlib.crc32(":".join(str(p) for p in (base, *parts)).encode()) & 0x7FFFFFFF


async def lm_call(lm: LanguageModel, request: ChatRequest, usage: UsageByRole | None,
                  retries: int = 0, what: str = "") -> list[Completion]:
    """One request; usage recorded under ``request.role``; ``retries`` extra attempts on error.

    After the last attempt the error is raised as :class:`LMError` naming the role and model.
    """
    last: Exception | None = None
    for _ in range(retries + 1):
        try:
            comps = await lm.complete(request)
        except Exception as exc:  # noqa: BLE001 - any backend failure is retried, then reported
            last = exc
            continue
        if usage is not None:
            usage.record(request.role, request_usage(comps))
        return comps
    label = what or request.role
    raise LMError(f"{label} call to model {getattr(lm, 'spec', '?')!r} failed after "
                  f"{retries + 1} attempt(s): {type(last).__name__}: {last}") from last


class LMPolicy:
    """``propose(ctx) -> ranked proposals``; see the module docstring."""

    kind = "lm"

    def __init__(self, lm: LanguageModel, branching_factor: int = 5, n_samples_min: int = 20,
                 temperature: float = 1.0, top_p: float = 0.95, max_tokens: int = 384,
                 retries: int = 0, reflection_max_words: int = 128):
        self.lm = lm
        self.b = branching_factor
        self.n = max(2 * branching_factor, n_samples_min)
        self.sampling = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}
        self.retries = retries
        self.reflection_max_words = reflection_max_words

    def parse(self, ctx: Context, text: str) -> Proposal:
        env = ctx.env
        inner = extract_action_text(text)
        action = env.parse_action(inner) if inner is not None else None
        if action is None:
            return Proposal(None, "", text, 1)
        return Proposal(action, env.canonical(action), text, 1, 0.0, bool(env.is_stop(action)))

    async def propose(self, ctx: Context, reflections: Sequence[dict] = (),
                      usage: UsageByRole | None = None, n: int | None = None) -> list[Proposal]:
        request = ChatRequest(
            policy_messages(ctx, reflections, max_words=self.reflection_max_words),
            Sampling(n=n or self.n, seed=derive_seed(ctx.seed, "policy"), **self.sampling),
            role="policy")
        comps = await lm_call(self.lm, request, usage, self.retries, "policy")
        return merge_samples([self.parse(ctx, c.text) for c in comps], self.b)

    async def act_once(self, ctx: Context, usage: UsageByRole | None = None,
                       temperature: float = 0.7, top_p: float = 0.9) -> Proposal:
        """One ReAct-style sample (spec_002 §5.2); unparsable -> Proposal with action None."""
        request = ChatRequest(policy_messages(ctx),
                              Sampling(n=1, temperature=temperature, top_p=top_p,
                                       max_tokens=self.sampling["max_tokens"],
                                       seed=derive_seed(ctx.seed, "react")), role="policy")
        comps = await lm_call(self.lm, request, usage, self.retries, "policy")
        return self.parse(ctx, comps[0].text if comps else "")
