"""The grid map's action grammar: a direction out of a model's reply
(docs/methods/envs.md#grid-map-with-task-dag).

The last ``{"action": ...}`` object whose value is a direction wins; then ``action: <dir>``
written loosely; then a reply that is just a direction word (quotes, code fences, punctuation and
case ignored); then prose that names exactly one direction, or whose last "move/go/head <dir>"
phrase names one; direction words in another sense ("nothing left to do", "the right choice",
"pick up") are not read as moves. Anything else is unparsable. A stop/done action does not exist
in this env.
"""

from __future__ import annotations

import re
from typing import Any

from clew.envs.answers import json_objects, other_senses_dropped, regions
from clew.envs.gridmap.instance import DIRECTIONS

_LOOSE_KV = re.compile(r"""["']?\baction\b["']?\s*[:=]\s*["'`]?\s*([A-Za-z]+)""", re.IGNORECASE)
_WORD = re.compile(r"\b(up|down|left|right)\b", re.IGNORECASE)
_VERB = re.compile(r"\b(?:move|moving|go|going|head|heading|step|choose|take)\s+(?:to\s+the\s+)?"
                   r"(up|down|left|right)\b", re.IGNORECASE)
_STRIP = " \t\r\n`'\".,;:!?*()[]<>"


def parse_direction(text: Any) -> str | None:
    """A direction from a model's reply, tolerant of case, markdown, fences, reasoning blocks
    and prose (the rules in the module docstring); else None."""
    if not isinstance(text, str):
        return None
    low = text.strip().lower()
    if low in DIRECTIONS:  # fast path: canonical actions (metric replays, heuristic agents)
        return low
    for region in regions(text):
        found, direction = _direction_in(region)
        if found:
            return direction
    return None


def _direction_in(text: str) -> tuple[bool, str | None]:
    """(whether ``text`` holds an explicit answer, its direction)."""
    found_json = False
    last: str | None = None
    for obj in json_objects(text):
        for key, value in obj.items():
            if str(key).strip().lower() == "action":
                found_json = True
                d = _clean(value)
                if d is not None:
                    last = d
    if last is not None or found_json:  # an explicit action object decides, valid or not
        return True, last
    loose = [_clean(m.group(1)) for m in _LOOSE_KV.finditer(text)]
    if loose:
        return loose[-1] is not None, loose[-1]
    word = _clean(text.replace("```json", "").replace("```", ""))
    if word is not None:
        return True, word
    prose = other_senses_dropped(text)  # "nothing left to do" names no move
    words = {w.lower() for w in _WORD.findall(prose)}
    if len(words) == 1:
        return True, words.pop()
    verbs = {v.lower() for v in _VERB.findall(prose)}
    if len(verbs) == 1:  # prose naming two moves is ambiguous, whatever their order
        return True, verbs.pop()
    return False, None


def _clean(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    v = value.strip(_STRIP).lower()
    return v if v in DIRECTIONS else None
