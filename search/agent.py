"""The search agent seen by the runner: it acts by searching and learns from its episodes
(``docs/methods/rmcts.md``).

:class:`SearchAgent` composes a search algorithm (any :class:`~clew.search.algorithm.
SearchAlgorithm`: MCTS, BFS/DFS, best-first, or one registered from outside) with the roles — a
policy, a value function, optionally a reflector and a reflection memory. MCTS, R-MCTS,
R-MCTS_MAD, ToT and best-first are this one class with different options (presets in
``configs/agents/``).

Per real step: build a fresh tree at the real state (through
:class:`~clew.search.hooks.EpisodeHooks`), record it in ``episode.trees`` as ``(t, tree dict)``
for the runner to save, and execute the decision one edge per ``act`` call without a new search,
as long as each real observation matches the one the tree predicted.

At episode end the improvement loop writes reflections (value first, then policy) into the
memory. ``on_episode_end`` is synchronous in the runner's interface, so inside a running event
loop the loop is started as a task, registered in ``memory.pending`` and returned (the runner
awaits it); the next episode awaits pending jobs before it starts, so its retrieval view
contains them. The agent also records its own estimate of success (``episode.success_est``:
mean Q of the executed edges above ``reflection.success_threshold``) for data selection without
labels.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from clew.agents.base import BaseAgent, Decision, Episode
from clew.agents.memory import ReflectionMemory
from clew.agents.options import ReflectionOptions
from clew.agents.prompts import PROMPTS_VERSION, Context, task_context
from clew.agents.reflection import ImprovementReport, StepStat, TaskRecord, improve
from clew.agents.roles import Policy, Reflector, ValueFunction
from clew.agents.usage import UsageByRole
from clew.search.algorithm import SearchAlgorithm
from clew.search.hooks import EpisodeHooks, EpisodeState, PlannedStep
from clew.search.options import EpisodeOptions
from clew.search.tree import tree_to_dict

REFLECTION_DEFAULTS = ReflectionOptions()


class SearchAgent(BaseAgent):
    """A tree-search agent over roles; see the module docstring."""

    name = "search"

    def __init__(self, policy: Policy, value: ValueFunction, algorithm: SearchAlgorithm, *,
                 reflector: Reflector | None = None, memory: ReflectionMemory | None = None,
                 reflection: ReflectionOptions | None = None, policy_memory: bool = False,
                 value_memory: bool = False, episode: EpisodeOptions | None = None,
                 seed: int = 0, name: str | None = None, info: dict[str, Any] | None = None):
        self.policy, self.value, self.algorithm = policy, value, algorithm
        self.reflector, self.memory, self.reflection = reflector, memory, reflection
        self.policy_memory, self.value_memory = policy_memory, value_memory
        self.episode_options = episode or EpisodeOptions()
        self.seed = seed
        if name:
            self.name = name
        roles = [r for r in (policy, value, reflector) if r is not None]
        self.kind = "lm" if any(r.kind == "lm" for r in roles) else "heuristic"
        self.uses_oracle = any(r.uses_oracle for r in roles)
        self.info = info or {}
        self.last_improvement: ImprovementReport | None = None
        if (reflection is not None or policy_memory or value_memory) and memory is None:
            raise ValueError(f"agent {self.name}: reflection/memory is on but no memory is given")
        if reflection is not None and reflector is None:
            raise ValueError(f"agent {self.name}: reflection is on but no reflector is given")

    # --- per-episode state ---------------------------------------------------------------
    def state(self, episode: Episode) -> EpisodeState:
        st = episode.scratch.get("search")
        if st is None:
            st = episode.scratch["search"] = EpisodeState(task_context(episode.env,
                                                                       episode.task.id))
        return st

    async def _begin(self, st: EpisodeState) -> None:
        st.started = True
        if self.memory is not None:
            await self.memory.settle()
            st.memory_view = self.memory.begin_task()

    def retrieve(self, st: EpisodeState, which: str, ctx: Context) -> list[dict[str, Any]]:
        on = self.policy_memory if which == "policy" else self.value_memory
        if not on or self.memory is None:
            return []
        return self.memory.retrieve(which, ctx.memory_key(), st.memory_view)

    # --- acting ----------------------------------------------------------------------------
    async def act(self, episode: Episode) -> Decision:
        st = self.state(episode)
        if not st.started:
            await self._begin(st)
        if st.pending:
            if st.expect_obs is None or episode.obs.text == st.expect_obs:
                return self._commit(st, st.pending.pop(0))
            st.pending.clear()                   # the world surprised us: search again
        before = copy.deepcopy(episode.usage)
        result = await self.algorithm.plan(EpisodeHooks(self, episode, st), episode.obs.text)
        result.tree.meta.update(self._tree_meta(episode, before, result.kind))
        episode.trees.append((episode.t, tree_to_dict(result.tree)))
        end = result.stopped_by == "value_one" and \
            self.episode_options.on_value_one == "commit_path_and_end"
        last = len(result.decision) - 1
        steps = [PlannedStep(e, episode.t, result.kind, end and i == last)
                 for i, e in enumerate(result.decision)]
        st.pending = steps[1:]
        return self._commit(st, steps[0])

    def _commit(self, st: EpisodeState, step: PlannedStep) -> Decision:
        e = step.edge
        child = e.child
        st.expect_obs = child.obs if child is not None and not e.is_stop else None
        st.stats.append(StepStat(
            q=e.q, n=e.n, prior=e.prior, v_next=e.v_next,
            value_record=child.value_record if child is not None else None,
            is_none=e.is_none, is_stop=e.is_stop))
        info: dict[str, Any] = {"search": {"kind": step.kind, "tree_step": step.tree_step,
                                           "edge_id": e.edge_id, "q": round(e.q, 6), "n": e.n,
                                           "prior": round(e.prior, 6), "v_next": e.v_next}}
        if step.end:
            info["end_episode"] = True
        # NONE (nothing parsed): hand the env the raw text so it records an invalid step
        action = e.action if e.action is not None else (e.raw or "(no action)")
        return Decision(action, raw=e.raw or None, info=info)

    def _tree_meta(self, episode: Episode, before: UsageByRole, kind: str) -> dict[str, Any]:
        usage = {}
        for role, u in episode.usage.items():
            b = before.get(role)
            d = {"prompt_tokens": u.prompt_tokens - (b.prompt_tokens if b else 0),
                 "completion_tokens": u.completion_tokens - (b.completion_tokens if b else 0),
                 "calls": u.calls - (b.calls if b else 0)}
            if any(d.values()):
                usage[role] = d
        return {"t": episode.t, "task_id": episode.task.id, "episode": episode.key,
                "env": episode.task.env, "agent": self.name, "agent_kind": self.kind,
                "uses_oracle": self.uses_oracle, "decision": kind, "usage": usage,
                "value_scale": self.value.scale, "value_kind": self.value.method,
                "prompts_version": PROMPTS_VERSION,
                "search_config": self.algorithm.config.model_dump(), **self.info}

    # --- learning from the episode -----------------------------------------------------------
    def task_record(self, episode: Episode) -> TaskRecord:
        st = self.state(episode)
        env = episode.env
        stats = list(st.stats)
        for s, step in zip(stats, episode.steps):
            s.valid = bool(step.valid)
        ctx = st.context
        threshold = (self.reflection or REFLECTION_DEFAULTS).success_threshold
        return TaskRecord(
            task_id=episode.task.id, task_text=ctx.task,
            task_key=ctx.task_key, observations=[o.text for o in episode.observations],
            actions=[env.canonical(s.action) for s in episode.steps],
            raws=[s.raw for s in episode.steps], stats=stats[:len(episode.steps)],
            r_gt=float(env.grade()), action_help=ctx.action_help, criteria=ctx.criteria,
            success_threshold=threshold)

    async def improve(self, episode: Episode) -> ImprovementReport:
        rec = self.task_record(episode)
        report = await improve(rec, self.memory, self.reflector, self.reflection,
                               self.value.method, self.value.scale, usage=episode.usage)
        self.last_improvement = report
        return report

    def on_episode_end(self, episode: Episode):
        if not episode.steps:
            return None
        episode.success_est = bool(self.task_record(episode).r_est)
        if self.reflection is None:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.improve(episode))
        job = loop.create_task(self.improve(episode))
        self.memory.pending.append(job)
        return job
