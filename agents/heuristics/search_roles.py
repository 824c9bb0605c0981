"""Heuristic search roles for machines without a model (docs/methods/baselines.md#heuristic-roles).

* :class:`HeuristicPolicy` proposes the env's legal actions with priors: ``uniform`` (equal priors,
  legal order), ``sampled`` (frequencies of ``n`` uniform draws, like an LM's sampling noise), or
  ``oracle`` (draws weighted by the ground-truth progress of each successor; ``uses_oracle``).
* :class:`HeuristicValue` reads ground truth — ``progress(env)`` below — and adds Gaussian noise of
  a configurable size, to stand in for an imperfect LM judge. It always ``uses_oracle``; reports
  label agents built on it as heuristic.
* :class:`TemplateReflector` writes reflections from a template (no model), so the memory and the
  improvement loop run end to end on CPU.

Decisions:

* Progress in [0, 1] is the env family's own ground truth, ``env.progress()``
  (:meth:`clew.envs.base.Env.progress`): gridmap — 1 − d/d₀ with d the fewest moves to achieve
  the goal given the full map; textminigrid — 1 − (bot plan length from here) / (bot plan
  length at start); any other env — ``env.grade()``. A finished success is 1.0.
* Noise is drawn once per state (seeded by the value seed, the task and the action path), so the
  same state always gets the same noisy value (like a biased but consistent judge); non-success
  states are capped at ``cap`` (0.9: "one more action") so noise alone never fakes the top value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from clew.agents.options import PolicyOptions, ValueOptions
from clew.agents.policy import Proposal, merge_samples
from clew.agents.prompts import Context
from clew.agents.seeds import derive_rng
from clew.agents.usage import UsageByRole
from clew.agents.value import ValueRecord
from clew.envs.base import Env


# --- ground-truth progress ---------------------------------------------------------------------
def progress(env: Env) -> float:
    """Ground-truth progress of ``env``'s current state in [0, 1]: the env's own measure
    (:meth:`clew.envs.base.Env.progress`; gridmap and TextMiniGrid define one, other envs give
    their grade)."""
    return float(env.progress())


# --- policy ------------------------------------------------------------------------------------
class HeuristicPolicy:
    """Legal actions with priors (see module docstring). ``propose(ctx)`` reads ``ctx.env``."""

    kind = "heuristic"

    def __init__(self, branching_factor: int, options: PolicyOptions | None = None,
                 seed: int = 0):
        options = options or PolicyOptions()
        self.prior, self.b, self.n = options.prior, branching_factor, options.n_samples
        self.temperature, self.seed = options.oracle_temperature, seed
        self.uses_oracle = self.prior == "oracle"

    def _weights(self, env: Any, actions: list[str]) -> list[float]:
        if self.prior != "oracle":
            return [1.0] * len(actions)
        base = progress(env)
        out = []
        for a in actions:
            sim = env.copy()
            sim.step(a)
            out.append(math.exp((progress(sim) - base) / max(self.temperature, 1e-6)))
        return out

    def _key(self, ctx: Context) -> tuple:
        return (self.seed, ctx.task_id, len(ctx.actions), "|".join(ctx.actions), ctx.seed)

    async def propose(self, ctx: Context, reflections: Sequence[dict] = (),
                      usage: UsageByRole | None = None) -> list[Proposal]:
        env = ctx.env
        actions = list(env.legal_actions())
        rng = derive_rng(*self._key(ctx))

        def prop(a: str, count: int = 1) -> Proposal:
            return Proposal(a, env.canonical(a), a, count, 0.0, bool(env.is_stop(a)))
        last = ctx.actions[-1] if ctx.actions else None
        candidates = env.heuristic_candidates(last)
        if candidates is not None:      # the env's own proposals (web pages), uniform priors
            return merge_samples([prop(a) for a in candidates], self.b)
        if not actions:
            # no short action list (oracle-query tasks): random valid actions, if the env has any
            first = env.random_action(rng)
            if first is None:
                return []
            draws = [first] + [env.random_action(rng) for _ in range(self.n - 1)]
            return merge_samples([prop(a) for a in draws], self.b)
        if self.prior == "uniform":
            return merge_samples([prop(a) for a in actions], self.b)
        draws = rng.choices(actions, weights=self._weights(env, actions), k=self.n)
        return merge_samples([prop(a) for a in draws], self.b)

    async def act_once(self, ctx: Context, usage: UsageByRole | None = None) -> Proposal:
        """One action drawn from the prior (the policy without search)."""
        env = ctx.env
        actions = list(env.legal_actions())
        rng = derive_rng(self.seed, "once", *self._key(ctx)[1:])
        candidates = env.heuristic_candidates(ctx.actions[-1] if ctx.actions else None)
        if candidates is not None:
            a = rng.choice(candidates) if candidates else None
            return Proposal(a, env.canonical(a) if a else "", a or "", 1, 1.0, False)
        if not actions:
            a = env.random_action(rng)
            if a is None:
                return Proposal(None, "", "")
            return Proposal(a, env.canonical(a), a, 1, 1.0, bool(env.is_stop(a)))
        a = rng.choices(actions, weights=self._weights(env, actions), k=1)[0]
        return Proposal(a, env.canonical(a), a, 1, 1.0, bool(env.is_stop(a)))


# --- value -------------------------------------------------------------------------------------
class HeuristicValue:
    """Ground-truth progress plus seeded Gaussian noise (see module docstring)."""

    kind = "heuristic"
    method = "heuristic"
    uses_oracle = True

    def __init__(self, options: ValueOptions | None = None, seed: int = 0):
        options = options or ValueOptions()
        self.noise, self.cap, self.seed, self.scale = (options.noise, options.cap, seed,
                                                       options.scale)

    def config_hash(self) -> str:
        return f"heuristic:{self.noise}:{self.cap}:{self.seed}:{self.scale}"

    async def evaluate(self, ctx: Context, reflections: Sequence[dict] = (),
                       usage: UsageByRole | None = None) -> ValueRecord:
        env = ctx.env
        success = env.done and env.grade() >= 1.0
        truth = 1.0 if success else progress(env)
        rng = derive_rng(self.seed, ctx.task_id, "|".join(ctx.actions), ctx.final_action)
        v = truth + (rng.gauss(0.0, self.noise) if self.noise else 0.0)
        v = max(0.0, min(1.0 if success else self.cap, v))
        if self.scale == "signed":
            v = 2.0 * v - 1.0
        return ValueRecord(v=v, kind="heuristic", info={"truth": truth},
                           samples=[(None, (f"Thoughts: heuristic progress {truth:.2f}, "
                                            f"noisy estimate {v:.2f}."))],
                           retrieved_reflection_ids=[str(r.get("id")) for r in reflections])


# --- reflector ---------------------------------------------------------------------------------
class TemplateReflector:
    """Reflections from a template (no model), same interface as
    :class:`clew.agents.reflection.Reflector`."""

    kind = "heuristic"
    uses_oracle = False

    async def reflect_policy(self, rec: Any, t: int, success: bool,
                             usage: UsageByRole | None = None) -> tuple[str, str, str]:
        s = rec.stats[t]
        nxt = rec.observations[t + 1] if rec.has_obs_after(t) else \
            ("The task was evaluated as completed successfully." if success else
             "The task was evaluated as failed.")
        expect = "progress toward the goal"
        text = (f"After '{rec.actions[t]}' the search valued the move at {s.q:.2f} while the next "
                f"state was judged {s.v_next if s.v_next is not None else float('nan'):.2f}; the "
                f"task {'succeeded' if success else 'failed'}. In similar states, prefer moves "
                "whose consequences were checked by looking ahead over moves that only look "
                "promising.")
        return expect, nxt, text

    async def reflect_value(self, rec: Any, t: int, success: bool, mode: str,
                            usage: UsageByRole | None = None) -> str | None:
        s = rec.stats[t]
        return (f"A state reached by '{rec.actions[t]}' was estimated at "
                f"{s.v_next if s.v_next is not None else float('nan'):.2f}, but the task "
                f"{'succeeded' if success else 'failed'}; judge such states "
                f"{'more' if success else 'less'} favourably.")
