"""A learned value: a model fine-tuned on the search's own value estimates grades a state
(docs/methods/exploratory-learning.md#learned-value).

``clew data`` writes ``value_sft`` chats: the IL-format prompt of a tree node (the distilled
agent's chat there) and one assistant turn, :func:`grade_answer` of the node's target,
``Value estimate: ```0.4``` ``. A model trained on them is a search agent's value function
(:class:`DistilledValue`, the ``distilled_value`` option): at a node it sends the same chat
(:func:`~clew.agents.distilled.chat_at` in the option's format, fitted with
:func:`~clew.agents.distilled.fit_chat`) and reads the grades of its answers.

Decisions:

* The grade is a tenth in [0, 1], in the answer fence after :data:`VALUE_PHRASE`: one number a
  tiny model writes in a few tokens, read by :func:`clew.agents.parsing.parse_estimate`, and a
  short list of answers (:data:`GRADES`) that constrained decoding can score exactly
  (``constrain``). Rounding grid-map rollout targets to tenths moves them by 0.019 on average;
  the five SA status letters (A–E at 1, 0.9, 0.5, 0.2, 0) would move them by 0.054 (the
  measurement is in the docs section above).
* The value is the mean of the grades read; an answer without one is counted as unreadable
  under role ``value`` (``usage.parses``) and left out; when none is read the value is unknown
  (``v = None``, ``all_failed``), never 0: the search then backs up the parent's estimate
  (docs/methods/debate.md#unknown-values).
* A state the episode ended (the env is done) is worth what the agent sees of it, as for the
  rollout value (:func:`~clew.agents.value.observed_score`: success where success ends the
  episode, else the rewards received), not the grade of a reward-graded env, which divides by
  the best possible return.
* It reads no reflections (the model was not trained with them), no oracle (``uses_oracle``
  False), and is ``kind`` ``learned``: a search whose policy and value are both learned
  reports as ``learned+search`` with ``uses_oracle: false`` in its trees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from clew.agents.distilled import ModelFromOptions, chat_at, fit_chat
from clew.agents.lm.base import ChatRequest, Sampling
from clew.agents.options import DistilledValueOptions
from clew.agents.parsing import VALUE_PHRASE, parse_estimate, record
from clew.agents.seeds import derive_seed
from clew.agents.value import (
    ValueRecord,
    config_hash,
    from_unit,
    observed_score,
    value_call,
)

if TYPE_CHECKING:
    from clew.agents.prompts import Context
    from clew.agents.usage import UsageByRole

#: the grades a value model writes: tenths of the unit scale
GRADES = tuple(f"{i / 10:.1f}" for i in range(11))


def grade(x: float) -> str:
    """The grade of a unit-scale target: the nearest tenth."""
    return GRADES[min(10, max(0, round(float(x) * 10)))]


def grade_answer(x: float) -> str:
    """The assistant turn of a ``value_sft`` chat for target ``x`` (unit scale)."""
    return f"{VALUE_PHRASE} ```{grade(x)}```"


class DistilledValue(ModelFromOptions):
    """A value function from a model fine-tuned on ``value_sft`` chats (see the module
    docstring); ``scale`` is the search's value scale."""

    kind = "learned"
    method = "learned"
    uses_oracle = False

    def __init__(self, options: DistilledValueOptions, scale: str = "unit"):
        self.options, self.scale = options, scale
        self.greedy = options.temperature == 0
        self.n = 1 if self.greedy else options.n_samples
        self.sampling = {"temperature": options.temperature, "top_p": options.top_p,
                         "max_tokens": options.max_tokens}

    def config_hash(self) -> str:
        return config_hash(["learned", self.options.model_dump(exclude={"model"}),
                            self.options.model_spec, self.scale])

    def messages(self, ctx: Context) -> list[dict[str, Any]]:
        """The request's chat: the distilled agent's chat at the node, windowed and fitted."""
        chat = chat_at(ctx, self.options.format, self.options.window.trail)
        return fit_chat(self.lm, chat, self.sampling["max_tokens"], self.options.window,
                        self.options.context_tokens)

    async def evaluate(self, ctx: Context, reflections: Sequence[dict[str, Any]] = (),
                       usage: UsageByRole | None = None) -> ValueRecord:
        env = ctx.env
        if env is not None and env.done:
            outcome = observed_score(env)
            return ValueRecord(v=from_unit(outcome, self.scale), kind="learned",
                               samples=[(None, f"The episode ended, worth {outcome:.2f}.")],
                               info={"terminal": True})
        return await self.grade_chat(self.messages(ctx), derive_seed(ctx.seed, "value"), usage)

    async def grade_chat(self, messages: list[dict[str, Any]], seed: int,
                         usage: UsageByRole | None = None) -> ValueRecord:
        """The value of the state a chat ends on (:meth:`evaluate` past the ended-episode case;
        also how a values row's ``prompt`` is graded offline)."""
        sampling = Sampling(n=self.n, seed=seed,
                            choices=list(GRADES) if self.options.constrain else None,
                            answer_phrase=VALUE_PHRASE, **self.sampling)
        comps = await value_call(self.lm, ChatRequest(messages, sampling, role="value"), usage)
        read = [parse_estimate(c.text, c.finish_reason) for c in comps]
        record(usage, "value", self.lm.spec, [(x is not None, c.text)
                                              for x, c in zip(read, comps)])
        known = [x for x in read if x is not None]
        v = from_unit(sum(known) / len(known), self.scale) if known else None
        return ValueRecord(v=v, kind="learned",
                           samples=[(None if x is None else f"{x:g}", c.text)
                                    for x, c in zip(read, comps)],
                           n_parse_fail=len(read) - len(known), all_failed=not known,
                           info={"estimates": known})
