"""Reading a model's reply into atomic actions and an intention (docs/methods/envs.md#textminigrid).

Rules (docs/methods/envs.md#textminigrid), after the shared answer rules of :mod:`clew.envs.answers`
(a reasoning block is dropped, one left open leaves no answer; markdown is made plain):

1. Take the **last** ``<actions>…</actions>`` block (tags in any case). A final block left open
   (generation cut at a stop string) counts up to the next tag or the end. Without any tag, a
   reply whose answer region (after the last answer label, the last fence, or the whole reply)
   consists only of action names (e.g. ``Turn Left, Go Forward``, ``Answer: Toggle``) is
   accepted; prose without tags is not mined for action words.
2. Split on ``,`` (also newlines and ``;``), strip spaces, list markers, quotes, backticks and
   trailing punctuation, compare case-insensitively with the aliases below.
3. Unrecognised pieces are skipped and reported; the first ``m`` recognised actions are kept and
   the rest reported as truncated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clew.envs.answers import plain, regions, without_reasoning

ACTIONS = ("Turn Left", "Turn Right", "Go Forward", "Pick Up", "Drop", "Toggle")

ALIASES = {
    "turn left": "Turn Left", "left": "Turn Left", "rotate left": "Turn Left",
    "turn right": "Turn Right", "right": "Turn Right", "rotate right": "Turn Right",
    "go forward": "Go Forward", "forward": "Go Forward", "move forward": "Go Forward",
    "pick up": "Pick Up", "pickup": "Pick Up",
    "drop": "Drop",
    "toggle": "Toggle",
}

_BLOCK = re.compile(r"<\s*actions\s*>(.*?)<\s*/\s*actions\s*>", re.IGNORECASE | re.DOTALL)
_OPEN = re.compile(r"<\s*actions\s*>", re.IGNORECASE)
_INTENT = re.compile(r"<\s*intentions?\s*>(.*?)<\s*/\s*intentions?\s*>", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"```[a-zA-Z]*")
_SPLIT = re.compile(r"[,;\n]")
_MARKER = re.compile(r"^\s*(?:[-*•]|\d+[.)]|\[|\()\s*")


@dataclass
class ParsedReply:
    """Actions kept (canonical names, at most m), plus what was skipped or cut."""

    actions: list[str] = field(default_factory=list)
    intention: str | None = None
    skipped: list[str] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)
    tagged: bool = False  # an <actions> block was found

    @property
    def ok(self) -> bool:
        return bool(self.actions)

    @property
    def canonical(self) -> str:
        return ",".join(self.actions)


def action_name(piece: str) -> str | None:
    """Canonical name of one action piece, or None."""
    text = _MARKER.sub("", piece)
    text = text.strip().strip("`'\"[]().!:").strip().lower()
    text = re.sub(r"[_\-\s]+", " ", text)
    return ALIASES.get(text)


def _actions_text(reply: str) -> tuple[str | None, bool]:
    blocks = _BLOCK.findall(reply)
    opens = list(_OPEN.finditer(reply))
    if opens:
        last_open = opens[-1]
        closed_ends = [m.end() for m in _BLOCK.finditer(reply)]
        if blocks and closed_ends and closed_ends[-1] > last_open.start():
            return blocks[-1], True
        rest = reply[last_open.end():]  # an unclosed final block
        return re.split(r"<", rest, maxsplit=1)[0], True
    return None, False


def _bare_list(text: str) -> str | None:
    bare = _FENCE.sub("", text).strip()
    bare = re.sub(r"^\s*actions?\s*:", "", bare, flags=re.IGNORECASE)
    pieces = [p for p in _SPLIT.split(bare) if p.strip()]
    if not pieces or any(action_name(p) is None for p in pieces):
        return None
    return bare


def parse_reply(reply: str, max_actions: int | None = None) -> ParsedReply:
    """Parse a model reply (or a bare comma-separated action list)."""
    out = ParsedReply()
    reply = without_reasoning(reply)
    if reply is None:
        return out
    reply = plain(reply)
    intents = _INTENT.findall(reply)
    if intents:
        out.intention = intents[-1].strip()
    body, out.tagged = _actions_text(reply)
    if body is None:
        body = next((b for r in regions(reply) if (b := _bare_list(r)) is not None), None)
        if body is None:
            return out
    body = _FENCE.sub("", body)
    for piece in _SPLIT.split(body):
        if not piece.strip():
            continue
        name = action_name(piece)
        if name is None:
            out.skipped.append(piece.strip())
        elif max_actions is not None and len(out.actions) >= max_actions:
            out.truncated.append(name)
        else:
            out.actions.append(name)
    return out
