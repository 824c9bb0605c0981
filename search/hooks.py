"""The adapter between one episode and the search core: :class:`EpisodeHooks` implements
:class:`~clew.search.nodes.SearchHooks` over the episode's simulator and the agent's roles, and
:class:`EpisodeState` is what a search agent keeps per episode.

Every simulated step happens in ``episode.simulator()``: a copy of the real env, wrapped with the
same episode rules and the same history (so its transitions say when a path is cut, and the
tree's horizon is the runner's step limit minus the steps taken), whose steps are logged as
simulated interactions. Every LM call records its usage under its role in ``episode.usage``.
A node's context is the real prefix plus the simulated path; its seed derives from the agent's
seed, the episode, the real step and the node (:func:`~clew.agents.seeds.derive_seed`), and a
repeated expansion of a node (nothing parsed the first time) adds its attempt number, so it
samples anew.
Value estimates of identical states are cached per episode (the key holds the value function's
config hash and the ids of the injected reflections).
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from clew.agents.base import Episode
from clew.agents.memory import MemoryView
from clew.agents.prompts import Context
from clew.agents.reflection import StepStat
from clew.agents.roles import Policy, ValueFunction
from clew.agents.seeds import derive_seed
from clew.agents.value import ValueCache
from clew.search.algorithm import Evaluation, Transition
from clew.search.tree import Edge, Node


@dataclass
class PlannedStep:
    """One edge of a decision, waiting to be executed."""

    edge: Edge
    tree_step: int              # the real step whose tree chose it
    kind: str                   # the decision kind
    end: bool = False           # the last edge of a value-one path under commit_path_and_end


@dataclass
class EpisodeState:
    """A search agent's state for one episode."""

    context: Context                                    # the task part of every role's context
    value_cache: ValueCache = field(default_factory=ValueCache)
    pending: list[PlannedStep] = field(default_factory=list)
    expect_obs: str | None = None                       # what the tree predicted we will see
    # per committed edge, keyed (tree step, edge id), for reflection
    stats: dict[tuple[int, int], StepStat] = field(default_factory=dict)
    started: bool = False
    memory_view: MemoryView | None = None                # what retrieval may see in this episode


class Planner(Protocol):
    """What the hooks use of the search agent they serve (:class:`clew.search.agent.SearchAgent`):
    its seed, its roles and its retrieval of reflections."""

    seed: int | None
    policy: Policy
    value: ValueFunction

    def retrieve(self, state: EpisodeState, which: str, ctx: Context,
                 episode: Episode) -> list[dict[str, Any]]: ...


class EpisodeHooks:
    """The core's hooks over one episode's simulator (see the module docstring)."""

    def __init__(self, agent: Planner, episode: Episode, state: EpisodeState):
        self.agent, self.episode, self.state = agent, episode, state
        self.sim = episode.simulator()
        self.root_snap = self.sim.snapshot()
        # for algorithms that draw random numbers themselves (best-of-N, AB-MCTS)
        self.seed = derive_seed(agent.seed, episode.key, episode.t, "search")
        env = episode.env
        self.prefix_obs = [o.text for o in episode.observations]
        self.prefix_actions = [env.canonical(s.action) for s in episode.steps]
        self.prefix_raws = [s.raw for s in episode.steps]
        self.prefix_valid = [bool(s.valid) for s in episode.steps]
        self.expansions: Counter[int] = Counter()   # policy calls per node (attempts)

    def context(self, node: Node, attempt: int = 0) -> Context:
        """Real prefix + the simulated path to ``node`` (a STOP edge is its final action)."""
        obs, acts = list(self.prefix_obs), list(self.prefix_actions)
        raws, valid = list(self.prefix_raws), list(self.prefix_valid)
        final = final_raw = None
        for e in node.path_edges():
            if e.is_stop and e.child is node:
                final, final_raw = e.key, e.raw
                break
            acts.append(e.key if not e.is_none else "(unparsable action)")
            raws.append(e.raw)
            valid.append(not e.is_none and bool(e.child is None or e.child.info.get("valid", True)))
            obs.append(e.child.obs if e.child is not None and e.child.obs is not None else obs[-1])
        parts = (node.node_id, attempt) if attempt else (node.node_id,)
        seed = derive_seed(self.agent.seed, self.episode.key, self.episode.t, *parts)
        return self.state.context.at(obs, acts, raws, final, final_raw, env=self.sim, seed=seed,
                                     valid=valid)

    async def expand(self, node: Node):
        ctx = self.context(node, self.expansions[node.node_id])
        self.expansions[node.node_id] += 1
        refl = self.agent.retrieve(self.state, "policy", ctx, self.episode)
        node.retrieved_policy_refl = [str(r.get("id")) for r in refl]
        if refl:
            node.info["policy_refl_scores"] = [r.get("score") for r in refl]
        return await self.agent.policy.propose(ctx, refl, usage=self.episode.usage)

    async def evaluate(self, node: Node) -> Evaluation:
        ctx = self.context(node)
        refl = self.agent.retrieve(self.state, "value", ctx, self.episode)
        value = self.agent.value
        cache = self.state.value_cache
        key = cache.key(ctx, value.config_hash(), [str(r.get("id")) for r in refl])
        rec = cache.get(key)
        if rec is not None:
            return Evaluation(rec.v, rec.to_dict(), cached=True)
        rec = await value.evaluate(ctx, refl, usage=self.episode.usage)
        cache.put(key, rec)
        return Evaluation(rec.v, rec.to_dict())

    def to_root(self) -> None:
        self.sim.restore(self.root_snap)

    def apply(self, node: Node, edge: Edge) -> Transition:
        step = self.sim.step(edge.action)
        return Transition(step.obs.text, bool(step.terminated), bool(step.valid), step.truncated_by)

    def snapshot(self) -> Any:
        return self.sim.snapshot()

    def restore(self, snap: Any) -> None:
        self.sim.restore(snap)

    def fork(self) -> EpisodeHooks:
        """The same hooks over a copy of the simulator at its current state (the calls of one
        leaf in an MCTS wave, docs/methods/mcts.md#leaf-parallel-waves)."""
        twin = copy.copy(self)
        twin.sim = self.sim.copy()
        return twin
