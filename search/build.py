"""Build a search agent from its options (registered as ``search``; presets in
``configs/agents/*.yaml`` name it): roles, algorithm, reflection memory.

Memory scope: ``memory.dir`` names the store; the agents built for the episodes of one process
share its files (:func:`~clew.agents.memory.open_memory`), each with the options it was built
with. Without a ``dir`` the memory is temporary and belongs to one run: the agents built while a
run plays (:data:`~clew.agents.base.CURRENT_RUN`, set by ``run_suite``) share a fresh folder per
agent configuration and run; an agent built outside a run gets a folder of its own (reuse that
agent across episodes to let it learn). Nothing is shared across runs unless a ``dir`` says so.
"""

from __future__ import annotations

import tempfile
from typing import Any

from clew.agents.base import CURRENT_RUN
from clew.agents.build import Models, build_policy, build_reflector, build_value
from clew.agents.memory import open_memory
from clew.search.agent import SearchAgent
from clew.search.options import AgentOptions, parse_agent_options
from clew.search.registry import algorithm_class

_TEMP_MEMORY: dict[tuple[str, str], str] = {}


def _temp_memory_dir(opts: AgentOptions) -> str:
    run = CURRENT_RUN.get()
    if run is None:                         # outside a run: this agent's own
        return tempfile.mkdtemp(prefix="clew-memory-")
    dp, dv = opts.distilled_policy, opts.distilled_value  # models by spec: a loaded one is not JSON
    key = (run, opts.model_dump_json(exclude={"model": True, "distilled_policy": {"model"},
                                              "distilled_value": {"model"}})
           + str(opts.model_spec) + "".join(str(d.model_spec if d is not None else "")
                                            for d in (dp, dv)))
    if key not in _TEMP_MEMORY:
        _TEMP_MEMORY[key] = tempfile.mkdtemp(prefix="clew-memory-")
    return _TEMP_MEMORY[key]


def search_agent(opts: AgentOptions) -> SearchAgent:
    """The agent ``opts`` describe."""
    models = Models(opts)
    policy = build_policy(opts, opts.search.branching_factor, models, opts.distilled_policy)
    value = build_value(opts, opts.value, models, opts.distilled_value)
    reflector = build_reflector(opts, opts.reflection, models) if opts.reflection else None
    memory = None
    if opts.memory_on:
        memory = open_memory(opts.memory.dir or _temp_memory_dir(opts),
                             **opts.memory.store_options())
    algorithm = algorithm_class(opts.search.algorithm)(opts.search)
    info = {"roles": "lm" if opts.lm_roles else "heuristic",
            "model": opts.model_spec if opts.lm_roles else None, "value_kind": value.method}
    if opts.distilled_policy is not None:     # the policy is learned (agent kind learned+search)
        info.update(policy_kind="distilled", policy_model=opts.distilled_policy.model_spec,
                    policy_format=opts.distilled_policy.format)
    if opts.distilled_value is not None:      # the value is learned
        info.update(value_model=opts.distilled_value.model_spec,
                    value_format=opts.distilled_value.format)
    return SearchAgent(policy, value, algorithm, reflector=reflector, memory=memory,
                       reflection=opts.reflection, policy_memory=opts.policy_memory,
                       value_memory=opts.value_memory, episode=opts.episode, seed=opts.seed,
                       name=opts.label, info=info)


def make_search_agent(**options: Any) -> SearchAgent:
    """``--agent search`` (and every search preset): options as in :class:`AgentOptions`."""
    label = options.get("label") or "search"
    return search_agent(parse_agent_options(options, label))
