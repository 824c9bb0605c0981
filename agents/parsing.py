"""Reading answers out of completions, for every role: actions (policy, ReAct, distilled), status
codes (single-agent value, judge) and rubrics.

**Actions.** One rule for every agent that reads an action (``docs/methods/baselines.md#react``).
The candidate texts, in the order they are tried:

1. after the *last* answer phrase (``Next action:``): its first fenced block, or, without a
   fence, the rest of that line;
2. the last fenced block anywhere;
3. the whole completion (envs that own their format: a bare JSON object, an ``<actions>`` block).

:func:`parse_action` returns the first candidate the env's ``parse_action`` accepts;
:func:`answer_text` (no env: the distilled agent, whose ``backtrack S<k>`` is not an env action)
returns the first candidate. A fence whose first line is a lone word (```` ```json ````) drops it
as a language tag, unless nothing follows (```` ```right``` ```` holds ``right``).

Decision: the policy parser and the ReAct parser disagreed on ``Next action: right`` (a phrase
with no fence): the policy read ``right``, ReAct read nothing. The rule above reads ``right``:
instruct models often skip the fence, and the phrase is an explicit answer. Unparsable answers
are never fatal: callers send the raw text to the env, which records an invalid step.

**Status codes.** The first ``STATUS CODE: <A-E>`` (case-sensitive letter) in a sample; its
reasoning is the text after ``Thoughts:``.
**Rubrics.** The text between ``<rubric>`` and ``</rubric>``; without markers the whole text.
"""

from __future__ import annotations

import re
from typing import Any

ANSWER_PHRASE = "Next action:"
RUBRIC_START, RUBRIC_END = "<rubric>", "</rubric>"

_FENCE = re.compile(r"```(.*?)```", re.DOTALL)
_LANG_TAG = re.compile(r"[\w+.-]*")
_STATUS = re.compile(r"STATUS CODE:\s*([A-E])")


# --- actions -----------------------------------------------------------------------------------
def fenced_blocks(text: str) -> list[str]:
    """Contents of the triple-backtick blocks of ``text``, language tags dropped."""
    out = []
    for m in _FENCE.finditer(text):
        inner = m.group(1)
        first, newline, rest = inner.partition("\n")
        if newline and _LANG_TAG.fullmatch(first.strip()) and rest.strip():
            inner = rest
        out.append(inner.strip())
    return out


def answer_candidates(text: str, phrase: str = ANSWER_PHRASE) -> list[str]:
    """The candidate answer texts of a completion, in the order they are tried."""
    text = text or ""
    out: list[str] = []
    i = text.rfind(phrase) if phrase else -1
    if i >= 0:
        after = text[i + len(phrase):]
        blocks = fenced_blocks(after)
        if blocks:
            out.append(blocks[0])
        elif after.strip():
            out.append(after.strip().splitlines()[0].strip().strip("`").strip())
    blocks = fenced_blocks(text)
    if blocks:
        out.append(blocks[-1])
    out.append(text.strip())
    seen: set[str] = set()
    return [c for c in out if c and not (c in seen or seen.add(c))]


def answer_text(text: str, phrase: str = ANSWER_PHRASE) -> str | None:
    """The answer text of a completion without asking an env (see the module docstring)."""
    candidates = answer_candidates(text, phrase)
    return candidates[0] if candidates else None


def parse_action(env: Any, text: str, phrase: str = ANSWER_PHRASE) -> str | None:
    """The env action a completion names: the first candidate ``env.parse_action`` accepts."""
    for candidate in answer_candidates(text, phrase):
        action = env.parse_action(candidate)
        if action:
            return str(action)
    return None


# --- value roles -------------------------------------------------------------------------------
def parse_status(text: str) -> str | None:
    """The first ``STATUS CODE: <A-E>`` of a value sample, or None."""
    m = _STATUS.search(text or "")
    return m.group(1) if m else None


def parse_thoughts(text: str) -> str:
    """The reasoning of a value sample: after ``Thoughts:``, before its status code."""
    m = re.search(r"Thoughts?:\s*(.*?)(?:\n\s*STATUS CODE:|$)", text or "", re.DOTALL)
    return (m.group(1) if m else text or "").strip()


def parse_rubric(text: str) -> str:
    """Between the markers; without them the whole text; empty -> ``"None"``."""
    m = re.search(re.escape(RUBRIC_START) + r"(.*?)" + re.escape(RUBRIC_END), text, re.DOTALL)
    out = (m.group(1) if m else text).strip()
    return out or "None"
