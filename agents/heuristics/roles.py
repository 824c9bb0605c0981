"""Heuristic search roles for machines without a model (issue 5, DESIGN §5 "Embedded defaults").

* :class:`HeuristicPolicy` proposes the env's legal actions with priors: ``uniform`` (equal priors,
  legal order), ``sampled`` (frequencies of ``n`` uniform draws, like an LM's sampling noise), or
  ``oracle`` (draws weighted by the ground-truth progress of each successor; ``uses_oracle``).
* :class:`HeuristicValue` reads ground truth — ``progress(env)`` below — and adds Gaussian noise of
  a configurable size, to stand in for an imperfect LM judge. It always ``uses_oracle``; reports
  label agents built on it as heuristic.
* :class:`TemplateReflector` writes reflections from a template (no model), so the memory and the
  improvement loop run end to end on CPU.

Decisions:

* Progress in [0, 1] per env family: gridmap — 1 − D/D0 with D the fewest moves to activate the
  goal given the full map (Dijkstra over (cell, activated set), passing through cells assumed not
  to activate anything, so D is an upper bound); textminigrid — 1 − (bot plan length from here) /
  (bot plan length at start); any other env — ``env.grade()``. A finished success is 1.0.
* Noise is drawn once per state (seeded by the value seed, the task and the action path), so the
  same state always gets the same noisy value (like a biased but consistent judge); non-success
  states are capped at ``cap`` (0.9: "one more action") so noise alone never fakes the top value.
"""

from __future__ import annotations

import heapq
import math
import random
import zlib
from collections.abc import Sequence
from typing import Any

from clew.agents.heuristics import web
from clew.agents.heuristics.explore_exploit import FAMILIES as QUERY_FAMILIES
from clew.agents.heuristics.explore_exploit import random_query
from clew.agents.policy import Proposal, merge_samples
from clew.agents.prompts import Context
from clew.agents.usage import UsageByRole
from clew.agents.value import ValueRecord


def _rng(*parts: Any) -> random.Random:
    return random.Random(zlib.crc32(":".join(map(str, parts)).encode()))


# --- ground-truth progress ---------------------------------------------------------------------
def _gridmap_remaining(inst: Any, pos: tuple[int, int], achieved: frozenset[str]) -> float:
    """Fewest moves to activate the goal from (pos, achieved) with the full map known."""
    from clew.envs.gridmap.instance import prec

    cache = inst.__dict__.setdefault("_clew_remaining", {})  # per-instance memo
    key = (pos, achieved)
    if key in cache:
        return cache[key]
    if inst.goal in achieved:
        return 0.0
    dist = inst.distances
    best = math.inf
    heap = [(0, 0, pos, achieved)]
    seen: dict[tuple, int] = {}
    counter = 0
    while heap:
        d, _, cell, got = heapq.heappop(heap)
        if inst.goal in got:
            best = d
            break
        if seen.get((cell, got), math.inf) <= d:
            continue
        seen[(cell, got)] = d
        for node in inst.nodes:
            if node.name in got or not prec(node, got):
                continue
            counter += 1
            heapq.heappush(heap, (d + dist(cell, node.cell), counter, node.cell,
                                  got | {node.name}))
    cache[key] = best
    return best


def gridmap_progress(env: Any) -> float:
    oracle = env.oracle()
    inst = oracle.instance
    achieved = frozenset(u for u, s in oracle.status.items() if s == "achieved")
    if inst.goal in achieved:
        return 1.0
    d = _gridmap_remaining(inst, oracle.position, achieved)
    d0 = _gridmap_remaining(inst, inst.start, frozenset())
    if not math.isfinite(d) or d0 <= 0:
        return 0.0
    return max(0.0, min(1.0, 1.0 - d / max(d0, 1.0)))


_TMG_CACHE: dict[tuple, int | None] = {}


def textminigrid_progress(env: Any) -> float:
    oracle = env.oracle()
    total = oracle.solution_length
    # the bot's plan costs ~50 ms; search revisits the same world states along different paths
    key = (env.task.id if env.task else "", oracle.full_grid, oracle.agent, oracle.target)
    if key not in _TMG_CACHE:
        if len(_TMG_CACHE) > 200_000:
            _TMG_CACHE.clear()
        _TMG_CACHE[key] = oracle.bot_run().length
    plan = _TMG_CACHE[key]
    if not total or plan is None:
        return 0.0
    return max(0.0, min(1.0, 1.0 - plan / total))


PROGRESS = {"gridmap": gridmap_progress, "textminigrid": textminigrid_progress,
            "browsergym": web.progress}


def progress(env: Any) -> float:
    """Ground-truth progress of ``env``'s current state in [0, 1] (see module docstring)."""
    if env.done and env.grade() >= 1.0:
        return 1.0
    fn = PROGRESS.get(getattr(env, "name", ""))
    return float(fn(env)) if fn else float(env.grade())


# --- policy ------------------------------------------------------------------------------------
class HeuristicPolicy:
    """Legal actions with priors (see module docstring). ``propose(ctx)`` reads ``ctx.env``."""

    kind = "heuristic"

    def __init__(self, prior: str = "sampled", branching_factor: int = 5, n_samples: int = 20,
                 oracle_temperature: float = 0.1, seed: int = 0):
        if prior not in ("uniform", "sampled", "oracle"):
            raise ValueError(f"heuristic policy prior must be uniform|sampled|oracle, got {prior!r}")
        self.prior, self.b, self.n = prior, branching_factor, n_samples
        self.temperature, self.seed = oracle_temperature, seed
        self.uses_oracle = prior == "oracle"

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
        rng = _rng(*self._key(ctx))

        def prop(a: str, count: int = 1) -> Proposal:
            return Proposal(a, env.canonical(a), a, count, 0.0, bool(env.is_stop(a)))
        if env.name in web.WEB_ENVS:  # uniform over the page's candidates (heuristics/web.py)
            last = ctx.actions[-1] if ctx.actions else None
            return merge_samples([prop(a) for a in web.candidate_actions(env, last)], self.b)
        if not actions:
            # Oracle-query tasks have no short action list: sample random valid queries.
            if env.name not in QUERY_FAMILIES:
                return []
            return merge_samples([prop(random_query(env, rng)) for _ in range(self.n)], self.b)
        if self.prior == "uniform":
            return merge_samples([prop(a) for a in actions], self.b)
        draws = rng.choices(actions, weights=self._weights(env, actions), k=self.n)
        return merge_samples([prop(a) for a in draws], self.b)

    async def act_once(self, ctx: Context, usage: UsageByRole | None = None) -> Proposal:
        """One action drawn from the prior (the policy without search)."""
        env = ctx.env
        actions = list(env.legal_actions())
        rng = _rng("once", *self._key(ctx))
        if env.name in web.WEB_ENVS:
            actions = web.candidate_actions(env, ctx.actions[-1] if ctx.actions else None)
            a = rng.choice(actions) if actions else None
            return Proposal(a, env.canonical(a) if a else "", a or "", 1, 1.0, False)
        if not actions:
            if env.name not in QUERY_FAMILIES:
                return Proposal(None, "", "")
            a = random_query(env, rng)
            return Proposal(a, env.canonical(a), a, 1, 1.0, bool(env.is_stop(a)))
        a = rng.choices(actions, weights=self._weights(env, actions), k=1)[0]
        return Proposal(a, env.canonical(a), a, 1, 1.0, bool(env.is_stop(a)))


# --- value -------------------------------------------------------------------------------------
class HeuristicValue:
    """Ground-truth progress plus seeded Gaussian noise (see module docstring)."""

    kind = "heuristic"
    uses_oracle = True

    def __init__(self, noise: float = 0.2, cap: float = 0.9, seed: int = 0, scale: str = "unit"):
        if noise < 0:
            raise ValueError(f"heuristic value noise must be >= 0, got {noise}")
        self.noise, self.cap, self.seed, self.scale = noise, cap, seed, scale

    def config_hash(self) -> str:
        return f"heuristic:{self.noise}:{self.cap}:{self.seed}:{self.scale}"

    async def evaluate(self, ctx: Context, reflections: Sequence[dict] = (),
                       usage: UsageByRole | None = None) -> ValueRecord:
        env = ctx.env
        success = env.done and env.grade() >= 1.0
        truth = 1.0 if success else progress(env)
        rng = _rng(self.seed, ctx.task_id, "|".join(ctx.actions), ctx.final_action)
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
