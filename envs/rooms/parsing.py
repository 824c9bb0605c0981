"""Reading a model's reply as one visible object (docs/methods/envs.md#dark-treasure-rooms #18, #24).

Rules (the shared answer rules of :mod:`clew.envs.answers` first: reasoning blocks dropped, an
open one leaving no answer; markdown made plain; the text after the last answer label, then the
last fence, then the whole reply):

* In a region, the answer is the **first** ``<...>`` span that names a visible object (the
  family's own rule, which wins over the generic "last explicit answer" rule; spans naming
  nothing visible, such as the ``<door>`` of an example, are passed over). Inside a span,
  case, surrounding punctuation and the separators between words do not matter:
  ``<Dodger Blue door>``, ``< dodger_blue DOOR >`` and ``<dodger-blue door.>`` all read as
  ``dodger_blue door``. It must equal the full name (``<colour> <type>``) of an object
  visible now.
* [decision] A region without any ``<...>`` span is accepted only when it is exactly a visible
  object's name (also how heuristic agents hand canonical actions, ``"teal door"``, to the env;
  ``Answer: teal door``); anything longer without brackets is invalid.
* ``lenient=True`` also accepts a bare colour (``<teal>``) when exactly one visible object has
  that colour.

Decision: the first span, as the paper reads it (its prompt asks for one object in brackets):
a model that names its choice and then one it might try later (``<teal door> now; later maybe
<red ball>``) means the first. A model that lists the options before it chooses is read right
when it marks its choice with an answer label (``Answer: <red ball>``), which is tried before
the whole reply.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from clew.envs.answers import regions

TYPES = ("door", "ball", "key", "box")
_SPAN = re.compile(r"<([^<>]*)>")
_SEPARATORS = re.compile(r"[\s_\-]+")
_PUNCT = ".,;:!?'\"`*()[]{}"


def normalise(candidate: str) -> str:
    """``' Dodger Blue DOOR. '`` -> ``'dodger_blue door'``; a bare colour stays one word."""
    words = [w for w in _SEPARATORS.split(candidate.strip().strip(_PUNCT).lower()) if w]
    if len(words) >= 2 and words[-1] in TYPES:
        return "_".join(words[:-1]) + " " + words[-1]
    return "_".join(words)


def _object(candidate: str, visible: Sequence[str], lenient: bool) -> str | None:
    name = normalise(candidate)
    if name in visible:
        return name
    if lenient and name and " " not in name:
        hits = [obj for obj in visible if obj.rsplit(" ", 1)[0] == name]
        if len(hits) == 1:
            return hits[0]
    return None


def parse_reply(text: str, visible: Sequence[str], lenient: bool = False) -> str | None:
    """The visible object a reply names, or ``None`` (invalid reply)."""
    if not isinstance(text, str):
        return None
    for region in regions(text):
        spans = _SPAN.findall(region)
        if spans:
            for span in spans:
                obj = _object(span, visible, lenient)
                if obj is not None:
                    return obj
            continue
        name = normalise(region)
        if name in visible:
            return name
    return None
