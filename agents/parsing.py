"""Reading answers out of completions, for every role, and counting what could not be read
(docs/methods/parsing.md).

Every reader first applies the shared answer rules of :mod:`clew.envs.answers` (the ones every
env's ``parse_action`` applies too): a reasoning block (``<think>…</think>``) is dropped and
one left open means no answer; markdown emphasis and headers are made plain; brackets,
backticks and quotes around a short answer are peeled off. Then, per role:

**Actions** (policy, ReAct, distilled). The candidate texts, tried in order:

1. after the *last* answer phrase (``Next action:``, any case, with or without markdown): its
   first fenced block (a fence left open runs to the end), or without a fence the rest of its
   line, tried first without a trailing explanation (``up, because left is blocked``);
2. the last fenced block anywhere;
3. the whole completion (envs that own their format: a bare JSON object, an ``<actions>``
   block), which the env reads with its own rules (labels, last explicit answer).

:func:`parse_action` returns the first candidate the env's ``parse_action`` accepts;
:func:`answer_text` (no env: the distilled agent, whose ``backtrack S<k>`` is not an env action)
returns the first candidate.

**Status codes** (single-agent value, judge): the letter A–E (any case; bold, in brackets,
parentheses or backticks) after the *last* ``STATUS CODE`` label that stands as an answer. A
label whose letter is followed by more words on its line (``STATUS CODE: A only if …``) is a
quotation of the scale, not an answer, unless those words give a reason (``C because several
moves remain``). Without such a label: the last ``Final answer:`` /
``Answer:`` / ``Grade:`` / ``Verdict:`` label, then a last line that is a lone letter, then a
JSON object with a ``status_code`` key.

**Value estimates** (the learned value, docs/methods/exploratory-learning.md#learned-value): a
number in [0, 1] after the *last* ``Value estimate:`` label (fenced or not), tried like an
action's candidates; a number outside [0, 1] is not an estimate.

**Rubrics**: the last ``<rubric>…</rubric>`` block; an unclosed final block counts when the
completion was not cut; without markers, the completion's bulleted or numbered lines. Markers
named rather than used (an echoed instruction: ``between <rubric> and </rubric>``) are not a
block.
**Free text** (debate arguments, reflections, expected observations): the text after the
reasoning block, without a leading markdown title, chat preamble (``Sure! Here is my argument
for …:``) or label naming what the role delivers (``Reflection:``, ``**Expected
observation:**``); empty means failure.

**Cut completions**: a completion whose ``finish_reason`` is ``"length"`` is a parse failure
unless a complete answer stands in it: a closed fence, a complete JSON object, a closed tag pair
or ``<…>`` span, an answer line followed by more text, a status letter followed by more text; a
cut free text keeps its complete sentences.

**Counting**: every role records each completion it read into ``usage.parses`` (a
:class:`ParseTally`), which the runner writes into the episode record and forwards to a run-wide
tally; the run-wide one stops the run with :class:`ParseFailureRate` when a role's failure rate
passes the configured threshold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from clew.envs.answers import (
    closed_spans,
    fenced_blocks,
    json_objects,
    labelled,
    plain,
    unwrap,
    with_head,
    without_reasoning,
)

ANSWER_PHRASE = "Next action:"
#: the phrase and letters of a constrained status code (``value.constrain``)
STATUS_PHRASE = "STATUS CODE:"
STATUS_LETTERS = ("A", "B", "C", "D", "E")
#: the phrase of the learned value's grade (``Value estimate: ```0.4``` ``)
VALUE_PHRASE = "Value estimate:"
RUBRIC_START, RUBRIC_END = "<rubric>", "</rubric>"
LENGTH = "length"            # the finish_reason of a completion cut by the token limit
EXAMPLES_KEPT = 3            # failing outputs kept per role, for the stop message

_LETTER = (r"[(\[{`'\"\s]*(?P<letter>[A-Ea-e])(?![A-Za-z0-9])[)\]}`'\"]*"
           r"(?P<after>[^\n]*)")
_STATUS = re.compile(
    r"status[\s_-]*code[\"']?\s*(?:(?:is|was|would\s+be|->|=>|\u2192|[:=\-\u2013\u2014])[\"']?"
    r"\s*)?" + _LETTER,
    re.IGNORECASE)
_OTHER = re.compile(
    r"(?:final\s+(?:answer|grade|verdict)|answer|grade|verdict|rating|status)\s*"
    r"(?:is|[:=\-\u2013\u2014])\s*" + _LETTER, re.IGNORECASE)
_ANSWER_END = re.compile(
    r"^\s*(?:$|[.,;!:)\]]?\s*$|[.,;!:)\]]\s|\.{2,}|\u2026|\s*[(\-\u2013\u2014:])"
    # a reason after the grade: "C because several moves remain"
    r"|^\s+(?:because|since|as|given|due\s+to|considering)\b", re.IGNORECASE)
_LONE = re.compile(r"^[(\[{`'\"\s]*([A-Ea-e])[)\]}`'\".!\s]*$")
_RUBRIC = re.compile(re.escape(RUBRIC_START) + r"(.*?)" + re.escape(RUBRIC_END),
                     re.DOTALL | re.IGNORECASE)
_RUBRIC_OPEN = re.compile(re.escape(RUBRIC_START), re.IGNORECASE)
# the markers named rather than used: "to be placed between <rubric> and </rubric>"
_RUBRIC_MENTION = re.compile(
    re.escape(RUBRIC_START) + r"(?:[^\S\n]|[`'\"*,/&.\u2026-]|\b(?:and|or|then|the|a|tags?|"
    r"markers?|opening|closing|your|checks?|here)\b)*" + re.escape(RUBRIC_END), re.IGNORECASE)
_LIST_LINE = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|\[\s?\])\s+\S")
# what a free-text role delivers, as models name it in a label or a preamble
_DELIVERABLE = (r"(?:reflection|argument|answer|response|prediction|"
                r"expectation|(?:expected|predicted)\s+(?:observation|outcome|result|transition)|"
                r"observation|what\s+I\s+expect\w*)")
_TEXT_LABEL = re.compile(
    r"^\s*(?:(?:my|the|final|supporting|opposing|counter)[\s-]+)?" + _DELIVERABLE +
    r"(?:\s+(?:for|against)\b[^:\n]{0,40})?\s*[:\-\u2013\u2014]\s*", re.IGNORECASE)
# a chat preamble: "Sure!", "Certainly.", "Here is my argument for ...:"
_PREAMBLE = re.compile(
    r"^\s*(?:(?:sure(?:\s+thing)?|certainly|of\s+course|absolutely|okay|ok|alright|all\s+right|"
    r"great|gladly)\s*(?:[!.,]+|\n)\s*"
    r"|(?:here(?:'s|\s+is|\s+are)|below\s+is|the\s+following\s+is)\b[^\n:.!]*?\b"
    + _DELIVERABLE + r"\b[^\n:.!]*(?:[:.!]|\n|$)\s*)", re.IGNORECASE)
_TITLE = re.compile(r"^#{1,6}[ \t][^\n]*\n")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
_OWN_LABEL = re.compile(r"^[A-Za-z][\w ]{0,30}:\s")


def _phrase_pattern(phrase: str) -> re.Pattern[str]:
    words = [re.escape(w) for w in phrase.rstrip(":").split()]
    return re.compile(r"\b" + r"\s+".join(words) + r"\s*(?:[:\-\u2013\u2014]|(?=\n))",
                      re.IGNORECASE)


_PHRASES: dict[str, re.Pattern[str]] = {}


def cut(finish_reason: str | None) -> bool:
    """Whether a completion was cut by the token limit."""
    return finish_reason == LENGTH


# --- actions -----------------------------------------------------------------------------------
def answer_candidates(text: str, phrase: str = ANSWER_PHRASE,
                      finish_reason: str | None = None) -> list[str]:
    """The candidate answer texts of a completion, in the order they are tried (see above)."""
    body = without_reasoning(text or "")
    if body is None:
        return []
    body = plain(body)
    is_cut = cut(finish_reason)
    out: list[str] = []
    if phrase:
        pattern = _PHRASES.setdefault(phrase, _phrase_pattern(phrase))
        last = None
        for last in pattern.finditer(body):
            pass
        if last is not None:
            after = body[last.end():]
            blocks = fenced_blocks(after, closed_only=is_cut)
            stripped = after.strip()
            if blocks and stripped.startswith("```"):
                out.append(blocks[0])
            elif stripped:
                line, newline, _ = stripped.partition("\n")
                if newline or not is_cut:
                    out += with_head(line.strip().strip("`").strip())
                if blocks:
                    out.append(blocks[0])
    if is_cut:
        out += [c for c in labelled(body, complete_only=True) if c]
        out += closed_spans(body)
    else:
        blocks = fenced_blocks(body)
        if blocks:
            out.append(blocks[-1])
        out.append(body.strip())
    seen: set[str] = set()
    return [c for c in out if c and not (c in seen or seen.add(c))]


def answer_text(text: str, phrase: str = ANSWER_PHRASE,
                finish_reason: str | None = None) -> str | None:
    """The answer text of a completion without asking an env (see the module docstring). With
    no env to judge it, the whole completion counts only when it is one line that does not
    start with a label of its own (``Assessment: …``): a bare action."""
    candidates = answer_candidates(text, phrase, finish_reason)
    whole = plain(without_reasoning(text or "") or "").strip()
    if candidates and candidates[0] == whole and ("\n" in whole or _OWN_LABEL.match(whole)):
        candidates = candidates[1:]
    return candidates[0] if candidates else None


def parse_action(env: Any, text: str, phrase: str = ANSWER_PHRASE,
                 finish_reason: str | None = None) -> str | None:
    """The env action a completion names: the first candidate ``env.parse_action`` accepts."""
    for candidate in answer_candidates(text, phrase, finish_reason):
        action = env.parse_action(candidate)
        if action:
            return str(action)
    return None


# --- value roles -------------------------------------------------------------------------------
def _answers(pattern: re.Pattern[str], body: str, is_cut: bool) -> list[str]:
    """The letters of every label of ``pattern`` in ``body`` that stands as an answer, in
    order; labels may share a line, so the search restarts after each label."""
    found = []
    i = 0
    while (m := pattern.search(body, i)) is not None:
        # cut right after the letter: the model may have been quoting the scale
        complete = not is_cut or bool(m.group("after").strip()) or m.end() < len(body)
        if _ANSWER_END.match(m.group("after")) and complete:
            found.append(m.group("letter").upper())
        i = m.start() + 1
    return found


def parse_status(text: str, finish_reason: str | None = None) -> str | None:
    """The status code letter of a value sample, or None (see the module docstring)."""
    body = without_reasoning(text or "")
    if body is None:
        return None
    body = plain(body)
    is_cut = cut(finish_reason)
    for pattern in (_STATUS, _OTHER):
        found = _answers(pattern, body, is_cut)
        if found:
            return found[-1]
    lines = [ln for ln in body.strip().splitlines() if ln.strip()]
    if lines and not is_cut:
        m = _LONE.match(lines[-1])
        if m:
            return m.group(1).upper()
    for obj in reversed(json_objects(body)):
        for key, value in obj.items():
            if re.fullmatch(r"status[\s_-]*code", str(key).strip(), re.IGNORECASE):
                letter = unwrap(str(value)).upper()
                if letter in STATUS_LETTERS:
                    return letter
    return None


_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")


def parse_estimate(text: str, finish_reason: str | None = None) -> float | None:
    """The learned value's estimate in [0, 1] of a completion, or None (see the module
    docstring): the first answer candidate after ``Value estimate:`` that is a lone number."""
    for candidate in answer_candidates(text, VALUE_PHRASE, finish_reason):
        if _NUMBER.fullmatch(candidate.strip()):
            x = float(candidate)
            if 0.0 <= x <= 1.0:
                return x
    return None


def parse_thoughts(text: str) -> str:
    """The reasoning of a value sample: after ``Thoughts:``, before its status code."""
    body = without_reasoning(text or "")
    body = plain(body if body is not None else text or "")
    m = re.search(r"Thoughts?\s*:\s*(.*?)(?:\n\s*STATUS[\s_-]*CODE|$)", body,
                  re.DOTALL | re.IGNORECASE)
    return (m.group(1) if m else body).strip()


def parse_rubric(text: str, finish_reason: str | None = None) -> str | None:
    """The rubric of a completion, or None (see the module docstring)."""
    body = without_reasoning(text or "")
    if body is None:
        return None
    body = _RUBRIC_MENTION.sub(" ", body)
    blocks = [b.strip() for b in _RUBRIC.findall(body) if b.strip()]
    if blocks:
        return blocks[-1]
    opens = list(_RUBRIC_OPEN.finditer(body))
    if opens and not cut(finish_reason):
        rest = body[opens[-1].end():].strip()
        return rest or None
    lines = body.splitlines()
    if cut(finish_reason):
        lines = lines[:-1]                 # the last line may be cut
    checks = [ln.strip() for ln in lines if _LIST_LINE.match(plain(ln))]
    return "\n".join(checks) if checks else None


def parse_free_text(text: str, finish_reason: str | None = None) -> str | None:
    """A debate argument, a reflection or an expected observation: the text after the reasoning
    block, without a leading title, chat preamble or label; a cut one keeps its complete
    sentences; None when nothing is left."""
    body = without_reasoning(text or "")
    if body is None:
        return None
    body = _TITLE.sub("", body.strip(), count=1)          # a markdown title is not content
    body = plain(body).strip()
    before = None
    while body != before:        # "Sure! Here is my argument:\nArgument: ..." peels one by one
        before = body
        body = _PREAMBLE.sub("", body, count=1)
        body = _TEXT_LABEL.sub("", body, count=1).strip()
    if cut(finish_reason):
        ends = list(_SENTENCE_END.finditer(body))
        body = body[:ends[-1].end()] if ends else ""
    return body or None


# --- counting ----------------------------------------------------------------------------------
class ParseFailureRate(RuntimeError):
    """A role's parse-failure rate passed the run's threshold; the message names the role, the
    model and three of its unreadable outputs."""


@dataclass
class RoleParses:
    """What one role read: completions, failures, the model, a few failing outputs."""

    outputs: int = 0
    failures: int = 0
    model: str = ""
    examples: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.failures / self.outputs if self.outputs else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"outputs": self.outputs, "failures": self.failures, "model": self.model,
                "examples": list(self.examples)}


class ParseTally(dict):
    """``{role: RoleParses}``. ``note`` adds completions read by a role; with a ``parent`` (the
    run's tally) they are counted there too. A tally with a ``limit`` = (rate, min_outputs)
    raises :class:`ParseFailureRate` once a role with at least ``min_outputs`` completions
    fails more often than ``rate``."""

    def __init__(self, parent: ParseTally | None = None,
                 limit: tuple[float, int] | None = None):
        super().__init__()
        self.parent, self.limit = parent, limit

    def note(self, role: str, model: str, results: list[tuple[bool, str]]) -> None:
        """``results``: (parsed, text) per completion read."""
        r = self.setdefault(role, RoleParses())
        r.model = model or r.model
        for ok, text in results:
            r.outputs += 1
            if not ok:
                r.failures += 1
                if len(r.examples) < EXAMPLES_KEPT:
                    r.examples.append(_clip(text))
        if self.parent is not None:
            self.parent.note(role, model, results)
        if self.limit is not None:
            self.check(role)

    def check(self, role: str) -> None:
        rate, min_outputs = self.limit
        r = self[role]
        if r.outputs >= min_outputs and r.rate > rate:
            samples = "\n".join(f"  output {i}: {_clip(t)!r}"
                                for i, t in enumerate(r.examples, 1))
            raise ParseFailureRate(
                f"role {role!r} could not read {r.failures} of {r.outputs} outputs "
                f"({r.rate:.0%}, threshold {rate:.0%} after {min_outputs}) from model "
                f"{r.model or '?'}; sample outputs:\n{samples}")

    def merge(self, data: dict[str, dict[str, Any]]) -> None:
        """Add counts written by :meth:`to_dict` (aggregating episode records)."""
        for role, d in data.items():
            r = self.setdefault(role, RoleParses())
            r.outputs += int(d.get("outputs", 0))
            r.failures += int(d.get("failures", 0))
            r.model = d.get("model") or r.model
            r.examples += list(d.get("examples", []))[:EXAMPLES_KEPT - len(r.examples)]

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {role: r.to_dict() for role, r in sorted(self.items())}


def _clip(text: str, n: int = 300) -> str:
    text = text or ""
    return text if len(text) <= n else text[:n] + f"... [{len(text) - n} more chars]"


def record(usage: Any, role: str, model: str, results: list[tuple[bool, str]]) -> None:
    """Count completions read by ``role`` into ``usage.parses`` (no-op without usage)."""
    tally = getattr(usage, "parses", None)
    if tally is not None:
        tally.note(role, model, results)
