"""Checks and text helpers shared by the backends, so they honour ``Sampling`` the same way."""

from __future__ import annotations

from clew.agents.lm.base import FENCE, LMError, Sampling


def validate_sampling(name: str, s: Sampling) -> None:
    """Reject sampling settings no backend can honour, naming the model and the field."""
    if s.n < 1:
        raise LMError(f"{name}: sampling n must be >= 1, got {s.n}")
    if s.max_tokens < 1:
        raise LMError(f"{name}: sampling max_tokens must be >= 1, got {s.max_tokens}")
    if not 0.0 < s.top_p <= 1.0:
        raise LMError(f"{name}: sampling top_p must be in (0, 1], got {s.top_p}")
    if s.temperature < 0:
        raise LMError(f"{name}: sampling temperature must be >= 0, got {s.temperature}")
    if s.logprobs is not None and s.logprobs < 0:
        raise LMError(f"{name}: sampling logprobs must be >= 0, got {s.logprobs}")
    if s.choices is not None:
        if not s.choices:
            raise LMError(f"{name}: sampling choices must be None or a non-empty list")
        bad = [c for c in s.choices if not isinstance(c, str) or not c.strip() or FENCE in c]
        if bad:
            raise LMError(f"{name}: sampling choices must be non-empty strings without "
                          f"{FENCE}, got {bad[:3]!r}")
        if not s.answer_phrase.strip():
            raise LMError(f"{name}: sampling answer_phrase must not be empty with choices")


def cut_at_stop(text: str, stops: list[str] | None) -> tuple[str, bool]:
    """Text before the earliest stop string, and whether one was found."""
    best = -1
    for s in stops or ():
        if s:
            i = text.find(s)
            if i >= 0 and (best < 0 or i < best):
                best = i
    return (text, False) if best < 0 else (text[:best], True)
