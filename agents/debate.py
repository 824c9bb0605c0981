"""Multi-agent debate (MAD) value function (docs/methods/debate.md).

Per evaluated node: the *support* and *oppose* arguments are generated concurrently
(``asyncio.gather``: two requests in flight at once, so a batching backend serves them together);
then the judge runs in both orders (oppose first, support first), ``judge_samples_per_order``
samples each, also concurrently. The six verdicts are mapped to the scale and averaged. Cost per
node: 4 requests, 2 + 2·3 completions. Usage is recorded under roles ``debate`` (arguments) and
``judge``. Retrieved value reflections go to the judge only.

Failures follow :mod:`clew.agents.value`: :class:`ValueCallError` naming the role. Arguments
are read by :func:`clew.agents.parsing.parse_free_text` and counted under ``debate``, verdicts
under ``judge`` (``usage.parses``); prompts are fitted to the model's context.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from clew.agents.fitting import fit
from clew.agents.lm.base import ChatRequest, Completion, LanguageModel, Sampling
from clew.agents.options import ValueOptions
from clew.agents.parsing import parse_free_text, record
from clew.agents.prompts import Context, argument_messages, judge_messages
from clew.agents.seeds import derive_seed
from clew.agents.usage import UsageByRole
from clew.agents.value import LMValueFunction, ValueRecord, value_call

ORDERS = ("oppose_first", "support_first")
NO_ARGUMENT = "(no argument could be read)"


class DebateValue(LMValueFunction):
    """``evaluate(ctx) -> ValueRecord`` with ``record.debate`` holding both arguments and all
    judge outputs (needed by value reflection and EL assessments)."""

    method = "debate"

    def __init__(self, lm: LanguageModel, options: ValueOptions | None = None):
        super().__init__(lm, options)
        d = self.options.debate
        self.argue = {"temperature": d.argue_temperature, "top_p": d.argue_top_p,
                      "max_tokens": d.argue_max_tokens}
        self.judge = {"temperature": d.judge_temperature, "top_p": d.judge_top_p,
                      "max_tokens": d.judge_max_tokens}
        self.k, self.window = d.judge_samples_per_order, d.window

    async def arguments(self, ctx: Context, usage: UsageByRole | None = None) -> tuple[str, str]:
        """(support, oppose), generated concurrently; an argument that cannot be read (empty, or
        cut with no complete sentence) is shown to the judge as :data:`NO_ARGUMENT`."""
        reqs = [ChatRequest(fit(self.lm, self.argue["max_tokens"],
                                lambda keep, side=side: argument_messages(ctx, side, self.window,
                                                                          keep),
                                len(ctx.actions), "debate"),
                            Sampling(n=1, seed=derive_seed(ctx.seed, "debate", side), **self.argue),
                            role="debate") for side in ("support", "oppose")]
        results = await asyncio.gather(*(value_call(self.lm, r, usage) for r in reqs))
        comps = [r[0] if r else Completion("") for r in results]
        args = [parse_free_text(c.text, c.finish_reason) for c in comps]
        record(usage, "debate", self.lm.spec, [(a is not None, c.text)
                                               for a, c in zip(args, comps)])
        support, oppose = (a if a is not None else NO_ARGUMENT for a in args)
        return support, oppose

    async def evaluate(self, ctx: Context, reflections: Sequence[dict] = (),
                       usage: UsageByRole | None = None) -> ValueRecord:
        support, oppose = await self.arguments(ctx, usage)
        reqs = [ChatRequest(fit(self.lm, self.judge["max_tokens"],
                                lambda keep, order=order: judge_messages(
                                    ctx, support, oppose, order, self.window, reflections, keep),
                                len(ctx.actions), "judge"),
                            self.grading(self.k, derive_seed(ctx.seed, "judge", order),
                                         self.judge), role="judge") for order in ORDERS]
        results = await asyncio.gather(*(value_call(self.lm, r, usage) for r in reqs))
        comps = [c for cs in results for c in cs]
        texts = [c.text for c in comps]
        orders = [order for order, cs in zip(ORDERS, results) for _ in cs]
        return self.grade(comps, reflections, usage, "judge",
                          debate={"support": support, "oppose": oppose, "judge_outputs": texts,
                                  "judge_orders": orders})
