"""Agent presets: configs/agents/*.yaml are the only presets, shipped as package data and found
by name; every one loads and builds; unknown or unread options are errors naming the option."""

from pathlib import Path

import pytest
from clew.agents.options import OptionsError
from clew.runner.config import ConfigError, EvalConfig, load_config
from clew.runner.evaluate import check_agent
from clew.runner.registry import build_agent, load_preset, preset_names, resolve

ROOT = Path(__file__).parents[1]


def test_presets_are_the_yaml_files_shipped_as_package_data():
    files = sorted(p.stem for p in (ROOT / "configs" / "agents").glob("*.yaml"))
    assert preset_names() == files
    assert {"mcts", "rmcts", "rmcts-mad", "tot-bfs", "tot-dfs", "best-first",
            "rmcts-mad-no-prefl", "rmcts-mad-no-vrefl", "rmcts-mad-no-search"} <= set(files)

    for module in ("agent", "build", "options", "hooks"):     # no second table in code
        source = (ROOT / "search" / f"{module}.py").read_text()
        assert "PRESETS" not in source


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_loads_from_yaml_and_builds(name):
    preset = load_preset(name)
    EvalConfig(**preset, suite="gridmap-mini:test")          # also usable as --config
    load_config(EvalConfig, str(ROOT / "configs" / "agents" / f"{name}.yaml"),
                ["suite=gridmap-mini:test"])
    factory, options, _ = resolve(name, {})
    assert factory == "search"
    lm = options.get("roles") != "heuristic"
    given = {"model": "fake:Next action: ```up```"} if lm else {}
    # a distilled role's model is a required override
    learned = "distilled_policy" in options or "distilled_value" in options
    if "distilled_policy" in options:
        given["distilled_policy"] = {"model": "fake:Next action: ```up```"}
    if "distilled_value" in options:
        given["distilled_value"] = {"model": "fake:Value estimate: ```0.5```"}
    agent = build_agent(name, **given)
    assert agent.name == name                                 # reports tell presets apart
    assert agent.kind == ("learned+search" if learned else "lm" if lm else "heuristic")


def test_presets_mean_what_their_names_say():
    ablation = build_agent("rmcts-mad-no-vrefl", model="fake:x")
    assert ablation.reflection.value.enabled is False and not ablation.value_memory
    assert ablation.policy_memory and ablation.value.method == "debate"
    assert build_agent("rmcts-mad-no-search", model="fake:x").algorithm.config.n_simulations == 1
    assert build_agent("tot-dfs").algorithm.config.dfs_order == "prior_first"
    assert type(build_agent("best-first").algorithm).__name__ == "BestFirst"
    mcts = build_agent("mcts")
    assert mcts.reflection is None and mcts.memory is None and mcts.kind == "heuristic"
    assert build_agent("rmcts").memory is not None
    # the R-MCTS presets search in waves of 4 (variants included); plain MCTS one at a time
    for name in ("rmcts", "rmcts-mad", "rmcts-mad-no-prefl"):
        assert build_agent(name, model="fake:x").algorithm.config.wave_size == 4
    assert mcts.algorithm.config.wave_size == build_agent("mcts", model="fake:x") \
        .algorithm.config.wave_size == 1


@pytest.mark.parametrize("options, named", [
    ({"search": {"n_simulation": 3}}, "search.n_simulation"),          # a typo
    ({"search": {"dfs_order": "code"}}, "search.dfs_order"),            # read only by dfs
    ({"search": {"stop_eval": "code"}}, "search.stop_eval"),            # read only by frontiers
    ({"stop_eval": "code"}, "stop_eval"),                               # old top-level spelling
    ({"max_invalid_streak": 3}, "max_invalid_streak"),                  # the env's rule now
    ({"policy": {"temperature": 0.5}}, "policy.temperature"),           # LM-only, no model
    ({"model": "fake:x", "value": {"noise": 0.1}}, "value.noise"),      # heuristic-only
    ({"model": "fake:x", "value": {"debate": {"window": 2}}}, "value.debate"),
    ({"memory": {"min_score": 0.5}}, "memory.min_score"),               # no memory in mcts
    ({"search": {"algorithm": "beam"}}, "search.algorithm"),
    ({"value": {"scale": "percent"}}, "value.scale"),
])
def test_unknown_or_unread_option_is_an_error_naming_it(options, named):
    with pytest.raises(OptionsError, match=f"option {named.replace('.', '[.]')}:"):
        build_agent("mcts", **options)


def test_clew_eval_finds_a_preset_by_name_and_reports_option_errors():
    check_agent(EvalConfig(agent="rmcts-mad-no-prefl", suite="gridmap-mini:test",
                           agent_options={"model": "fake:x"}))
    with pytest.raises(ConfigError, match="'rmcts-mad' needs a model: pass --model"):
        check_agent(EvalConfig(agent="rmcts-mad", suite="gridmap-mini:test"))
    with pytest.raises(ConfigError, match="value.kind: read only by LM roles"):
        check_agent(EvalConfig(agent="rmcts-mad", suite="gridmap-mini:test",
                               agent_options={"roles": "heuristic"}))
    with pytest.raises(ConfigError, match="unknown agent 'mctss'"):
        check_agent(EvalConfig(agent="mctss", suite="gridmap-mini:test"))
