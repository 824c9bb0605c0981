"""Search agents seen by the runner: MCTS, R-MCTS, R-MCTS_MAD and their ablations (spec_002 §1,
§3–§5).

:class:`SearchAgent` composes the algorithm-only core (:mod:`clew.search.mcts`, or a frontier
search of :mod:`clew.search.bfs_dfs` / :mod:`clew.search.best_first`) with the roles — a policy, a
value function, optionally a reflector and a :class:`~clew.agents.memory.ReflectionMemory` — and
with the episode: every simulated step happens in ``episode.simulator()`` (logged as a simulated
interaction), every LM call records its usage under its role in ``episode.usage``, and each step's
tree goes to ``episode.trees`` as ``(t, tree_dict)`` for the runner to save.

Per real step (§1.1): build a fresh tree at the real state, choose, discard the tree. A committed
*path* (§1.8 value one, or a ToT/best-first sequence §5.1) is executed one action per ``act`` call
without a new search, as long as each real observation matches the one the tree predicted.

At episode end (§3.7) the improvement loop writes reflections (value first, then policy) into the
memory. ``on_episode_end`` is synchronous in the runner's interface, so inside a running event
loop the loop is started as a task, registered in ``memory.pending`` and returned (a runner that
awaits awaitables gets it done at once); the next episode awaits pending jobs before it starts
(its retrieval snapshot, §4.4, then contains them).

Decisions:

* ``on_value_one="commit_path_and_continue"`` (D6). With ``commit_path_and_end`` the last action
  of the path carries ``info["end_episode"] = True`` (the runner does not act on it yet).
* ``horizon_value`` defaults from ``env.flags.outcome_mode`` (D5).
* Value estimates of identical states are cached per episode (:class:`~clew.agents.value.ValueCache`,
  key includes the value-config hash and the injected reflection ids).
* Memory scope: ``memory_dir`` names the store; agents built for the episodes of one process share
  it (:func:`~clew.agents.memory.open_memory`). Without ``memory_dir`` a fresh temporary folder
  per agent configuration and process is used (nothing is reused across runs unless asked).
* Per-request seeds derive from (seed, task id, step, node id, role) (D20).
"""

from __future__ import annotations

import asyncio
import copy
import tempfile
from dataclasses import dataclass, field
from typing import Any

from clew.agents.base import BaseAgent, Decision, Episode
from clew.agents.memory import ReflectionMemory
from clew.agents.policy import derive_seed
from clew.agents.prompts import PROMPTS_VERSION, Context, short_task
from clew.agents.reflection import ReflectionConfig, StepStat, TaskRecord, improve
from clew.agents.usage import UsageByRole
from clew.agents.value import ValueCache
from clew.search.frontier import BFS, DFS, BestFirst, BestFirstConfig, BFSConfig, DFSConfig
from clew.search.mcts import MCTS, MCTSConfig
from clew.search.nodes import Evaluation, Transition
from clew.search.tree import Edge, Node, tree_to_dict

ON_VALUE_ONE = ("commit_path_and_continue", "commit_path_and_end")


@dataclass
class AgentConfig:
    """Episode-level settings of a search agent (spec_002 Appendix A ``episode`` / ``search``)."""

    search: MCTSConfig = field(default_factory=MCTSConfig)
    max_steps: int | None = None           # T_max as the agent sees it (None: env's own limit)
    max_invalid_streak: int | None = 3
    on_value_one: str = "commit_path_and_continue"
    policy_memory: bool = False            # retrieve policy reflections at each expansion
    value_memory: bool = False             # retrieve value reflections at each evaluation
    reflection: ReflectionConfig | None = None   # None: no improvement loop
    seed: int = 0

    def __post_init__(self) -> None:
        if self.on_value_one not in ON_VALUE_ONE:
            raise ValueError(f"on_value_one must be one of {', '.join(ON_VALUE_ONE)}, "
                             f"got {self.on_value_one!r}")


def env_context(env: Any, task_id: str) -> dict[str, Any]:
    """Task text, grammar, criteria and examples from the env (spec_002 §8)."""
    task = env.instructions()
    try:
        criteria = env.instructions("criteria")
    except Exception:  # noqa: BLE001 - envs that do not know the variant may raise anything
        criteria = ""
    if criteria == task:
        criteria = ""
    examples = getattr(env, "prompt_examples", None)
    return {"task": task, "task_key": short_task(task), "action_help": env.action_help(),
            "criteria": criteria, "examples": list(examples()) if callable(examples) else [],
            "task_id": task_id}


class EpisodeHooks:
    """The core's :class:`~clew.search.mcts.SearchHooks` over one episode's simulator."""

    def __init__(self, agent: SearchAgent, episode: Episode, state: dict[str, Any]):
        self.agent, self.episode, self.state = agent, episode, state
        self.sim = episode.simulator()
        self.root_snap = self.sim.snapshot()
        env = episode.env
        self.base = state["env_ctx"]
        self.prefix_obs = [o.text for o in episode.observations]
        self.prefix_actions = [env.canonical(s.action) for s in episode.steps]
        self.prefix_raws = [s.raw for s in episode.steps]
        self.t = episode.t

    # context of a node: real prefix + simulated path
    def context(self, node: Node) -> Context:
        path = node.path_edges()
        obs, acts, raws = list(self.prefix_obs), list(self.prefix_actions), list(self.prefix_raws)
        final = final_raw = None
        for e in path:
            if e.is_stop and e.child is node:
                final, final_raw = e.key, e.raw
                break
            acts.append(e.key if not e.is_none else "(unparsable action)")
            raws.append(e.raw)
            obs.append(e.child.obs if e.child is not None and e.child.obs is not None else obs[-1])
        return Context(observations=obs, actions=acts, raws=raws, final_action=final,
                       final_raw=final_raw, env=self.sim,
                       seed=derive_seed(self.agent.config.seed, self.episode.key, self.t,
                                        node.node_id),
                       **self.base)

    async def expand(self, node: Node):
        ctx = self.context(node)
        refl = self.agent.retrieve(self.state, "policy", ctx)
        node.retrieved_policy_refl = [str(r.get("id")) for r in refl]
        if refl:
            node.info["policy_refl_scores"] = [r.get("score") for r in refl]
        return await self.agent.policy.propose(ctx, refl, usage=self.episode.usage)

    async def evaluate(self, node: Node) -> Evaluation:
        ctx = self.context(node)
        refl = self.agent.retrieve(self.state, "value", ctx)
        value = self.agent.value
        cache: ValueCache = self.state["value_cache"]
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
        return Transition(step.obs.text, bool(step.done), bool(step.valid))

    def snapshot(self) -> Any:
        return self.sim.snapshot()

    def restore(self, snap: Any) -> None:
        self.sim.restore(snap)


_TEMP_MEMORY: dict[str, str] = {}


class SearchAgent(BaseAgent):
    """A tree-search agent over roles; ``algorithm`` picks MCTS or a frontier search."""

    name = "mcts"

    def __init__(self, policy: Any, value: Any, config: AgentConfig | None = None,
                 reflector: Any = None, memory: ReflectionMemory | None = None,
                 name: str | None = None, algorithm: Any = None, info: dict | None = None):
        self.policy, self.value, self.reflector, self.memory = policy, value, reflector, memory
        self.config = config or AgentConfig()
        if name:
            self.name = name
        self.algorithm = algorithm or MCTS(self.config.search)
        roles = [policy, value, reflector]
        self.kind = "lm" if any(getattr(r, "kind", "") == "lm" for r in roles if r) else "heuristic"
        self.uses_oracle = any(getattr(r, "uses_oracle", False) for r in roles if r)
        self.info = info or {}
        self.last_improvement = None
        if (self.config.reflection or self.config.policy_memory or self.config.value_memory) \
                and memory is None:
            raise ValueError(f"agent {self.name}: reflection/memory is on but no memory is given")

    # --- per-episode state ---------------------------------------------------------------
    def _state(self, episode: Episode) -> dict[str, Any]:
        st = episode.scratch.get("search")
        if st is None:
            st = episode.scratch["search"] = {
                "pending": [], "expect_obs": None, "stats": [], "started": False,
                "value_cache": ValueCache(), "snapshot": None,
                "env_ctx": env_context(episode.env, episode.task.id),
            }
        return st

    async def _begin(self, episode: Episode, st: dict[str, Any]) -> None:
        st["started"] = True
        if self.memory is not None:
            await self.memory.settle()
            st["snapshot"] = self.memory.begin_task()

    def retrieve(self, st: dict[str, Any], which: str, ctx: Context) -> list[dict[str, Any]]:
        on = self.config.policy_memory if which == "policy" else self.config.value_memory
        if not on or self.memory is None:
            return []
        return self.memory.retrieve(which, ctx.memory_key(), st["snapshot"])

    # --- acting ----------------------------------------------------------------------------
    async def act(self, episode: Episode) -> Decision:
        st = self._state(episode)
        if not st["started"]:
            await self._begin(episode, st)
        if st["pending"]:
            if st["expect_obs"] is None or episode.obs.text == st["expect_obs"]:
                return self._commit(st, st["pending"].pop(0))
            st["pending"].clear()                   # the world surprised us: search again
        hooks = EpisodeHooks(self, episode, st)
        before = copy.deepcopy(episode.usage)
        result = await self.algorithm.plan(hooks, episode.obs.text)
        kind, edges, tree = result.kind, result.decision, result.tree
        tree.meta = self._tree_meta(episode, before, kind)
        episode.trees.append((episode.t, tree_to_dict(tree)))
        end = kind == "path" and self.config.on_value_one == "commit_path_and_end" and \
            tree.counters.get("stopped_by") == "value_one"
        items = []
        for i, e in enumerate(edges):
            items.append({"edge": e, "tree_step": episode.t, "kind": kind,
                          "end": end and i == len(edges) - 1})
        st["pending"] = items[1:]
        return self._commit(st, items[0])

    def _commit(self, st: dict[str, Any], item: dict[str, Any]) -> Decision:
        e: Edge = item["edge"]
        child = e.child
        st["expect_obs"] = child.obs if child is not None and not e.is_stop else None
        st["stats"].append(StepStat(
            q=e.q, n=e.n, prior=e.prior, v_next=e.v_next,
            value_record=child.value_record if child is not None else None,
            is_none=e.is_none, is_stop=e.is_stop))
        info = {"search": {"kind": item["kind"], "tree_step": item["tree_step"],
                           "edge_id": e.edge_id, "q": round(e.q, 6), "n": e.n,
                           "prior": round(e.prior, 6), "v_next": e.v_next}}
        if item["end"]:
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
                "value_scale": getattr(self.value, "scale", "unit"),
                "prompts_version": PROMPTS_VERSION,
                "search_config": self.algorithm.config.model_dump(), **self.info}

    # --- improvement loop ------------------------------------------------------------------
    def task_record(self, episode: Episode) -> TaskRecord:
        st = self._state(episode)
        env = episode.env
        stats = list(st["stats"])
        for s, step in zip(stats, episode.steps):
            s.valid = bool(step.valid)
        rcfg = self.config.reflection or ReflectionConfig()
        ctx = st["env_ctx"]
        return TaskRecord(
            task_id=episode.task.id, task_text=ctx["task"],
            task_key=ctx["task_key"], observations=[o.text for o in episode.observations],
            actions=[env.canonical(s.action) for s in episode.steps],
            raws=[s.raw for s in episode.steps], stats=stats[:len(episode.steps)],
            r_gt=float(env.grade()), action_help=ctx["action_help"], criteria=ctx["criteria"],
            success_threshold=rcfg.success_threshold)

    async def improve(self, episode: Episode):
        rec = self.task_record(episode)
        report = await improve(rec, self.memory, self.reflector, self.config.reflection,
                               getattr(self.value, "kind", "single"), usage=episode.usage)
        self.last_improvement = report
        return report

    def on_episode_end(self, episode: Episode):
        if self.config.reflection is None or self.reflector is None or not episode.steps:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.improve(episode))
        job = loop.create_task(self.improve(episode))
        if self.memory is not None:
            self.memory.pending.append(job)
        return job


# --- building agents from options --------------------------------------------------------------
def _temp_memory_dir(key: str) -> str:
    if key not in _TEMP_MEMORY:
        _TEMP_MEMORY[key] = tempfile.mkdtemp(prefix="clew-memory-")
    return _TEMP_MEMORY[key]


def _section(options: dict[str, Any], name: str) -> dict[str, Any]:
    value = options.get(name)
    if value is None or value is True:
        return {}
    if value is False:
        return {"enabled": False}
    if not isinstance(value, dict):
        raise TypeError(f"agent option {name!r} must be a mapping, got {type(value).__name__}")
    return dict(value)


def _take(d: dict[str, Any], where: str, allowed: set[str]) -> dict[str, Any]:
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise ValueError(f"agent option {where}: unknown key(s) {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(allowed))}")
    return d


SEARCH_KEYS = set(MCTSConfig.model_fields) - {"algorithm"}
LM_POLICY_KEYS = {"n_samples_min", "temperature", "top_p", "max_tokens", "retries"}
HEURISTIC_POLICY_KEYS = {"prior", "n_samples", "oracle_temperature"}
LM_VALUE_KEYS = {"kind", "scale", "parse_failure", "retries", "single", "debate"}


def build_roles(options: dict[str, Any]) -> dict[str, Any]:
    """Policy, value, reflector from agent options (``model`` + sections; spec_002 App. A).

    ``roles: heuristic`` (the default without ``model``) builds the heuristic roles of
    :mod:`clew.agents.heuristics.roles`; ``roles: lm`` needs ``model`` (a spec string).
    """
    from clew.agents.heuristics.roles import HeuristicPolicy, HeuristicValue, TemplateReflector

    model = options.get("model")
    roles = options.get("roles") or ("lm" if model else "heuristic")
    if roles not in ("lm", "heuristic"):
        raise ValueError(f"agent option roles must be lm|heuristic, got {roles!r}")
    seed = int(options.get("seed", 0))
    search = options.get("search") or {}
    b = int(search.get("branching_factor", 5))
    pol = _section(options, "policy")
    val = _section(options, "value")
    scale = val.get("scale", "unit")
    if roles == "heuristic":
        # LM-only keys of a preset are ignored here, so one preset serves both kinds of roles
        hp = _take({k: v for k, v in pol.items() if k not in LM_POLICY_KEYS}, "policy",
                   {"prior", "n_samples", "oracle_temperature"})
        policy = HeuristicPolicy(branching_factor=b, seed=seed, **hp)
        hv = _take({k: v for k, v in val.items() if k not in LM_VALUE_KEYS}, "value",
                   {"noise", "cap"})
        value = HeuristicValue(seed=seed, scale=scale, **hv)
        return {"policy": policy, "value": value, "reflector": TemplateReflector(), "lm": None}

    if not model:
        raise ValueError("agent option 'model' is required for LM roles (e.g. hf:PATH, "
                         "vllm:Qwen/Qwen2.5-7B-Instruct, openai:http://host:8000/v1#NAME)")
    from clew.agents.debate import DebateValue
    from clew.agents.lm.spec import load_model
    from clew.agents.policy import LMPolicy
    from clew.agents.reflection import Reflector
    from clew.agents.value import SingleValue

    lm = load_model(model, **(options.get("model_options") or {}))
    per_role = options.get("role_models") or {}       # per-role overrides (D15)
    def role_lm(role: str):
        return load_model(per_role[role]) if role in per_role else lm
    pol = {k: v for k, v in pol.items() if k not in HEURISTIC_POLICY_KEYS}
    policy = LMPolicy(role_lm("policy"), branching_factor=b,
                      **_take(pol, "policy", LM_POLICY_KEYS))
    kind = val.get("kind", "single")
    common = {"scale": scale, "parse_failure": val.get("parse_failure", "skip"),
              "retries": int(val.get("retries", 2))}
    if kind == "single":
        sa = _take(dict(val.get("single") or {}), "value.single",
                   {"n", "temperature", "top_p", "max_tokens", "window", "rubric"})
        value = SingleValue(role_lm("value"), **sa, **common)
    elif kind == "debate":
        mad = _take(dict(val.get("debate") or {}), "value.debate",
                    {"argue_temperature", "argue_top_p", "argue_max_tokens",
                     "judge_samples_per_order", "judge_temperature", "judge_top_p",
                     "judge_max_tokens", "window"})
        value = DebateValue(role_lm("value"), **mad, **common)
    else:
        raise ValueError(f"agent option value.kind must be single|debate, got {kind!r}")
    refl = _section(options, "reflection")
    rs = _take(dict(refl.get("reflector") or {}), "reflection.reflector",
               {"temperature", "top_p", "max_tokens"})
    expect_window = int((refl.get("policy") or {}).get("expect_window", 2)) \
        if isinstance(refl.get("policy"), dict) else 2
    reflector = Reflector(role_lm("reflection"), expect_window=expect_window, seed=seed, **rs)
    return {"policy": policy, "value": value, "reflector": reflector, "lm": lm}


def reflection_config(options: dict[str, Any], scale: str) -> ReflectionConfig | None:
    refl = options.get("reflection")
    if refl is False or refl is None:
        return None
    refl = dict(refl) if isinstance(refl, dict) else {}
    if refl.get("enabled") is False:
        return None
    pol = refl.get("policy", {})
    val = refl.get("value", {})
    pol = {"enabled": False} if pol is False else dict(pol or {})
    val = {"enabled": False} if val is False else dict(val or {})
    _take(pol, "reflection.policy", {"enabled", "n_max", "threshold", "expect_window"})
    _take(val, "reflection.value", {"enabled", "n_max", "threshold", "mode", "error"})
    _take(refl, "reflection", {"enabled", "use_gt_success", "success_threshold", "reflector",
                               "policy", "value"})
    return ReflectionConfig(
        use_gt_success=bool(refl.get("use_gt_success", False)),
        success_threshold=float(refl.get("success_threshold", 0.7)),
        policy_enabled=bool(pol.get("enabled", True)), policy_n_max=int(pol.get("n_max", 3)),
        policy_threshold=float(pol.get("threshold", 0.5)),
        value_enabled=bool(val.get("enabled", True)), value_n_max=int(val.get("n_max", 1)),
        value_threshold=float(val.get("threshold", 0.5)), value_mode=val.get("mode", "auto"),
        value_error=val.get("error", "forward"), scale=scale)


AGENT_KEYS = {"model", "model_options", "role_models", "roles", "seed", "search", "policy",
              "value", "reflection", "memory", "max_steps", "max_invalid_streak",
              "on_value_one", "stop_eval", "dfs_order", "label"}


def build_search_agent(default_name: str, options: dict[str, Any], algorithm: Any = None,
                       defaults: dict[str, Any] | None = None) -> SearchAgent:
    """A :class:`SearchAgent` from options layered over ``defaults`` (the preset)."""
    merged: dict[str, Any] = copy.deepcopy(defaults or {})
    for k, v in options.items():
        if isinstance(v, dict) and isinstance(merged.get(k), dict):
            merged[k] = {**merged[k], **v}
        else:
            merged[k] = v
    _take(merged, default_name, AGENT_KEYS)
    search = _take(dict(merged.get("search") or {}), "search", SEARCH_KEYS)
    roles = build_roles(merged)
    scale = (merged.get("value") or {}).get("scale", "unit")
    search.setdefault("early_stop_value", 1.0)
    rcfg = reflection_config(merged, scale)
    mem_opts = dict(merged.get("memory") or {})
    use_memory = bool(mem_opts.pop("enabled", rcfg is not None))
    policy_memory = use_memory and (rcfg is None or rcfg.policy_enabled)
    value_memory = use_memory and (rcfg is None or rcfg.value_enabled)
    memory = None
    if use_memory:
        from clew.agents.memory import open_memory

        directory = mem_opts.pop("dir", None)
        _take(mem_opts, "memory", {"embedding_model", "score_mode", "min_score", "policy_top_m",
                                   "value_top_m"})
        if directory is None:
            directory = _temp_memory_dir(repr(sorted(merged.items(), key=lambda kv: kv[0])))
        memory = open_memory(directory, **mem_opts)
    cfg = AgentConfig(search=MCTSConfig(**search), max_steps=merged.get("max_steps"),
                      max_invalid_streak=merged.get("max_invalid_streak", 3),
                      on_value_one=merged.get("on_value_one", "commit_path_and_continue"),
                      policy_memory=policy_memory, value_memory=value_memory,
                      reflection=rcfg, seed=int(merged.get("seed", 0)))
    info = {"roles": "heuristic" if roles["lm"] is None else "lm",
            "model": getattr(roles["lm"], "spec", None) if roles["lm"] is not None else None,
            "value_kind": getattr(roles["value"], "kind", "?")}
    return SearchAgent(roles["policy"], roles["value"], cfg, reflector=roles["reflector"],
                       memory=memory, name=merged.get("label") or default_name,
                       algorithm=algorithm, info=info)


# presets (spec_002 §5.5–§5.8); configs/agents/*.yaml hold the same as editable files
PRESETS: dict[str, dict[str, Any]] = {
    "mcts": {"value": {"kind": "single"}, "reflection": False},
    "rmcts": {"value": {"kind": "single"}, "reflection": {}},
    "rmcts-mad": {"value": {"kind": "debate"}, "reflection": {}},
}


def make_mcts(**options: Any) -> SearchAgent:
    """Plain MCTS: SA value, no memory, no reflection (spec_002 §5.5)."""
    return build_search_agent("mcts", options, defaults=PRESETS["mcts"])


def make_rmcts(**options: Any) -> SearchAgent:
    """R-MCTS: SA value + policy and value reflection memories (spec_002 §5.6)."""
    return build_search_agent("rmcts", options, defaults=PRESETS["rmcts"])


def make_rmcts_mad(**options: Any) -> SearchAgent:
    """R-MCTS_MAD: debate value + both memories (spec_002 §5.6); ablations via options
    (``reflection.value.enabled=false``, ``reflection.policy.enabled=false``,
    ``search.n_simulations=1``; spec_002 §5.7)."""
    defaults = copy.deepcopy(PRESETS["rmcts-mad"])
    if options.get("roles") == "heuristic" or not options.get("model"):
        defaults["value"] = {}
    return build_search_agent("rmcts-mad", options, defaults=defaults)


class PolicyAgent(BaseAgent):
    """The search agent's policy without search: one sampled action per step (the "no search,
    no memory" reference; for LM roles this is ReAct sampling, spec_002 §5.2)."""

    name = "policy"

    def __init__(self, policy: Any, name: str | None = None, seed: int = 0):
        self.policy = policy
        self.kind = getattr(policy, "kind", "heuristic")
        self.uses_oracle = getattr(policy, "uses_oracle", False)
        self.seed = seed
        if name:
            self.name = name

    async def act(self, episode: Episode) -> Decision:
        st = episode.scratch.setdefault("policy", {"env_ctx": env_context(episode.env,
                                                                          episode.task.id)})
        env = episode.env
        ctx = Context(observations=[o.text for o in episode.observations],
                      actions=[env.canonical(s.action) for s in episode.steps],
                      raws=[s.raw for s in episode.steps], env=env,
                      seed=derive_seed(self.seed, episode.key, episode.t), **st["env_ctx"])
        p = await self.policy.act_once(ctx, usage=episode.usage)
        action = p.action if p.action is not None else (p.raw or "(no action)")
        return Decision(action, raw=p.raw or None)


def make_policy_agent(**options: Any) -> PolicyAgent:
    """``policy-only``: the roles' policy, one sample per step, no search and no memory."""
    _take(options, "policy-only", AGENT_KEYS)
    roles = build_roles(options)
    return PolicyAgent(roles["policy"], name=options.get("label") or "policy-only",
                       seed=int(options.get("seed", 0)))


def _frontier(name: str, cls, config_cls, options: dict[str, Any]) -> SearchAgent:
    opts = dict(options)
    extra = {k: opts.pop(k) for k in ("stop_eval", "dfs_order") if k in opts}
    agent = build_search_agent(name, opts, defaults={"value": {"kind": "single"},
                                                     "reflection": False})
    base = agent.config.search.model_dump(exclude={"algorithm", "c_puct", "q_init",
                                                    "reexecute_edges"})
    agent.algorithm = cls(config_cls(**base, **extra))
    return agent


def make_tot_bfs(**options: Any) -> SearchAgent:
    return _frontier("tot-bfs", BFS, BFSConfig, options)


def make_tot_dfs(**options: Any) -> SearchAgent:
    return _frontier("tot-dfs", DFS, DFSConfig, options)


def make_best_first(**options: Any) -> SearchAgent:
    options.pop("dfs_order", None)
    return _frontier("best-first", BestFirst, BestFirstConfig, options)
