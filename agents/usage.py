"""Token usage and compute per LM role, aggregated per call, episode and run
(docs/methods/recording.md#compute-accounting).

Tokens (``prompt_tokens``, ``completion_tokens``, ``calls``) are what an episode asked for and
repeat exactly on a rerun; they go in the record's ``usage``. Compute is how long it took and
where: ``engine_s`` (the time from sending each request to its answer, summed), ``busy_s`` (the
request's share of the time its model had requests in flight), ``gpu_s`` (``busy_s`` times the
GPUs the model runs on, where the backend knows them) and ``cached_tokens`` (prompt tokens served
from the engine's prefix cache, where the backend tells). They vary from run to run and go in the
record's ``compute``. Times are kept in whole microseconds so that sums do not depend on the
order in which concurrent calls finish.
"""

from __future__ import annotations

from dataclasses import dataclass

from clew.agents.parsing import ParseTally


def _add_known(a: int | None, b: int | None) -> int | None:
    """Sum of two counts that a backend may not know (None): unknown only when both are."""
    return None if a is None and b is None else (a or 0) + (b or 0)


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    #: prompt tokens the engine's prefix cache served (None: the backend does not tell)
    cached_tokens: int | None = None
    #: microseconds from sending the request to its answer
    engine_us: int = 0
    #: microseconds of the model's busy time that were this request's share
    busy_us: int = 0
    #: GPU-microseconds: ``busy_us`` times the model's GPUs (None: unknown)
    gpu_us: int | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.calls += other.calls
        self.cached_tokens = _add_known(self.cached_tokens, other.cached_tokens)
        self.engine_us += other.engine_us
        self.busy_us += other.busy_us
        self.gpu_us = _add_known(self.gpu_us, other.gpu_us)

    def to_dict(self) -> dict[str, int]:
        """The tokens (what the record's ``usage`` holds per role)."""
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "calls": self.calls}

    def compute(self) -> dict[str, float | int]:
        """The compute (what the record's ``compute`` holds per role); unknown fields left out."""
        out: dict[str, float | int] = {"engine_s": self.engine_us / 1e6,
                                       "busy_s": self.busy_us / 1e6}
        if self.gpu_us is not None:
            out["gpu_s"] = self.gpu_us / 1e6
        if self.cached_tokens is not None:
            out["cached_tokens"] = self.cached_tokens
        return out


class UsageByRole(dict):
    """``{role: Usage}``; ``record`` adds one call's usage under a role. ``parses`` counts the
    completions each role could and could not read (:class:`clew.agents.parsing.ParseTally`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.parses = ParseTally()

    def record(self, role: str, usage: Usage) -> None:
        self.setdefault(role, Usage()).add(usage)

    def total(self) -> Usage:
        out = Usage()
        for u in self.values():
            out.add(u)
        return out

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {role: u.to_dict() for role, u in sorted(self.items())}

    def compute(self) -> dict[str, dict[str, float | int]]:
        """Compute per role, for the roles that called a model."""
        return {role: u.compute() for role, u in sorted(self.items()) if u.calls}
