"""Best-of-N and AB-MCTS with heuristic roles on a BrowserGym task in headless Chromium
(docs/methods/best-of-n.md, docs/methods/ab-mcts.md; the web family, docs/web.md)."""

from __future__ import annotations

import asyncio

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]
pytest.importorskip("browsergym.miniwob", reason="the web extra is not installed")

from clew.envs.browsergym import chromium
from clew.envs.suites import resolve
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent

if chromium.chromium_path() is None:
    pytest.skip("no chromium on PATH (make browser installs Debian's)", allow_module_level=True)


@pytest.mark.parametrize("algorithm", ["best-of-n", "ab-mcts"])
def test_heuristic_search_solves_click_test(algorithm):
    task = next(t for t in resolve("miniwob-v1:test") if t.id == "click-test-s0")
    trees = []
    rec = asyncio.run(run_episode(build_agent(algorithm, search={"n_simulations": 3}, seed=0),
                                  task, max_steps=3, on_tree=lambda t, d: trees.append(d)))
    assert rec["outcome"]["success"] is True and trees
    assert trees[0]["meta"]["search_config"]["algorithm"] == algorithm
    assert 1 <= trees[0]["counters"]["simulations"] <= 3
