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
from clew.agents.value import ValueRecord, from_unit, observed_score
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
        v = from_unit(max(0.0, min(1.0 if success else self.cap, v)), self.scale)
        return ValueRecord(v=v, kind="heuristic", info={"truth": truth},
                           samples=[(None, (f"Thoughts: heuristic progress {truth:.2f}, "
                                            f"noisy estimate {v:.2f}."))],
                           retrieved_reflection_ids=[str(r.get("id")) for r in reflections])


class RolloutValue:
    """The env's own outcome from a state, by walks in the simulator (``estimate: rollout``).

    Each of ``rollouts`` walks starts from a copy of the state and takes at most ``horizon``
    actions (None: until the episode ends); each action is drawn among the legal ones that lead
    to a state the walk has not been in (``novel``; among all when none does) or among all
    (``random``). The value is the mean (or the best, ``aggregate: max``) over walks of what the
    walk's end is worth (:meth:`score`: success where success ends the episode, else the
    rewards received) times ``discount`` to the power of its length: for the grid map and
    TextMiniGrid the share of walks that succeed, the nearer successes counting more. Without the discount every state
    a few moves from the goal is worth 1 and the search cannot tell a step toward it from a
    step in place. It reads the env's rewards, legal actions and
    state identity, never its ground truth (``uses_oracle`` False): what an agent could compute
    with the simulator. A novel walk from a grid map's start succeeds 0.55 of the time against a
    random walk's 0.09 (TextMiniGrid 0.49 against 0.20), so it tells near from far. The walks'
    steps are simulated interactions. Where simulation is charged (each query spends the real
    budget) nothing is walked and nothing is known: the value is 0.5 (the env's grade there
    divides by the task's optimum). Seeded by the state (``env.state_key()``, else the path), so a state always gets
    the same value, and remembered per task and state.
    """

    kind = "heuristic"
    method = "rollout"
    uses_oracle = False

    def __init__(self, options: ValueOptions | None = None, seed: int = 0):
        options = options or ValueOptions(estimate="rollout")
        self.rollouts, self.horizon, self.policy = (options.rollouts, options.horizon,
                                                    options.rollout_policy)
        self.discount, self.aggregate = options.discount, options.aggregate
        self.reward_scale = options.reward_scale
        # (state, clock) -> walk outcomes: a search reaches one state by many paths, and
        # seeding by the state makes the memo change nothing
        self._cache: dict[tuple[str, Any], list[float]] = {}
        self.seed, self.scale = seed, options.scale

    def config_hash(self) -> str:
        return (f"rollout:{self.rollouts}:{self.horizon}:{self.policy}:{self.discount}:"
                f"{self.aggregate}:{self.reward_scale}:"
                f"{self.seed}:{self.scale}")

    def walk(self, env: Env, rng: Any) -> float:
        seen = {env.state_key()}
        steps = 0
        while not env.done and (self.horizon is None or steps < self.horizon):
            actions = list(env.legal_actions())
            if not actions:
                action = env.random_action(rng)
                if action is None:
                    break
                actions = [action]
            if self.policy == "novel" and len(actions) > 1:
                # the first action of a random order that leads somewhere new: uniform among
                # the novel ones, at a fraction of the simulated steps of trying them all
                rng.shuffle(actions)
                actions = next(([a] for a in actions if self._leads_to_new(env, a, seen)),
                               actions)
            env.step(rng.choice(actions))
            seen.add(env.state_key())
            steps += 1
        return self.score(env) * self.discount ** steps

    def score(self, env: Env) -> float:
        """What a walk's end is worth (:func:`~clew.agents.value.observed_score`)."""
        return observed_score(env, self.reward_scale)

    @staticmethod
    def _leads_to_new(env: Env, action: str, seen: set) -> bool:
        sim = env.copy()
        sim.step(action)
        return sim.state_key() not in seen

    async def evaluate(self, ctx: Context, reflections: Sequence[dict] = (),
                       usage: UsageByRole | None = None) -> ValueRecord:
        env = ctx.env
        if env.flags.simulation_mode == "charged":
            outcomes = [0.5]        # no walk may be taken, and the grade reads the optimum
        elif env.done:
            outcomes = [self.score(env)]
        else:
            key = env.state_key()
            key = (key, env.clock()) if key is not None else None   # the budget left counts
            cached = self._cache.get((ctx.task_id, key)) if key is not None else None
            if cached is None:
                where = repr(key) if key is not None else "|".join([*ctx.actions,
                                                                     str(ctx.final_action)])
                rng = derive_rng(self.seed, "rollout", ctx.task_id, where)
                cached = [self.walk(env.copy(), rng) for _ in range(self.rollouts)]
                if key is not None:
                    self._cache[(ctx.task_id, key)] = cached
            outcomes = cached
        v = from_unit(max(outcomes) if self.aggregate == "max"
                      else sum(outcomes) / len(outcomes), self.scale)
        return ValueRecord(v=v, kind="heuristic", info={"rollouts": outcomes},
                           samples=[(None, (f"Thoughts: {len(outcomes)} walk(s) from here "
                                           f"scored {v:.2f} on average."))],
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
