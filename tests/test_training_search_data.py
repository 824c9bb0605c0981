"""Search -> EL/IL data on real environments (docs/methods/exploratory-learning.md#teacher-forcing): heuristic MCTS on a few tasks of
``exploration-v1:train``; every exported EL chat replays through the distilled agent and the
runner to the same prompts (Appendix C 8)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from clew.agents.distilled import DistilledAgent
from clew.agents.lm.fake import FakeLM
from clew.envs.base import Task
from clew.envs.registry import make_for
from clew.envs.suites import resolve
from clew.records import RunDir
from clew.runner.episodes import run_episode, run_suite
from clew.runner.registry import build_agent
from clew.search.tree import read_trees
from clew.training.datasets import DataConfig, build_datasets, is_selected, read_episodes
from clew.training.flatten import el_turns, flatten_episode, teacher_force

MCTS = {"roles": "heuristic", "search": {"branching_factor": 4, "n_simulations": 8},
        "policy": {"prior": "sampled", "n_samples": 20}, "value": {"noise": 0.3, "cap": 0.9}}


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    tasks, seen = [], Counter()
    for task in resolve("exploration-v1:train"):
        if task.env in ("gridmap", "textminigrid", "treesearch") and seen[task.env] < 2:
            tasks.append(task)
            seen[task.env] += 1
    path = tmp_path_factory.mktemp("search") / "run"
    run = RunDir(path)
    run.open({"agent": "mcts"}, resume=False)
    asyncio.run(run_suite(lambda: build_agent("mcts", **MCTS), tasks, run, max_steps=30,
                          progress=False))
    return path


def test_search_runs_export_without_invalid_targets(searched):
    ds, report = build_datasets(DataConfig(runs=[str(searched)], el_max_actions=60))
    assert report["selected"] >= 2 and report["el_episodes"] >= 1
    assert report["counts"].get("el_invalid_target", 0) == 0
    assert report["counts"].get("il_invalid_target", 0) == 0
    for reason in report["el_skipped"]:  # only length / budget / charged reasons are acceptable
        assert ("too long" in reason or "ended the episode" in reason
                or "charged simulation" in reason), reason
    assert ds["el"].num_rows > 0 and ds["il_all"].num_rows > 0
    # IL: exactly the executed actions of the selected episodes, one sample per action; the
    # oracle-query episodes (charged simulation) included: their executed steps are the
    # search's real queries (docs/methods/exploratory-learning.md#charged-simulation)
    records = read_episodes(searched)
    assert any(r["outcome"]["charged_simulation"] for r in records if r["task"]["env"] ==
               "treesearch")
    selected = [r for r in records if is_selected(r)]
    assert ds["il_all"].num_rows == sum(len(r["actions"]) for r in selected)


def test_exported_chats_replay_through_the_runner(searched):
    checked = set()
    for record in read_episodes(searched):
        if not is_selected(record) or record["outcome"]["charged_simulation"]:
            continue
        task = Task.from_dict(record["task"])
        env = make_for(task)
        items = flatten_episode(record, read_trees(searched, record["key"]),
                                backtrack=env.flags.supports_backtrack)
        try:
            chat = teacher_force(env, task, el_turns(items), root=items[0].node,
                                 min_grade=record["outcome"]["grade"])
        except ValueError:
            continue  # longer than the env's own step budget
        script = [m["content"] for m in chat.messages if m["role"] == "assistant"]
        lm = FakeLM(script)
        agent = DistilledAgent(lm, max_history_pairs=None)
        rec = asyncio.run(run_episode(agent, task, max_steps=len(script)))
        assert lm.calls[-1].messages == chat.messages[:-1]
        assert rec["outcome"]["steps"] == len(script)
        assert sum("backtrack" in a for a in rec["actions"]) == chat.kinds.count("back")
        checked.add(task.env)
    assert len(checked) >= 2, checked
