"""Agents by name, for ``clew eval --agent NAME`` (docs/architecture.md).

A name is either a factory or a preset:

* ``AGENTS`` maps names to import paths of factories ``factory(**options) -> Agent`` (lazy, so
  optional dependencies such as vllm or minigrid stay out of runs that do not use them);
* a preset is ``configs/agents/NAME.yaml``, shipped as package data (``clew.configs``): a
  partial run config ``{agent: OTHER, agent_options: {...}}`` naming a factory or another
  preset. The options given with the name are merged over the preset's (nested mappings key by
  key); the agent's label defaults to the preset's name. The same files work as ``--config``.

Options come from the config file and ``key=value`` overrides (``model``, ``seed``, ...); an
option the agent does not take is an error that names it.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from clew.agents.base import Agent
from clew.agents.interventions import ParallelThreads, SummaryHandoff
from clew.envs.registry import load_object
from clew.runner.config import PRESETS
from clew.search.options import parse_agent_options


@dataclass(frozen=True)
class AgentEntry:
    """One agent name: its factory (``"module:attribute"``, imported when used) and what it
    declares, checked against the run config before any work (:func:`check_fit`):

    * ``families``: the env families (:attr:`Env.family <clew.envs.base.Env.family>`) it can
      play; ``None``: every family;
    * ``model``: ``required`` (an LM agent: ``--model``), ``optional`` (LM roles with a model,
      heuristic roles without) or ``none`` (no model);
    * ``about``: one line for ``clew agents``.
    """

    factory: str
    families: tuple[str, ...] | None = None
    model: Literal["required", "optional", "none"] = "none"
    about: str = ""


ORACLE_QUERY = ("hill", "tree", "maxsat")  # the oracle-search families (docs/methods/envs.md#oracle-search-tasks)

AGENTS: dict[str, AgentEntry | str] = {
    "hill-baseline": AgentEntry("clew.agents.heuristics.query_baselines:HillBaseline", ("hill",),
                                about="explore-then-exploit baseline of HillSearch"),
    "tree-baseline": AgentEntry("clew.agents.heuristics.query_baselines:TreeBaseline", ("tree",),
                                about="explore-then-exploit baseline of TreeSearch"),
    "maxsat-baseline": AgentEntry("clew.agents.heuristics.query_baselines:MaxSatBaseline",
                                  ("maxsat",), about="explore-then-exploit baseline of MaxSat"),
    "explore-exploit": AgentEntry("clew.agents.heuristics.query_baselines:ExploreExploit",
                                  ORACLE_QUERY, about="the family's baseline, chosen by env"),
    "random-query": AgentEntry("clew.agents.heuristics.query_baselines:RandomQuery",
                               ORACLE_QUERY, about="uniformly random valid queries"),
    "rooms-random-walk": AgentEntry("clew.agents.heuristics.rooms_random_walk:RoomsRandomWalk",
                                    ("rooms",), about="random walk that collects what it sees"),
    "random": AgentEntry("clew.agents.heuristics.random_walk:RandomAgent",
                         about="uniformly random legal actions"),
    "frontier": AgentEntry("clew.agents.heuristics.gridmap_frontier:FrontierAgent",
                           ("gridmap",), about="frontier exploration on its own map"),
    "react": AgentEntry("clew.agents.react:ReActAgent", model="required",
                        about="ReAct: think, then act, one sample per step"),
    "babyai-bot": AgentEntry("clew.agents.heuristics.babyai_bot_agent:BabyAIBotAgent",
                             ("textminigrid",), about="the BabyAI bot (uses the oracle)"),
    "gridmap-oracle": AgentEntry("clew.agents.heuristics.gridmap_frontier:OracleAgent",
                                 ("gridmap",), about="shortest paths on the true map (oracle)"),
    "distilled": AgentEntry("clew.agents.distilled:DistilledAgent", model="required",
                            about="an EL/IL fine-tuned model, no search"),
    # search agents over LM or heuristic roles; the named ones (mcts, rmcts, rmcts-mad, tot-bfs,
    # tot-dfs, best-first, ablations) are presets in configs/agents/
    "search": AgentEntry("clew.search.build:make_search_agent", model="optional",
                         about="tree search over LM roles (--model) or heuristic roles"),
    "policy-only": AgentEntry("clew.agents.policy_agent:make_policy_agent", model="optional",
                              about="the search policy without search"),
    # interventions around any agent named by `inner` (docs/methods/interventions.md)
    "parallel-threads": AgentEntry("clew.runner.registry:make_parallel_threads", ORACLE_QUERY,
                                   about="the budget split into threads of agent_options.inner"),
    "summary": AgentEntry("clew.runner.registry:make_summary", ORACLE_QUERY,
                          about="agent_options.inner with context hand-offs"),
}


def register_agent(name: str, factory: str, families: tuple[str, ...] | None = None,
                   model: Literal["required", "optional", "none"] = "none",
                   about: str = "") -> None:
    """Add (or replace) an agent by import path; see :class:`AgentEntry`."""
    AGENTS[name] = AgentEntry(factory, tuple(families) if families else None, model, about)


def agent_entry(name: str) -> AgentEntry:
    """The entry of a factory name (a bare import string declares nothing: any family, and a
    model is neither required nor refused)."""
    try:
        found = AGENTS[name]
    except KeyError:
        raise KeyError(f"unknown agent {name!r}; known: {', '.join(agent_names())}") from None
    return AgentEntry(found, model="optional") if isinstance(found, str) else found


# --- presets -----------------------------------------------------------------------------------
def _preset_dir() -> Path:
    return PRESETS / "agents"


def preset_names() -> list[str]:
    return sorted(p.stem for p in _preset_dir().glob("*.yaml"))


def load_preset(name: str) -> dict[str, Any]:
    """The preset ``name`` as ``{agent, agent_options}``."""
    path = _preset_dir().joinpath(f"{name}.yaml")
    if not path.is_file():
        raise KeyError(f"unknown agent {name!r}; known: {', '.join(agent_names())}")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict) or not isinstance(data.get("agent"), str) or \
            not isinstance(data.get("agent_options", {}), dict):
        msg = f"preset {name}.yaml must hold `agent: NAME` and an `agent_options` mapping"
        raise ValueError(msg)  # noqa: TRY004 - a bad config file, not a caller's type error
    return data


def preset_about(name: str) -> str:
    """The first sentence of the preset file's leading comment, without its doc reference."""
    text = _preset_dir().joinpath(f"{name}.yaml").read_text()
    comment = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        comment.append(line.lstrip("#").strip())
    about = re.sub(r"\s*\(docs/[^)]*\)", "", " ".join(comment))
    return re.split(r"(?<=\.)\s", about, maxsplit=1)[0].rstrip(".")


def agent_names() -> list[str]:
    return sorted(set(AGENTS) | set(preset_names()))


def merge_options(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``, nested mappings merged key by key (into new dicts; values
    themselves are not copied: a loaded model passed as ``model`` stays the same object)."""
    out = dict(base)
    for k, v in over.items():
        both = isinstance(v, dict) and isinstance(out.get(k), dict)
        out[k] = merge_options(out[k], v) if both else v
    return out


def resolve(name: str, options: dict[str, Any]) -> tuple[str, dict[str, Any], str | None]:
    """The factory name and the merged options a name stands for (presets followed), and the
    first preset's name (None when ``name`` is a factory)."""
    seen: list[str] = []
    options = dict(options)
    while name not in AGENTS:
        if name in seen:
            raise ValueError(f"presets refer to each other in a loop: {' -> '.join(seen)}")
        seen.append(name)
        preset = load_preset(name)
        options = merge_options(preset.get("agent_options") or {}, options)
        name = preset["agent"]
    return name, options, (seen[0] if seen else None)


def agent_factory(name: str):
    return load_object(agent_entry(name).factory)


def build_agent(name: str, **options: Any) -> Agent:
    """Build an agent; options it does not accept are an error that names them."""
    name, options, preset = resolve(name, options)
    factory = agent_factory(name)
    params = inspect.signature(factory).parameters
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
    if preset and (var_kw or "label" in params):
        options.setdefault("label", preset)     # reports tell presets apart by their label
    if not var_kw:
        unknown = sorted(set(options) - set(params))
        if unknown:
            raise ValueError(
                f"agent {name!r} does not take option(s) {', '.join(unknown)}; "
                f"it takes: {', '.join(p for p in params if p != 'self') or 'none'}"
            )
    return factory(**options)


def model_need(name: str, options: dict[str, Any] | None = None) -> str:
    """``required`` | ``optional`` | ``none``: the entry's declaration, made precise for search
    presets whose options only LM roles read (a debate value needs a model)."""
    factory, merged, preset = resolve(name, options or {})
    need = agent_entry(factory).model
    if need == "optional" and factory == "search" and merged.get("model") in (None, ""):
        try:
            parse_agent_options(merged, preset or factory)
        except ValueError:
            try:  # what heuristic roles cannot read, LM roles may: then the model is missing
                parse_agent_options({**merged, "model": "fake:"}, preset or factory)
            except ValueError:
                return need  # a bad option: building the agent names it
            return "required"
    return need


def check_fit(name: str, options: dict[str, Any], families: set[str]) -> None:
    """Refuse (ValueError) an agent that cannot play one of ``families`` or lacks the model it
    needs, as its entry declares; interventions are checked with their inner agent too."""
    factory, merged, _ = resolve(name, options)
    entry = agent_entry(factory)
    if entry.families is not None:
        bad = sorted(families - set(entry.families))
        if bad:
            raise ValueError(
                f"agent {name!r} plays env family {', '.join(entry.families)} only, and the "
                f"suite has {', '.join(bad)} tasks (see `clew agents`)")
    has_model = merged.get("model") not in (None, "")
    if not has_model and model_need(name, options) == "required":
        raise ValueError(f"agent {name!r} needs a model: pass --model SPEC (hf:PATH, "
                         f"vllm:NAME, openai:http://HOST:PORT/v1#NAME, ...)")
    if entry.model == "none" and has_model:
        raise ValueError(f"agent {name!r} uses no model; leave out --model")
    if factory in ("parallel-threads", "summary") and isinstance(merged.get("inner"), str):
        check_fit(merged["inner"], merged.get("inner_options") or {}, families)


def search_memory(name: str, options: dict[str, Any]) -> tuple[bool, str | None]:
    """Whether ``name`` with ``options`` is a search agent with a reflection memory, and the
    store its options name (None: not named; ``clew eval`` then keeps it in the run)."""
    factory, merged, preset = resolve(name, options)
    if factory != "search":
        return False, None
    opts = parse_agent_options(merged, preset or factory)
    return opts.memory_on, opts.memory.dir if opts.memory_on else None


def search_memory_dir(name: str, options: dict[str, Any]) -> bool:
    """Whether ``name`` with ``options`` is a search agent with a reflection memory whose
    store is not named (``clew eval`` then keeps it in the run directory)."""
    on, where = search_memory(name, options)
    return on and where is None


# --- interventions -----------------------------------------------------------------------------
def make_parallel_threads(inner: str, threads: int = 2, inner_options: dict | None = None):
    """``--agent parallel-threads agent_options.inner=NAME agent_options.threads=P``."""
    return ParallelThreads(build_agent(inner, **(inner_options or {})), threads=threads)


def make_summary(inner: str, segments: int = 2, handoff: str = "template",
                 inner_options: dict | None = None):
    """``--agent summary agent_options.inner=NAME agent_options.segments=S``; with
    ``handoff=model`` the inner agent's model writes the hand-off."""
    agent = build_agent(inner, **(inner_options or {}))
    return SummaryHandoff(agent, segments=segments, handoff=handoff,
                          lm=getattr(agent, "lm", None) if handoff == "model" else None)
