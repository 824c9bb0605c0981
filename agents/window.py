"""The chat window: which turns of an episode's chat a distilled model's prompt keeps
(docs/methods/exploratory-learning.md#distilled-agent).

One setting serves both sides, so a model sees at inference what it was trained on: ``clew
data`` cuts every training sample with it (the data config's ``window``, per env
``env_window``), and the distilled agent and a search's ``distilled_policy`` cut their prompts
with it (their ``window`` option). The window keeps the system turn (unless ``keep_system`` is
false), the first ``keep_first_pairs`` (user, assistant) pairs and the last
``keep_last_pairs``, the current one included; ``keep_last_pairs: null`` keeps every pair.
The default, 2 + 6 pairs with the system turn, is the training samples' cut the EL paper used.
``trail: true`` adds a compact history to every user turn instead of whole turns: the path of
state ids and actions from S0, and the branches already left from the current state
(:class:`clew.agents.distilled.Trail`).
"""

from __future__ import annotations

from typing import Any

from clew.records.compat import deprecated
from pydantic import BaseModel, ConfigDict, Field

Message = dict[str, Any]


class ChatWindow(BaseModel):
    """See the module docstring."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    keep_first_pairs: int = Field(2, ge=0)
    keep_last_pairs: int | None = Field(6, ge=1)
    keep_system: bool = True
    trail: bool = Field(False, description=(
        "every user turn ends with the path from S0 and the branches already left from the "
        "current state (docs/methods/exploratory-learning.md#the-trail)"))

    def apply(self, messages: list[Message]) -> list[Message]:
        """``messages`` cut to the window (no marker at the cut). A trailing user turn (a
        prompt awaiting its answer) counts as a pair, so a prompt at inference is cut exactly
        like the training sample that ends with its answer."""
        head = [m for m in messages[:1] if m["role"] == "system"]
        body = messages[len(head):]
        if not self.keep_system:
            head = []
        pairs = [body[i:i + 2] for i in range(0, len(body), 2)]
        first, last = self.keep_first_pairs, self.keep_last_pairs
        if last is None or len(pairs) <= first + last:
            return head + list(body)
        kept = pairs[:first] + pairs[len(pairs) - last:]
        return head + [m for p in kept for m in p]


def legacy_window(options: dict[str, Any], who: str) -> dict[str, Any]:
    """``options`` of a distilled agent or ``distilled_policy`` written before the window: its
    ``max_history_pairs`` (first + last), ``keep_first_pairs`` and ``keep_system`` read as
    ``window`` (with a warning naming it)."""
    old = {k: options[k] for k in ("max_history_pairs", "keep_first_pairs", "keep_system")
           if k in options}
    if not old:
        return options
    if "window" in options:
        raise ValueError(f"{who}: {', '.join(old)} and window are the same setting (the first "
                         f"is its old form): give window only")
    first = old.get("keep_first_pairs", 2)
    total = old.get("max_history_pairs", 8)
    if not isinstance(first, int) or first < 0:
        raise ValueError(f"{who}: keep_first_pairs must be >= 0, got {first!r}")
    if total is not None and (not isinstance(total, int) or total <= first):
        raise ValueError(f"{who}: max_history_pairs ({total}) must be greater than "
                         f"keep_first_pairs ({first}), or null")
    window = {"keep_first_pairs": first, "keep_last_pairs": None if total is None else total - first}
    if "keep_system" in old:
        window["keep_system"] = old["keep_system"]
    for key in old:
        deprecated(f"{who}: {key}", "window (keep_first_pairs, keep_last_pairs, keep_system)")
    return {**{k: v for k, v in options.items() if k not in old}, "window": window}
