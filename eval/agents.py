"""Agents by name, for ``clew eval --agent NAME`` (DESIGN §2, §4).

Entries are import paths of factories ``factory(**options) -> Agent``; options come from the
config file and ``key=value`` overrides (``model``, ``seed``, ...). Lazy paths keep optional
dependencies (vllm, minigrid) out of runs that do not use them.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

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
    "distilled": "clew.agents.distilled:make_distilled",  # EL/IL fine-tuned model, no search
    # search agents (spec_002 §5); heuristic roles without `model`, LM roles with it
    "mcts": "clew.search.rmcts:make_mcts",
    "rmcts": "clew.search.rmcts:make_rmcts",
    "rmcts-mad": "clew.search.rmcts:make_rmcts_mad",
    "tot-bfs": "clew.search.rmcts:make_tot_bfs",
    "tot-dfs": "clew.search.rmcts:make_tot_dfs",
    "best-first": "clew.search.rmcts:make_best_first",
    "policy-only": "clew.search.rmcts:make_policy_agent",  # the search policy without search
    # spec_003 §5 interventions around any agent named by `inner`
    "parallel-threads": "clew.eval.agents:make_parallel_threads",
    "summary": "clew.eval.agents:make_summary",
}


def agent_factory(name: str):
    try:
        path = AGENTS[name]
    except KeyError:
        raise KeyError(f"unknown agent {name!r}; known: {', '.join(sorted(AGENTS))}") from None
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def build_agent(name: str, **options: Any) -> Agent:
    """Build an agent; options it does not accept are an error that names them."""
    factory = agent_factory(name)
    params = inspect.signature(factory).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(options) - set(params))
        if unknown:
            raise ValueError(
                f"agent {name!r} does not take option(s) {', '.join(unknown)}; "
                f"it takes: {', '.join(p for p in params if p != 'self') or 'none'}"
            )
    return factory(**options)


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
