"""What an agent sees of a web page: the goal and the pruned accessibility tree (docs/web.md).

BrowserGym flattens the page's accessibility tree to text (``flatten_axtree_to_str``), each element
an agent can act on shown with its BrowserGym id: ``[13] button 'Submit', clickable``. clew asks for
visible elements only and keeps ``generic`` containers (MiniWoB++ links are clickable ``<span>``s,
which BrowserGym's own ``skip_generic`` would hide), then drops the lines that carry nothing: bare
``generic`` containers without a name or property, ``InlineTextBox`` runs that repeat their
parent's text, and empty ``StaticText``. Local ``file://`` URLs are cut to their file name, so the
text does not depend on where the task pages are installed.

:func:`page_record` turns one BrowserGym observation into a :class:`PageRecord`: the text, the
elements (id, role, name, clickable), and a short digest of the page part of the text, the state
key that coverage and peek counts use (the goal and the last action's error are left out of it).
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

DROP_LINE = re.compile(r"^\s*(?:(?:\[[^\]]*\] )?generic|StaticText ''|InlineTextBox\b.*)\s*$")
FILE_URL = re.compile(r"file://[^'\"\s]*/")
ELEMENT = re.compile(r"^\t*\[(?P<bid>[^\]]+)\] (?P<role>[\w-]+)(?: (?P<name>'(?:[^'\\]|\\.)*'|"
                     r"\"(?:[^\"\\]|\\.)*\"))?(?P<rest>.*)$")
STATIC = re.compile(r"^\t*StaticText ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")
VALUE = re.compile(r"^ value=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\S+?)(?:,|$)")
#: roles whose element takes typed text (``fill``)
TEXT_ROLES = frozenset({"textbox", "searchbox", "combobox", "spinbutton"})


@dataclass(frozen=True)
class PageRecord:
    """A page as recorded after a reset or a step (what replays are checked against)."""

    goal: str
    tree: str                      # pruned accessibility tree text
    error: str = ""                # first line of the last action's error, if any
    reward: float = 0.0            # task reward of the step that led here
    done: bool = False             # the task ended (success or failure)
    elements: tuple[dict[str, Any], ...] = field(default=(), compare=False)

    @property
    def text(self) -> str:
        text = f"Goal: {self.goal}\n\nPage:\n{self.tree}"
        if self.error:
            text += f"\n\nThe last action failed: {self.error}"
        return text

    @property
    def key(self) -> str:
        """State key: digest of the page (no goal, no error): equal pages, equal keys."""
        return hashlib.blake2b(self.tree.encode(), digest_size=8).hexdigest()


def prune(tree: str) -> str:
    lines = [FILE_URL.sub("", line) for line in tree.splitlines() if not DROP_LINE.match(line)]
    return "\n".join(lines)


def _literal(quoted: str | None) -> str:
    if not quoted:
        return ""
    try:
        return str(ast.literal_eval(quoted))
    except (ValueError, SyntaxError):
        return quoted[1:-1]


def elements(tree: str) -> tuple[dict[str, Any], ...]:
    """Elements with an id, in page order, each once: ``{bid, role, name, value, text,
    clickable, checked}``; ``text`` is the name followed by the static text lines right under the element
    (a MiniWoB++ link is a nameless ``generic`` whose text is its child)."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    current: dict[str, Any] | None = None
    depth = 0
    for line in tree.splitlines():
        indent = len(line) - len(line.lstrip("\t"))
        m = ELEMENT.match(line)
        if m is None:
            text = STATIC.match(line)
            if current is not None and text and indent > depth:
                current["text"] = " ".join(filter(None, [current["text"], _literal(text[1])]))
            elif indent <= depth:
                current = None
            continue
        current = None
        if m["bid"] in seen:
            continue
        seen.add(m["bid"])
        value = VALUE.search(m["rest"])
        current = {"bid": m["bid"], "role": m["role"], "name": _literal(m["name"]),
                   "value": _literal(value[1]) if value else "",
                   "clickable": ", clickable" in m["rest"],
                   "checked": "checked='true'" in m["rest"]}
        current["text"] = current["name"]
        depth = indent
        out.append(current)
    return tuple(out)


def page_record(obs: dict[str, Any], reward: float = 0.0, done: bool = False,
                visible_only: bool = True) -> PageRecord:
    """The record of a BrowserGym observation dict (runs where the observation was made)."""
    from browsergym.utils.obs import flatten_axtree_to_str

    tree = flatten_axtree_to_str(obs["axtree_object"], extra_properties=obs["extra_element_properties"],
                                 with_clickable=True, skip_generic=False,
                                 filter_visible_only=visible_only)
    tree = prune(tree)
    error = (obs.get("last_action_error") or "").strip().splitlines()
    return PageRecord(goal=obs.get("goal") or "", tree=tree, error=error[0] if error else "",
                      reward=float(reward), done=bool(done), elements=elements(tree))
