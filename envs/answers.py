"""Text rules for reading an answer out of a model's reply, shared by every env's
``parse_action`` and by clew's role parsers (:mod:`clew.agents.parsing`), so that all of them
tolerate the same output habits of instruction-tuned models (docs/methods/parsing.md).

The rules, each a small function:

* :func:`without_reasoning`: a reasoning block (``<think>…</think>``, also ``<thinking>`` and
  ``<reasoning>``) is never part of the answer: the text after the last closing tag is kept; a
  block opened and never closed (generation cut while thinking) leaves no answer (``None``).
* :func:`plain`: markdown emphasis and headers are dropped (``**STATUS CODE:** B``,
  ``### Status code: C``, ``__up__``); underscores inside words (``dodger_blue``, ``x_0``) stay;
  LaTeX around a short answer goes (``\\boxed{B}``, ``$\\text{up}$``, ``\\[ \\boxed{C} \\]``).
* :func:`unwrap`: brackets, parentheses, backticks, quotes and trailing punctuation around a
  short answer are peeled off (``(D)``, ``[E]``, `` `E` ``, ``"up".``).
* :func:`fenced_blocks`: the contents of triple-backtick fences, a final fence left open
  included (it runs to the end of the text).
* :func:`labelled`: the text after answer labels (``Answer:``, ``Final answer:``, ``Action:``,
  ``Next move:`` …) at the start of a line, last label first: the last explicit answer wins.
  An answer line is tried first without a trailing explanation (:func:`head`: cut at
  ``because``, ``rather than``, `` - ``, ``(`` … outside brackets and quotes), since the
  explanation may name other actions.
* :func:`regions`: where an env looks for its action, in order: after the last answer label,
  the last fenced block, the whole reply (each with reasoning dropped and markdown plain).
* :func:`closed_spans`: only structures that are complete (closed fences, complete JSON
  objects, closed tag pairs, ``<…>`` spans), for replies cut by the token limit.
* :func:`json_objects`: every JSON object in a text.
* :func:`other_senses_dropped`: a prose fallback reads a direction word only in its sense of a
  direction: ``nothing left to do`` (remaining), ``the right choice`` (correct), ``pick up``,
  ``up to`` and ``slow down`` are blanked first, so that no action is invented from them.
"""

from __future__ import annotations

import json
import re
from typing import Any

_THINK_OPEN = re.compile(r"<\s*(?:think|thinking|reasoning)\s*>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"<\s*/\s*(?:think|thinking|reasoning)\s*>", re.IGNORECASE)
_FENCE = re.compile(r"```")
_LANG_TAG = re.compile(r"[A-Za-z][\w+.-]*")
_HEADER = re.compile(r"^[ \t]*#{1,6}[ \t]*", re.MULTILINE)
_QUOTE = re.compile(r"^[ \t]*>[ \t]+", re.MULTILINE)
_BOLD = re.compile(r"\*\*|__(?=\S)|(?<=\S)__")
_STAR = re.compile(r"(?<![\w*])\*(?=\S)|(?<=\S)\*(?![\w*])")
_UNDER = re.compile(r"(?<![\w])_(?=\S)|(?<=\S)_(?![\w])")
_WRAP_OPEN = "([{`'\"*_ \t\u201c\u2018"
_WRAP_CLOSE = ")]}`'\"*_ \t\u201d\u2019.,;:!?"
LABELS = (r"final\s+answer|answer|next\s+action|action|next\s+move|move|my\s+choice|choice|"
          r"decision")
_LABEL = re.compile(rf"^[ \t]*(?:[-*\u2022]\s+|\d+[.)]\s+)?(?:{LABELS})[ \t]*[:=\-\u2013\u2014]",
                    re.IGNORECASE | re.MULTILINE)
_TAG_PAIR = re.compile(r"<\s*([A-Za-z][\w-]*)\s*>.*?<\s*/\s*\1\s*>", re.IGNORECASE | re.DOTALL)
_ANGLE = re.compile(r"<[^<>\n]+>")
# LaTeX around a short answer (the R1-distilled habit): \boxed{B}, \text{B}, $…$, \[ … \]
_LATEX_WRAP = re.compile(r"\\(?:boxed|text|textbf|textit|texttt|mathrm|mathbf)\s*\{([^{}\n]*)\}")
_LATEX_MATH = re.compile(r"\$\$?[ \t]*([^$\n]{1,60}?)[ \t]*\$\$?"
                         r"|\\\[\s*([^\n]{1,60}?)\s*\\\]|\\\(\s*([^\n]{1,60}?)\s*\\\)")


# Direction words in another sense. Each alternative matches the phrase whose direction word is
# not a direction; they are blanked before a prose fallback looks for direction words.
_COUNTED = r"steps?|moves?|turns?|actions?|options?|tries|attempts?|queries|nodes?|states?"
_PAIRED = r"(?!\s*(?:or|and|nor|/|,)\s*(?:right|up|down)\b)"  # "any move left or right"
_OTHER_SENSE = re.compile(
    # left = remaining or departed: "nothing (else) left", "3 moves left", "I left the room"
    r"\b(?:nothing|anything|something|everything|none|little|much|what|what's|whats|few|"
    rf"many|some|any|no|one|two|three)\s+(?:(?:else|more|is|are|was|{_COUNTED})\s+){{0,2}}"
    rf"left\b{_PAIRED}"
    rf"|\b\d+\s+(?:more\s+)?(?:{_COUNTED})\s+left\b"
    r"|\b(?:i|we|they|he|she|i've|we've|have|has|had)\s+(?:just\s+|already\s+|still\s+)?"
    r"left\b(?!\s+(?:of|side|cell|door|wall|edge|corner|neighbou?r|one)\b)"
    r"|\bleft\s+(?:over|behind|unexplored|unvisited|untried|untouched|alone|off)\b"
    # right = correct or "just": "that's right.", "the right choice", "right now"
    r"|\b(?:the|on\s+the)\s+right\s+(?:choice|move|thing|answer|call|decision|option|idea|"
    r"track|approach|strategy)\b"
    r"|\b(?:that's|thats|that\s+is|all|not|quite|exactly|looks|feels)\s+right\b"
    r"(?=\s*[.!,;]|\s*$)"
    r"|\bright\s+(?:now|away|after|before|here|there|next\s+to|beside)\b"
    # up and down in other verbs: "pick up", "end up", "up to 3", "it comes down to"
    r"|\b(?:pick|picks|picked|picking|give|gave|end|ends|ended|ending|set|make|sum|use|used|"
    r"using|catch|show|keep|open|take|takes|taking|took|speed|clean|hurry|wake|follow|fill|"
    r"mix|mixed|come|comes|came)\s+(?:it\s+|them\s+)?up\b"
    r"|\b(?:is|it's|was|be|are|all|only)\s+up\s+to\b|\bup\s+to\s+\d|\bup\s+(?:until|front)\b"
    r"|\b(?:slow|break|broke|narrow|narrowed|boil|boils|write|wrote|shut|calm|settle|track|"
    r"hunt|cut|count|let|letting)\s+down\b"
    r"|\b(?:comes?|came|boils?|boiled|gets?|got|is|was|all)\s+down\s+to\b",
    re.IGNORECASE | re.MULTILINE)


def other_senses_dropped(text: str) -> str:
    """``text`` with direction words used in another sense blanked (see the module docstring)."""
    return _OTHER_SENSE.sub(" ", text)


def without_reasoning(text: Any) -> str | None:
    """The reply after its reasoning block, or ``None`` when a block is left open (see above)."""
    if not isinstance(text, str):
        return None
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end():]
    if _THINK_OPEN.search(text):
        return None
    return text


def plain(text: str) -> str:
    """``text`` without markdown headers, block quotes, emphasis markers and LaTeX answer
    wrappers (``$\\boxed{B}$`` reads ``B``)."""
    text = _latex_plain(text)
    text = _HEADER.sub("", text)
    text = _QUOTE.sub("", text)
    text = _BOLD.sub("", text)
    text = _STAR.sub("", text)
    return _UNDER.sub("", text)


def _latex_plain(text: str) -> str:
    if "\\" not in text and "$" not in text:
        return text
    prev = None
    while text != prev:                     # nested wrappers, inside first
        prev = text
        text = _LATEX_WRAP.sub(r"\1", text)
    return _LATEX_MATH.sub(lambda m: next(g for g in m.groups() if g is not None), text)


def unwrap(text: str) -> str:
    """A short answer without the brackets, quotes, backticks and punctuation around it."""
    prev = None
    text = text.strip()
    while text != prev:
        prev = text
        text = text.strip()
        if len(text) >= 2 and (text[0], text[-1]) in (("(", ")"), ("[", "]"), ("{", "}"),
                                                     ("`", "`"), ("'", "'"), ('"', '"'),
                                                     ("*", "*"), ("_", "_"), ("<", ">"),
                                                     ("\u201c", "\u201d"), ("\u2018", "\u2019")):
            text = text[1:-1]
        else:
            text = text.lstrip(_WRAP_OPEN).rstrip(_WRAP_CLOSE)
    return text.strip()


def fenced_blocks(text: str, closed_only: bool = False) -> list[str]:
    """Contents of triple-backtick fences in order, language tags dropped; a final fence left
    open counts (to the end of the text) unless ``closed_only``."""
    marks = [m.start() for m in _FENCE.finditer(text)]
    out = []
    for i in range(0, len(marks), 2):
        start = marks[i] + 3
        if i + 1 < len(marks):
            inner = text[start:marks[i + 1]]
        elif closed_only:
            break
        else:
            inner = text[start:]
        first, newline, rest = inner.partition("\n")
        if newline and _LANG_TAG.fullmatch(first.strip()) and rest.strip():
            inner = rest
        out.append(inner.strip())
    return out


_EXPLANATION = re.compile(
    r"\s+(?:because|since|as|rather\s+than|instead\s+of|so\s+that|which|to\s+(?:reach|get|"
    r"avoid|explore|find|see|check))\b|\s+[-\u2013\u2014]+\s+|\s*\(|;\s|,\s+(?=because|since|"
    r"as|so|which)|\.\s", re.IGNORECASE)
_PAIRS = {"(": ")", "[": "]", "{": "}", "<": ">"}


def _balanced(text: str) -> bool:
    stack = []
    for ch in text:
        if ch in _PAIRS:
            stack.append(_PAIRS[ch])
        elif ch in _PAIRS.values() and (not stack or stack.pop() != ch):
            return False
    return not stack and text.count('"') % 2 == 0 and text.count("`") % 2 == 0


def head(line: str) -> str | None:
    """``line`` before its first explanation connector, when that part stands alone (brackets
    and quotes balanced); None when there is no such shorter part."""
    for m in _EXPLANATION.finditer(line):
        part = line[:m.start()].strip()
        if part and _balanced(part):
            return part
        if part and not _balanced(part):
            continue
    return None


def with_head(line: str) -> list[str]:
    """``[head(line), line]`` (the head only when there is one)."""
    h = head(line)
    return [h, line] if h else [line]


def labelled(text: str, complete_only: bool = False) -> list[str]:
    """The answers after answer labels at line starts, last label first: the rest of the label's
    line, or when that is empty the fence or the line that follows. ``complete_only`` (a cut
    reply): closed fences and lines that end before the text does."""
    out = []
    for m in reversed(list(_LABEL.finditer(text))):
        after = text[m.end():]
        line, newline, below = after.partition("\n")
        if line.strip():
            if line.strip().startswith("```"):
                blocks = fenced_blocks(after, closed_only=complete_only)
                if blocks:
                    out.append(blocks[0])
                continue
            if newline or not complete_only:
                out += with_head(line.strip())
            continue
        below = below.lstrip()
        if below.startswith("```"):
            blocks = fenced_blocks(below, closed_only=complete_only)
            if blocks:
                out.append(blocks[0])
        elif below:
            line, newline, _ = below.partition("\n")
            if newline or not complete_only:
                out += with_head(line.strip())
    return out


def regions(text: Any) -> list[str]:
    """Where an env looks for its action, in order (see the module docstring); empty when the
    reply has no answer (not a string, or a reasoning block left open)."""
    body = without_reasoning(text)
    if body is None:
        return []
    body = plain(body)
    out = labelled(body)
    blocks = fenced_blocks(body)
    if blocks:
        out.append(blocks[-1])
    out.append(body.strip())
    seen: set[str] = set()
    return [r for r in out if r and not (r in seen or seen.add(r))]


def closed_spans(text: str) -> list[str]:
    """Complete answer structures of ``text``, last first: closed fences, complete JSON
    objects, closed tag pairs (``<actions>…</actions>``) and ``<…>`` spans."""
    spans: list[tuple[int, str]] = []
    marks = [m.start() for m in _FENCE.finditer(text)]
    blocks = fenced_blocks(text, closed_only=True)
    spans += [(marks[2 * i], b) for i, b in enumerate(blocks)]
    spans += [(m.start(), m.group(0)) for m in _TAG_PAIR.finditer(text)]
    spans += [(m.start(), m.group(0)) for m in _ANGLE.finditer(text)]
    spans += [(start, json.dumps(obj)) for start, obj in _json_spans(text)]
    spans.sort(key=lambda s: -s[0])
    return [s for _, s in spans if s.strip()]


def _json_spans(text: str) -> list[tuple[int, dict[str, Any]]]:
    decoder = json.JSONDecoder()
    out: list[tuple[int, dict[str, Any]]] = []
    i = 0
    while (i := text.find("{", i)) >= 0:
        try:
            obj, end = decoder.raw_decode(text, i)
        except (ValueError, RecursionError):   # nested deeper than Python's stack: not read
            i += 1
            continue
        if isinstance(obj, dict):
            out.append((i, obj))
            i = end
        else:
            i += 1
    return out


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object in ``text`` (prose and fences around it are ignored). Outer objects
    come first; when an outer object fails to parse (a cut reply), the objects nested in it are
    still found."""
    return [obj for _, obj in _json_spans(text)]
