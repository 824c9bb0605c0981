"""Token usage per LM role, aggregated per call, episode and run (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from clew.agents.parsing import ParseTally


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.calls += other.calls

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


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
