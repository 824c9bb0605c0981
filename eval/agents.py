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

import importlib
import inspect
from importlib.resources import files
from typing import Any

import yaml
from clew.agents.base import Agent

AGENTS: dict[str, str] = {
    "hill-baseline": "clew.agents.heuristics.explore_exploit:HillBaseline",
    "tree-baseline": "clew.agents.heuristics.explore_exploit:TreeBaseline",
    "maxsat-baseline": "clew.agents.heuristics.explore_exploit:MaxSatBaseline",
    "explore-exploit": "clew.agents.heuristics.explore_exploit:ExploreExploit",
    "random-query": "clew.agents.heuristics.explore_exploit:RandomQuery",
    "rooms-random-walk": "clew.agents.heuristics.rooms_random_walk:RoomsRandomWalk",
    "random": "clew.agents.heuristics.random_walk:RandomAgent",
    "frontier": "clew.agents.heuristics.gridmap_frontier:FrontierAgent",
    "react": "clew.agents.react:ReActAgent",
    "babyai-bot": "clew.agents.heuristics.babyai_bot_agent:BabyAIBotAgent",  # uses_oracle
    "gridmap-oracle": "clew.agents.heuristics.gridmap_frontier:OracleAgent",  # uses_oracle
    "distilled": "clew.agents.distilled:DistilledAgent",  # EL/IL fine-tuned model, no search
    # search agents over LM or heuristic roles; the named ones (mcts, rmcts, rmcts-mad, tot-bfs,
    # tot-dfs, best-first, ablations) are presets in configs/agents/
    "search": "clew.search.build:make_search_agent",
    "policy-only": "clew.agents.policy_agent:make_policy_agent",  # the policy without search
    # interventions around any agent named by `inner`
    "parallel-threads": "clew.eval.agents:make_parallel_threads",
    "summary": "clew.eval.agents:make_summary",
}


# --- presets -----------------------------------------------------------------------------------
def _preset_dir():
    return files("clew.configs").joinpath("agents")


def preset_names() -> list[str]:
    return sorted(p.name[:-5] for p in _preset_dir().iterdir() if p.name.endswith(".yaml"))


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
    try:
        path = AGENTS[name]
    except KeyError:
        raise KeyError(f"unknown agent {name!r}; known: {', '.join(agent_names())}") from None
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


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


def search_memory_dir(name: str, options: dict[str, Any]) -> bool:
    """Whether ``name`` with ``options`` is a search agent with a reflection memory whose
    store is not named (``clew eval`` then keeps it in the run directory)."""
    factory, merged, preset = resolve(name, options)
    if factory != "search":
        return False
    from clew.search.options import parse_agent_options

    opts = parse_agent_options(merged, preset or factory)
    return opts.memory_on and opts.memory.dir is None


# --- interventions -----------------------------------------------------------------------------
def make_parallel_threads(inner: str, threads: int = 2, inner_options: dict | None = None):
    """``--agent parallel-threads agent_options.inner=NAME agent_options.threads=P``."""
    from clew.agents.interventions import ParallelThreads

    return ParallelThreads(build_agent(inner, **(inner_options or {})), threads=threads)


def make_summary(inner: str, segments: int = 2, handoff: str = "template",
                 inner_options: dict | None = None):
    """``--agent summary agent_options.inner=NAME agent_options.segments=S``; with
    ``handoff=model`` the inner agent's model writes the hand-off."""
    from clew.agents.interventions import SummaryHandoff

    agent = build_agent(inner, **(inner_options or {}))
    return SummaryHandoff(agent, segments=segments, handoff=handoff,
                          lm=getattr(agent, "lm", None) if handoff == "model" else None)
