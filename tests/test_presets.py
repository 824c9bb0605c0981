"""Every agent preset in configs/agents/ validates as a run config and builds its agent."""

from pathlib import Path

import pytest

from clew.eval.agents import build_agent
from clew.eval.config import EvalConfig, load_config

PRESETS = sorted((Path(__file__).parents[1] / "configs" / "agents").glob("*.yaml"))


def test_there_are_presets_for_every_search_agent():
    agents = {load_config(EvalConfig, str(p), ["suite=gridmap-mini:test"]).agent
              for p in PRESETS}
    assert {"mcts", "rmcts", "rmcts-mad", "tot-bfs", "tot-dfs", "best-first"} <= agents


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.stem)
def test_preset_builds_its_agent(preset):
    cfg = load_config(EvalConfig, str(preset), ["suite=gridmap-mini:test"])
    options = dict(cfg.agent_options)
    if cfg.agent.startswith("rmcts") or options.get("roles") == "lm":
        options.setdefault("model", "fake:Action: up")  # LM roles need a model spec
    agent = build_agent(cfg.agent, **options)
    # ablations are told apart in reports by their label
    assert agent.name == options.get("label", cfg.agent)
    assert agent.kind == ("lm" if "model" in options else "heuristic")
