"""Reading a model's reply as one visible object (spec_001 §2.8, §5 #18, #24).

Rules:

* Reasoning blocks are dropped first: everything up to the last ``</think>`` (so a
  ``<think>`` tag is never taken for the answer).
* The answer is the first ``<...>`` span. Inside it, case, surrounding punctuation and the
  separators between words do not matter: ``<Dodger Blue door>``, ``< dodger_blue DOOR >`` and
  ``<dodger-blue door.>`` all read as ``dodger_blue door``. It must then equal the full name
  (``<colour> <type>``) of an object visible now.
* [decision] A reply without any ``<...>`` span is accepted only when the whole reply is
  exactly a visible object's name (this is also how heuristic agents hand canonical actions,
  ``"teal door"``, to the env); anything longer without brackets is invalid.
* ``lenient=True`` also accepts a bare colour (``<teal>``) when exactly one visible object has
  that colour.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

TYPES = ("door", "ball", "key", "box")
_SPAN = re.compile(r"<([^<>]*)>")
_THINK_END = re.compile(r"</think\s*>", re.IGNORECASE)
_SEPARATORS = re.compile(r"[\s_\-]+")
_PUNCT = ".,;:!?'\"`*()[]{}"


def final_answer(text: str) -> str:
    """The reply without its reasoning block (text after the last ``</think>``)."""
    parts = _THINK_END.split(text)
    return parts[-1]


def normalise(candidate: str) -> str:
    """``' Dodger Blue DOOR. '`` -> ``'dodger_blue door'``; a bare colour stays one word."""
    words = [w for w in _SEPARATORS.split(candidate.strip().strip(_PUNCT).lower()) if w]
    if len(words) >= 2 and words[-1] in TYPES:
        return "_".join(words[:-1]) + " " + words[-1]
    return "_".join(words)


def parse_reply(text: str, visible: Sequence[str], lenient: bool = False) -> str | None:
    """The visible object a reply names, or ``None`` (invalid reply)."""
    if not isinstance(text, str):
        return None
    answer = final_answer(text)
    match = _SPAN.search(answer)
    candidate = normalise(match.group(1) if match else answer)
    if not candidate:
        return None
    if candidate in visible:
        return candidate
    if match is None:
        return None
    if lenient and " " not in candidate:
        hits = [obj for obj in visible if obj.rsplit(" ", 1)[0] == candidate]
        if len(hits) == 1:
            return hits[0]
    return None
