"""The two interventions of docs/methods/interventions.md as wrappers around any agent, and their statistics.

**Parallel threads** (docs/methods/interventions.md#parallel-threads). :class:`ParallelThreads` splits the episode's budget N into p
threads of N/p queries. Each thread is an independent episode of the wrapped agent on the same
instance: its own env (reset with the thread's budget, so its prompt states N/p), its own
:class:`~clew.agents.base.Episode` (fresh context: agents keep their chat in ``episode.scratch``)
and its own docs/methods/envs.md#query-protocol retry counters. The threads run one after the other, which is the single-agent
simulation of docs/methods/interventions.md#pooled-best-of-p-estimator: every valid thread query that is new to the real env is returned to the
runner and executed there, so the real episode's queries are the union of the threads' and its
best-found value is the best thread's (R_parallel = max_i R(thread_i)). A query whose answer the
real env already knows and would refuse (TreeSearch: a node another thread opened) is answered
from memory at no cost, as docs/methods/interventions.md#pooled-best-of-p-estimator allows; Hill and MaxSat repeats are charged like any query.
Invalid thread attempts stay inside the thread (they never reach the real env). When every thread
is finished before the real budget is spent, the wrapper returns ``STOP``.
[D] When p does not divide N, the first N mod p threads get one query more.

**Summary** (docs/methods/interventions.md#summary-hand-off). :class:`SummaryHandoff` resets the wrapped agent's context after
``floor(j·N/s)`` valid queries, j = 1..s−1 (s segments, s−1 hand-offs docs/methods/interventions.md#summary-hand-off), and hands it the
hand-off text. The budget counter continues. The hand-off is, by default, the paper's
deterministic template built by the env from the whole episode log (``env.handoff_message()``,
docs/methods/interventions.md#summary-hand-off: not written by the LM). ``handoff="model"`` is an extension the paper does not test: a
:class:`~clew.agents.lm.base.LanguageModel` writes the hand-off from the same facts (prompt
:data:`MODEL_HANDOFF_PROMPT`).

The protocol a wrapped agent offers for the summary (see :class:`ContextResettable`)::

    def reset_context(self, episode: Episode, handoff: str) -> None:
        # Drop the conversation kept for ``episode``; the next prompt is
        # [system prompt, user: handoff], later turns are appended as usual.

Agents without ``reset_context``: heuristic agents (``kind == "heuristic"``) are left as they are
(their "context" is the query history itself, which a hand-off does not change); any other agent
gets its ``episode.scratch`` cleared (clew agents keep their chat there) and the text in
``episode.scratch["handoff"]``.

**Statistics.** :func:`pooled_best_of_p` is the subset-averaging estimator of docs/methods/interventions.md#parallel-threads (the mean of
max-of-p over all C(r, p) subsets of r single-thread runs, closed form),
:func:`pooled_bootstrap_se` its bootstrap standard error (docs/methods/metric-best-found.md#aggregation), and :func:`split_threshold` the
threshold v_p of Theorem 5.1 (docs/methods/interventions.md#splitting-threshold), capped at 1.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from clew.agents.base import Agent, BaseAgent, Decision, Episode
from clew.agents.lm.base import ChatRequest, LanguageModel, Sampling
from clew.agents.lm.calls import call
from clew.envs.base import Env

STOP = "STOP"  # the oracle-search envs' early-stop action (clew.envs.oracle_search.protocol)


@runtime_checkable
class ContextResettable(Protocol):
    """What the summary wrapper needs from a wrapped agent (module docstring)."""

    def reset_context(self, episode: Episode, handoff: str) -> None: ...


# --- parallel threads ---------------------------------------------------------------------------

def thread_budgets(budget: int, threads: int) -> list[int]:
    """Budgets of the p threads: N/p each; the first N mod p threads get one more [D]."""
    if threads < 1 or budget < threads:
        raise ValueError(f"parallel threads: need 1 <= p <= N, got p={threads}, N={budget}")
    base, extra = divmod(budget, threads)
    return [base + (1 if i < extra else 0) for i in range(threads)]


@dataclass
class _Thread:
    env: Env
    episode: Episode
    closed: bool = False


class ParallelThreads(BaseAgent):
    """Run ``agent`` as ``threads`` independent threads splitting the budget (docs/methods/interventions.md#parallel-threads)."""

    def __init__(self, agent: Agent, threads: int = 2, name: str | None = None):
        if threads < 1:
            raise ValueError(f"parallel threads: threads must be >= 1, got {threads}")
        self.agent = agent
        self.threads = threads
        self.name = name or f"{getattr(agent, 'name', 'agent')}+parallel{threads}"
        self.kind = getattr(agent, "kind", "heuristic")
        self.uses_oracle = getattr(agent, "uses_oracle", False)

    def _state(self, episode: Episode) -> dict[str, Any]:
        st = episode.scratch.get("parallel_threads")
        if st is None:
            budget = _budget(episode.env)
            st = episode.scratch["parallel_threads"] = {
                "budgets": thread_budgets(budget, self.threads), "threads": [], "current": 0}
        return st

    def _thread(self, episode: Episode, st: dict[str, Any], i: int) -> _Thread:
        if i < len(st["threads"]):
            return st["threads"][i]
        task = episode.task
        sub = dataclasses.replace(task, params={**task.params, "budget": st["budgets"][i]},
                                  id=f"{task.id}/thread{i}")
        env = episode.env.copy()  # same class and options; reset gives a fresh episode
        first = env.reset(sub)
        th = _Thread(env, Episode(sub, env, first, key=f"{episode.key}/thread{i}"))
        st["threads"].append(th)
        return th

    async def act(self, episode: Episode) -> Decision:
        st = self._state(episode)
        real = episode.env
        while st["current"] < self.threads:
            i = st["current"]
            th = self._thread(episode, st, i)
            if th.env.done:
                self._close(th)
                st["current"] += 1
                continue
            decision = await self.agent.act(th.episode)
            if not isinstance(decision, Decision):
                decision = Decision(str(decision))
            _move_usage(th.episode, episode)
            step = th.env.step(decision.action)
            th.episode.record(decision, step)
            if not step.valid or step.info.get("stopped"):
                continue  # invalid attempts and a thread's own stop stay inside the thread
            query = step.info["query"]
            if real.answered(query):
                continue  # answered from memory (docs/methods/interventions.md#pooled-best-of-p-estimator): another thread already opened it
            return Decision(query, raw=decision.raw,
                            info={**decision.info, "thread": i, "thread_step": th.env.clock()})
        return Decision(STOP, info={"thread_grades": [t.env.grade() for t in st["threads"]],
                                    "thread_budgets": st["budgets"]})

    def _close(self, th: _Thread) -> None:
        if not th.closed:
            th.closed = True
            self.agent.on_episode_end(th.episode)

    def on_episode_end(self, episode: Episode) -> None:
        st = episode.scratch.get("parallel_threads")
        for th in (st or {}).get("threads", []):
            self._close(th)


def _budget(env: Env) -> int:
    budget = env.budget()
    if budget is None:
        raise TypeError(f"{type(env).__name__} has no query budget (Env.budget); the "
                        "interventions need one (hillsearch, treesearch, maxsatsearch)")
    return budget


def _move_usage(src: Episode, dst: Episode) -> None:
    for role, usage in src.usage.items():
        dst.usage.record(role, usage)
    src.usage.clear()


# --- summary hand-offs --------------------------------------------------------------------------

MODEL_HANDOFF_PROMPT = """\
You are about to be stopped and replaced by a NEW agent who will not see this conversation.
Below is the complete record of the search so far. Write the hand-off note for the new agent:
1. the evidence: the best value found and where, what has been explored and what has not;
2. whether the search seems stuck on a local maximum, and why;
3. a fresh plan for the {q_left} queries that remain.
Use only facts from the record; do not invent values. Do not output a query yourself.

{facts}"""


def handoff_points(budget: int, segments: int) -> list[int]:
    """Valid-query counts after which the context is reset: floor(j·N/s), j = 1..s−1 docs/methods/interventions.md#summary-hand-off."""
    if segments < 1:
        raise ValueError(f"summary: segments must be >= 1, got {segments}")
    return sorted({budget * j // segments for j in range(1, segments)} - {0, budget})


class SummaryHandoff(BaseAgent):
    """Reset ``agent``'s context with a hand-off every N/s valid queries (docs/methods/interventions.md#summary-hand-off)."""

    def __init__(self, agent: Agent, segments: int = 2, handoff: str = "template",
                 lm: LanguageModel | None = None, sampling: Sampling | None = None,
                 name: str | None = None):
        if handoff not in ("template", "model"):
            raise ValueError(f"summary: handoff must be 'template' or 'model', got {handoff!r}")
        if segments < 1:
            raise ValueError(f"summary: segments must be >= 1, got {segments}")
        self.agent = agent
        self.segments = segments
        self.handoff = handoff
        self.lm = lm
        self.sampling = sampling or Sampling(temperature=0.7, top_p=0.95, max_tokens=512)
        self.name = name or f"{getattr(agent, 'name', 'agent')}+summary{segments}"
        self.kind = getattr(agent, "kind", "heuristic")
        self.uses_oracle = getattr(agent, "uses_oracle", False)

    async def act(self, episode: Episode) -> Decision:
        env = episode.env
        done: list[int] = episode.scratch.setdefault("summary_handoffs", [])
        t = env.clock()
        info: dict[str, Any] = {}
        if t in handoff_points(_budget(env), self.segments) and t not in done and not env.done:
            text = await self.make_handoff(episode)
            reset_agent_context(self.agent, episode, text)
            done.append(t)
            info = {"handoff_at": t, "handoff": text}
        decision = await self.agent.act(episode)
        if not isinstance(decision, Decision):
            decision = Decision(str(decision))
        decision.info.update(info)
        return decision

    async def make_handoff(self, episode: Episode) -> str:
        env = episode.env
        facts = env.handoff_message()
        if self.handoff == "template":
            return facts
        lm = self.lm or getattr(self.agent, "lm", None)
        if lm is None:
            raise ValueError("summary with handoff='model' needs a LanguageModel: pass lm=... "
                             "or wrap an agent that has an 'lm' attribute")
        request = ChatRequest(
            [{"role": "system", "content": env.instructions()},
             {"role": "user", "content": MODEL_HANDOFF_PROMPT.format(q_left=env.remaining,
                                                                     facts=facts)}],
            dataclasses.replace(self.sampling, n=1), role="other")
        note = (await call(lm, request, episode.usage))[0].text.strip()
        return ("### MISSION HAND-OFF (notes from the previous agent)\n"
                f"{note}\nYou have {env.remaining} queries remaining. Output your next query.")

    def on_episode_end(self, episode: Episode) -> None:
        self.agent.on_episode_end(episode)


def reset_agent_context(agent: Agent, episode: Episode, handoff: str) -> None:
    """Apply a hand-off to ``agent`` (the protocol and fallbacks of the module docstring)."""
    if isinstance(agent, ContextResettable):
        agent.reset_context(episode, handoff)
    elif getattr(agent, "kind", None) == "heuristic":
        return
    else:
        keep = {k: v for k, v in episode.scratch.items() if k.startswith("summary_")}
        episode.scratch.clear()
        episode.scratch.update(keep)
        episode.scratch["handoff"] = handoff


# --- statistics ---------------------------------------------------------------------------------

def pooled_best_of_p(rewards: list[float], p: int) -> float:
    """Mean over all size-p subsets of ``rewards`` of the subset's max (docs/methods/interventions.md#parallel-threads, closed form):
    E_pool = Σ_{i=p}^{r} x_(i) · C(i−1, p−1) / C(r, p) over the ascending order statistics."""
    xs = sorted(float(x) for x in rewards)
    r = len(xs)
    if not 1 <= p <= r:
        raise ValueError(f"pooled_best_of_p: need 1 <= p <= r, got p={p}, r={r}")
    total = math.comb(r, p)
    return sum(xs[i - 1] * (math.comb(i - 1, p - 1) / total) for i in range(p, r + 1))


def pooled_bootstrap_se(rewards: list[float], p: int, resamples: int = 1000,
                        seed: int = 0) -> float:
    """Bootstrap SE of :func:`pooled_best_of_p` (docs/methods/metric-best-found.md#aggregation): resample the runs with replacement,
    recompute the estimator, take the standard deviation."""
    rng = random.Random(seed)
    xs = list(rewards)
    stats = [pooled_best_of_p(rng.choices(xs, k=len(xs)), p) for _ in range(resamples)]
    mean = sum(stats) / len(stats)
    return math.sqrt(sum((s - mean) ** 2 for s in stats) / max(1, len(stats) - 1))


def splitting_helps(x: float, p: int, alpha: float, c: float = 1.0) -> bool:
    """Inequality (1) of docs/methods/interventions.md#splitting-threshold under q(x) = c·x^α: 1 − (1 − q(x/p))^p > q(x)."""
    q = lambda b: c * b ** alpha
    return 1 - (1 - q(x / p)) ** p > q(x)


def split_threshold(p: int, alpha: float, c: float = 1.0) -> float:
    """v_p of Theorem 5.1: splitting into p threads helps for 0 < x < v_p, not for x >= v_p.

    y_p* is the root in (0, 1) of h(y) = 1 − (1−y)^p − p^α·y (closed form 2 − 2^α for p = 2,
    bisection otherwise); v_p = p·(y_p*/c)^(1/α), capped at 1 (docs/methods/interventions.md#splitting-threshold precision note).
    """
    if p < 2 or not 0 < alpha < 1 or not 0 < c <= 1:
        raise ValueError(f"split_threshold: need p >= 2, 0 < alpha < 1, 0 < c <= 1; got "
                         f"p={p}, alpha={alpha}, c={c}")
    if p == 2:
        y = 2 - 2 ** alpha
    else:
        def h(y: float) -> float:
            return 1 - (1 - y) ** p - p ** alpha * y
        lo, hi = 1e-12, 1.0
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if h(mid) > 0 else (lo, mid)
        y = (lo + hi) / 2
    return min(1.0, p * (y / c) ** (1 / alpha))
