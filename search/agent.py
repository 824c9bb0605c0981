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
awaits it). Which reflections an episode may retrieve (``docs/methods/reflection-memory.md#
memory-order``): in a run with a fixed order (``episode.order``, set by ``run_suite``) those of
the waves before its own, whatever the timing; otherwise the next episode awaits pending jobs
before it starts and sees everything written by then. The episode record's ``memory`` says
what it saw (visible sizes, score cut) and which ids it retrieved. The agent also records its
own estimate of success (``episode.success_est``: mean Q of the executed steps that count,
above ``reflection.success_threshold``) for data selection without labels.

``search.horizon_value`` left unset follows the env's outcome mode (``zero`` for
``terminal_success``, ``evaluate`` for ``graded_at_end``;
``docs/methods/mcts.md#horizon-and-early-stop``).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from clew.agents.base import NO_ACTION, BaseAgent, Decision, Episode
from clew.agents.memory import ReflectionMemory, memory_key
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
        kinds = {r.kind for r in roles}
        # a fine-tuned policy (the distilled policy) makes it the learned model with search
        self.kind = "learned+search" if "learned" in kinds else \
            "lm" if "lm" in kinds else "heuristic"
        self.uses_oracle = any(r.uses_oracle for r in roles)
        self.info = info or {}
        self.last_improvement: ImprovementReport | None = None
        self._algorithms: dict[str, SearchAlgorithm] = {}
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

    async def _begin(self, st: EpisodeState, episode: Episode) -> None:
        st.started = True
        if self.memory is not None:
            if episode.order is None:     # no fixed order: see what finished before we start
                await self.memory.settle()
            st.memory_view = self.memory.begin_task(episode.order, episode.env.memory_min_score)
            episode.memory = {**st.memory_view.to_dict(),
                              "retrieved": {"policy": [], "value": []}}
            if episode.order is not None:
                episode.memory["wave"] = episode.order.wave

    def retrieve(self, st: EpisodeState, which: str, ctx: Context,
                 episode: Episode | None = None) -> list[dict[str, Any]]:
        """Reflections for ``ctx`` (its env's compact view of the state; a final action is part
        of the key); their ids go into the episode's ``memory`` record."""
        on = self.policy_memory if which == "policy" else self.value_memory
        if not on or self.memory is None:
            return []
        key = memory_key(ctx.env.memory_view(ctx.obs), ctx.final_action)
        got = self.memory.retrieve(which, key, st.memory_view)
        if episode is not None and episode.memory is not None:
            seen = episode.memory["retrieved"][which]
            seen += [r["id"] for r in got if r["id"] not in seen]
        return got

    def algorithm_for(self, episode: Episode) -> SearchAlgorithm:
        """The algorithm, with ``horizon_value`` from the env's outcome mode unless the options
        gave one."""
        cfg = self.algorithm.config
        if "horizon_value" in cfg.model_fields_set:
            return self.algorithm
        mode = "zero" if episode.env.flags.outcome_mode == "terminal_success" else "evaluate"
        if mode not in self._algorithms:
            resolved = cfg.model_copy(update={"horizon_value": mode})
            self._algorithms[mode] = type(self.algorithm)(resolved)
        return self._algorithms[mode]

    # --- acting ----------------------------------------------------------------------------
    async def act(self, episode: Episode) -> Decision:
        st = self.state(episode)
        if not st.started:
            await self._begin(st, episode)
        if st.pending:
            if st.expect_obs is None or episode.obs.text == st.expect_obs:
                return self._commit(st, st.pending.pop(0))
            st.pending.clear()                   # the world surprised us: search again
        before = copy.deepcopy(episode.usage)
        algorithm = self.algorithm_for(episode)
        result = await algorithm.plan(EpisodeHooks(self, episode, st), episode.obs.text)
        result.tree.meta.update(self._tree_meta(episode, before, result.kind, algorithm))
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
        st.expect_obs = child.obs if child is not None and not e.is_stop and not e.is_none \
            else None
        # keyed by the decision, so reflection pairs it with the step it became (charged
        # simulation records steps of its own, and a query already paid for is not executed)
        st.stats[(step.tree_step, e.edge_id)] = StepStat(
            q=e.q, n=e.n, prior=e.prior, v_next=e.v_next,
            value_record=child.value_record if child is not None else None,
            is_none=e.is_none, is_stop=e.is_stop, action=None if e.is_none else e.key)
        info: dict[str, Any] = {"search": {"kind": step.kind, "tree_step": step.tree_step,
                                           "edge_id": e.edge_id, "q": round(e.q, 6), "n": e.n,
                                           "prior": round(e.prior, 6), "v_next": e.v_next}}
        if step.end:
            info["end_episode"] = True
        if e.is_none:   # nothing parsed: an invalid step; the runner does not step the env
            info["no_action"] = True
            return Decision(NO_ACTION, raw=e.raw or None, info=info)
        return Decision(e.action, raw=e.raw or None, info=info)

    def _tree_meta(self, episode: Episode, before: UsageByRole, kind: str,
                   algorithm: SearchAlgorithm) -> dict[str, Any]:
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
                "search_config": algorithm.config.model_dump(), **self.info}

    # --- learning from the episode -----------------------------------------------------------
    def task_record(self, episode: Episode) -> TaskRecord:
        """The executed trajectory with the statistics of the edge behind each step.

        In charged simulation a committed query the search already paid for is not executed
        again: its statistics go to the step that paid for it. Other steps the agent did not
        decide (queries charged and not committed) get none and are excluded from attribution.
        A final STOP has no observation after it."""
        st = self.state(episode)
        env = episode.env
        decided = {(s.get("tree_step"), s.get("edge_id")) for s in
                   (step.info.get("search") or {} for step in episode.steps)}
        paid: dict[str, StepStat] = {}
        for key, stat in st.stats.items():      # in commit order: the first commit wins
            if key not in decided and stat.action is not None:
                paid.setdefault(stat.action, stat)
        stats = []
        for step in episode.steps:
            s = step.info.get("search")
            if s is not None:
                stat = st.stats.get((s.get("tree_step"), s.get("edge_id")))
            else:   # a query charged during a search: the decision, if the search committed it
                stat = paid.pop(env.canonical(step.action), None) \
                    if step.info.get("charged_simulation") else None
            stat = StepStat(runner_inserted=True) if stat is None else copy.copy(stat)
            stat.valid = bool(step.valid)
            stats.append(stat)
        observations = [o.text for o in episode.observations]
        last = episode.steps[-1] if episode.steps else None
        if last is not None and last.done and env.is_stop(last.action):
            observations = observations[:len(episode.steps)]   # nothing follows a final STOP
        ctx = st.context
        threshold = (self.reflection or REFLECTION_DEFAULTS).success_threshold
        return TaskRecord(
            task_id=episode.task.id, task_text=ctx.task,
            task_key=ctx.task_key, observations=observations,
            actions=[env.canonical(s.action) for s in episode.steps],
            raws=[s.raw for s in episode.steps], stats=stats,
            r_gt=float(env.grade()), action_help=ctx.action_help, criteria=ctx.criteria,
            success_threshold=threshold, views=[env.memory_view(o) for o in observations],
            episode=episode.key, order=episode.order)

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
        if episode.order is None:   # in a run's waves the runner awaits it; the order does the rest
            self.memory.pending.append(job)
        return job
