"""Adding a search algorithm from outside the package takes one module (tests/algo_greedy.py)
and one registry line; it then runs through `clew eval` like the built-in ones."""

from __future__ import annotations

import json

import pytest
from clew.agents.options import OptionsError
from clew.cli.main import main
from clew.runner.registry import build_agent
from clew.search.registry import ALGORITHMS, register_algorithm
from clew.search.tree import load_tree


@pytest.fixture
def greedy():
    register_algorithm("greedy", "algo_greedy:Greedy")      # the one registry line
    yield
    ALGORITHMS.pop("greedy")


def test_an_outside_algorithm_runs_through_clew_eval(greedy, tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["eval", "--agent", "search", "--suite", "gridmap-mini:test", "--limit", "1",
               "--out", str(out), "max_episode_steps=3", "agent_options.search.algorithm=greedy",
               "agent_options.search.prefer_stop=true", "agent_options.label=greedy"])
    assert rc == 0
    (record,) = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert record["agent"] == "greedy" and record["outcome"]["steps"] == 3
    trees = sorted((out / "trees").rglob("*.json.gz"))
    assert len(trees) == 3
    tree = load_tree(trees[0])
    assert tree.meta["search_config"]["algorithm"] == "greedy"
    assert tree.counters["stopped_by"] == "children_done"
    assert tree.decision_kind == "single"
    assert tree.counters["simulations"] == len(tree.root.edges) > 1
    assert "1 episode(s) run" in capsys.readouterr().out


def test_its_own_options_are_checked_like_any_other(greedy):
    assert build_agent("search", search={"algorithm": "greedy"}).algorithm.config.prefer_stop \
        is False
    with pytest.raises(OptionsError, match="search.c_puct: unknown option for algorithm "
                                           "'greedy'"):
        build_agent("search", search={"algorithm": "greedy", "c_puct": 2.0})
    with pytest.raises(OptionsError, match="search.prefer_stop: unknown option for algorithm "
                                           "'mcts'"):
        build_agent("mcts", search={"prefer_stop": True})
