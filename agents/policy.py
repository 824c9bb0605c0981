"""LM policy: proposals with priors from sampled-action frequencies (``docs/methods/mcts.md``).

One request with ``n = max(2b, n_samples_min)`` samples (the prompt is processed once), each
completion parsed (:func:`clew.agents.parsing.parse_action`, its finish reason included: a
completion cut by the token limit counts only with a complete answer in it), identical actions
merged by ``env.canonical``, the top-b kept by count (ties: first appearance), priors
renormalised over the kept ones. The representative raw text of an action is its first sample.
Every completion is counted as parsed or not under role ``policy`` (``usage.parses``). The
prompt is fitted to the model's context (:mod:`clew.agents.fitting`). With the ``constrain``
option every request carries the env's legal actions at the node as ``Sampling.choices``
(docs/methods/parsing.md#constrained-answers); an env without a list (the oracle-query tasks)
is not constrained.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from clew.agents.fitting import fit
from clew.agents.lm.base import ChatRequest, Completion, LanguageModel, Message, Sampling
from clew.agents.lm.calls import call
from clew.agents.options import ACT_SAMPLING, PolicyOptions
from clew.agents.parsing import parse_action, record
from clew.agents.prompts import Context, policy_messages
from clew.agents.seeds import derive_seed
from clew.agents.usage import UsageByRole


@dataclass
class Proposal:
    """A merged candidate action (what the MCTS core turns into an edge)."""

    action: str | None
    key: str
    raw: str
    count: int = 1
    prior: float = 0.0
    is_stop: bool = False


def merge_samples(samples: Sequence[Proposal], b: int) -> list[Proposal]:
    """Merge by key, count, keep the top-b by count (stable: first appearance wins ties) and
    renormalise priors over the kept ones (docs/methods/mcts.md)."""
    merged: dict[str, Proposal] = {}
    for s in samples:
        if s.action is None:
            continue
        if s.key in merged:
            merged[s.key].count += s.count
        else:
            merged[s.key] = Proposal(s.action, s.key, s.raw, s.count, 0.0, s.is_stop)
    kept = sorted(merged.values(), key=lambda p: -p.count)[:b]   # sorted() is stable
    total = sum(p.count for p in kept)
    for p in kept:
        p.prior = p.count / total
    return kept


def mix_uniform(props: Sequence[Proposal], legal: Sequence[str], share: float, b: int,
                env) -> list[Proposal]:
    """``props`` with ``share`` of the prior mass spread evenly over the ``legal`` actions:
    prior (1 − share)·p + share/|legal|, a legal action no proposal named entering with
    share/|legal| alone (its raw text the bare action, as the heuristic policy's); the top-b by
    prior kept (ties: proposals first, then legal order) and renormalised. With share 0 or no
    legal list, ``props`` unchanged (docs/methods/exploratory-learning.md#as-a-search-policy)."""
    if not share or not legal:
        return list(props)
    even = share / len(legal)
    mixed = {p.key: Proposal(p.action, p.key, p.raw, p.count, (1 - share) * p.prior, p.is_stop)
             for p in props}
    for a in legal:
        key = env.canonical(a)
        if key not in mixed:
            mixed[key] = Proposal(a, key, a, 0, 0.0, bool(env.is_stop(a)))
        mixed[key].prior += even
    kept = sorted(mixed.values(), key=lambda p: -p.prior)[:b]   # sorted() is stable
    total = sum(p.prior for p in kept)
    for p in kept:
        p.prior /= total
    return kept


class LMPolicy:
    """``propose(ctx) -> ranked proposals``; see the module docstring."""

    kind = "lm"
    uses_oracle = False

    def __init__(self, lm: LanguageModel, branching_factor: int,
                 options: PolicyOptions | None = None):
        self.lm = lm
        self.options = options or PolicyOptions()
        self.b = branching_factor
        self.n = max(2 * branching_factor, self.options.n_samples_min)
        self.sampling = {"temperature": self.options.temperature, "top_p": self.options.top_p,
                         "max_tokens": self.options.max_tokens}

    def parse(self, ctx: Context, text: str, finish_reason: str | None = None) -> Proposal:
        env = ctx.env
        action = parse_action(env, text, finish_reason=finish_reason)
        if action is None:
            return Proposal(None, "", text, 1)
        return Proposal(action, env.canonical(action), text, 1, 0.0, bool(env.is_stop(action)))

    def _read(self, ctx: Context, comps: Sequence[Completion],
              usage: UsageByRole | None) -> list[Proposal]:
        props = [self.parse(ctx, c.text, c.finish_reason) for c in comps]
        record(usage, "policy", self.lm.spec, [(p.action is not None, p.raw) for p in props])
        return props

    def choices(self, ctx: Context) -> list[str] | None:
        """The answers a constrained request allows: the legal actions at the node (None: no
        constraint, the option off or the env lists none)."""
        if not self.options.constrain:
            return None
        return [str(a) for a in ctx.env.legal_actions()] or None

    def messages(self, ctx: Context, reflections: Sequence[dict] = ()) -> list[Message]:
        """The policy prompt, fitted to the model's context."""
        return fit(self.lm, self.sampling["max_tokens"],
                   lambda keep: policy_messages(ctx, reflections, keep=keep),
                   len(ctx.actions), "policy")

    async def propose(self, ctx: Context, reflections: Sequence[dict] = (),
                      usage: UsageByRole | None = None, n: int | None = None) -> list[Proposal]:
        request = ChatRequest(
            self.messages(ctx, reflections),
            Sampling(n=n or self.n, seed=derive_seed(ctx.seed, "policy"),
                     choices=self.choices(ctx), **self.sampling),
            role="policy")
        comps = await call(self.lm, request, usage)
        return merge_samples(self._read(ctx, comps, usage), self.b)

    async def act_once(self, ctx: Context, usage: UsageByRole | None = None) -> Proposal:
        """One ReAct-style sample (``docs/methods/baselines.md#policy-only``)."""
        request = ChatRequest(self.messages(ctx),
                              Sampling(n=1, temperature=ACT_SAMPLING.temperature,
                                       top_p=ACT_SAMPLING.top_p,
                                       max_tokens=self.options.max_tokens,
                                       seed=derive_seed(ctx.seed, "react"),
                                       choices=self.choices(ctx)), role="policy")
        comps = await call(self.lm, request, usage)
        props = self._read(ctx, comps, usage)
        return props[0] if props else Proposal(None, "", "", 1)
