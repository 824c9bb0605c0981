"""Fitting a role's prompt into the model's context (docs/methods/parsing.md#context-length).

A request holds its prompt and up to ``max_tokens`` completion tokens, so a prompt may use
``lm.context_length - max_tokens`` tokens. Prompts are built by a function of ``keep``, the
number of most recent history steps shown in full (``None``: all of them); the first turn (the
task and the initial observation) and the latest observation are always kept, and the prompt
builder puts a marker where steps were left out. :func:`fit` sends the whole history when it
fits and otherwise the largest ``keep`` that fits (found by bisection over token counts), so the
model loses only the middle of its history. :func:`fit_messages` does the same for a plain chat
(ReAct, the distilled agent, reflections): whole (user, assistant) pairs after the first
exchange go, oldest first, and the next user turn says how many.

A prompt that does not fit even with the whole middle left out raises
:class:`~clew.agents.lm.base.ContextLengthError`: that episode fails with reason
``context_length`` and the run goes on. A backend without a known context (``context_length``
is ``None``) gets every prompt unchanged.

Counting is the backend's ``count_tokens`` (its tokenizer, or a documented over-estimate). It is
skipped when the UTF-8 size of the prompt plus a template allowance is below the limit, since no
tokenizer needs more tokens than bytes.
"""

from __future__ import annotations

from collections.abc import Callable

from clew.agents.lm.base import ContextLengthError, LanguageModel, Message

#: chat-template tokens allowed per message and per prompt in the no-count shortcut
TEMPLATE_PER_MESSAGE, TEMPLATE_PER_PROMPT = 16, 64


def gap_note(n: int) -> str:
    """The marker where ``n`` history steps were left out."""
    return f"[... {n} earlier step{'s' if n != 1 else ''} left out to fit the context ...]"


def _surely_fits(messages: list[Message], limit: int) -> bool:
    size = TEMPLATE_PER_PROMPT + sum(len((m.get("content") or "").encode("utf-8"))
                                     + TEMPLATE_PER_MESSAGE for m in messages)
    return size <= limit


def fits(lm: LanguageModel, messages: list[Message], max_tokens: int) -> bool:
    """Whether ``messages`` and ``max_tokens`` completion tokens fit ``lm``'s context."""
    if not lm.context_length:
        return True
    limit = lm.context_length - max_tokens
    return _surely_fits(messages, limit) or lm.count_tokens(messages) <= limit


def _refuse(lm: LanguageModel, messages: list[Message], max_tokens: int, role: str,
            what: str) -> ContextLengthError:
    need = lm.count_tokens(messages)
    return ContextLengthError(
        f"{role} prompt does not fit the context of {lm.spec or type(lm).__name__}: {need} "
        f"prompt tokens {what} + {max_tokens} for the completion > {lm.context_length}")


def fit(lm: LanguageModel, max_tokens: int, build: Callable[[int | None], list[Message]],
        steps: int, role: str) -> list[Message]:
    """``build(None)`` if it fits, else ``build(k)`` for the largest fitting ``k`` in
    ``[1, steps - 1]`` (see the module docstring)."""
    full = build(None)
    if fits(lm, full, max_tokens):
        return full
    if steps <= 1:
        raise _refuse(lm, full, max_tokens, role, "(no history to leave out)")
    smallest = build(1)
    if not fits(lm, smallest, max_tokens):
        raise _refuse(lm, smallest, max_tokens, role,
                      "with only the first turn and the latest step kept")
    lo, hi = 1, steps - 1          # build(lo) fits; build(hi + 1) = build(steps) does not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(lm, build(mid), max_tokens):
            lo = mid
        else:
            hi = mid - 1
    return build(lo)


def _head_end(messages: list[Message]) -> int:
    """Index after the first user turn and the answer to it (the kept head of a chat)."""
    first = next((i for i, m in enumerate(messages) if m["role"] == "user"), len(messages))
    return min(len(messages), first + 2)


def elide_pairs(messages: list[Message], drop: int) -> list[Message]:
    """``messages`` without the ``drop`` oldest (user, assistant) pairs after the first
    exchange; the first kept user turn after the gap starts with :func:`gap_note`."""
    end = _head_end(messages)
    if drop <= 0:
        return list(messages)
    head, body = messages[:end], messages[end + 2 * drop:]
    if body:
        body = [{**body[0], "content": f"{gap_note(drop)}\n{body[0]['content']}"}] + body[1:]
    return head + body


def fit_messages(lm: LanguageModel, messages: list[Message], max_tokens: int,
                 role: str) -> list[Message]:
    """A plain chat fitted by leaving out its oldest middle pairs (see the module docstring)."""
    pairs = max(0, (len(messages) - _head_end(messages) - 1) // 2)   # droppable pairs
    return fit(lm, max_tokens, lambda keep: (
        list(messages) if keep is None else elide_pairs(messages, pairs + 1 - keep)),
        pairs + 1, role)
