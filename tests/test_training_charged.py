"""EL / IL chats of searches with charged simulation (docs/methods/exploratory-learning.md#charged-simulation):
every query a search simulated was asked for real, so the real query sequence is the trajectory;
EL turns carry the assessment of the search state each query extended."""

from __future__ import annotations

import json
import re

import pytest
from clew.cli.main import main
from clew.envs.base import Task
from clew.envs.registry import register as register_env
from clew.envs.suites import get_suite
from clew.search.tree import Tree, save_tree
from clew.training.datasets import DataConfig, build_datasets, read_episodes
from clew.training.flatten import FlattenError, charged_turns, export_episode
from toyenv import QueryEnv

register_env("toy-query", "toyenv:QueryEnv")
TASK = Task("toy-query", {"values": [1, 5, 2, 9, 3, 7], "budget": 5}, id="q")


def charged(t: int, action: str, asked: list[int]) -> dict:
    left = 5 - len(asked)
    return {"t": t, "action": action, "valid": True, "reward": 0.0, "done": left == 0,
            "obs": f"asked {sorted(asked)}; {left} left", "raw": None,
            "info": {"charged_simulation": True}}


def searched_episode() -> tuple[dict[int, Tree], dict]:
    """Two searches. The first (recorded at step 3, when it ended) simulated q0, q1 and q1 -> q3,
    all charged, and committed q1 (paid already). The second simulated q2 (charged) and decided
    q5, which no simulation had asked: the runner executed it."""
    first = Tree.with_root("asked []; 5 left")
    q0 = first.new_edge(first.root, "q0", "q0")
    q1 = first.new_edge(first.root, "q1", "q1")
    first.new_node(first.root, q0, obs="asked [0]; 4 left").value = 0.1
    s1 = first.new_node(first.root, q1, obs="asked [1]; 4 left")
    s1.value = 0.55
    q3 = first.new_edge(s1, "q3", "q3")
    first.new_node(s1, q3, obs="asked [1, 3]; 3 left").value = 1.0
    first.traversals = [[q0.edge_id], [q1.edge_id], [q1.edge_id, q3.edge_id]]
    first.decision_kind, first.decision_edges = "single", [q1.edge_id]
    second = Tree.with_root("asked [0, 1, 3]; 2 left")
    second.root.value = 0.9
    q2 = second.new_edge(second.root, "q2", "q2")
    q5 = second.new_edge(second.root, "q5", "q5", raw="I pick q5.\nNext action: ```q5```")
    second.new_node(second.root, q2, obs="asked [0, 1, 2, 3]; 1 left").value = 0.9
    second.traversals = [[q2.edge_id]]
    second.decision_kind, second.decision_edges = "single", [q5.edge_id]
    steps = [charged(0, "q0", [0]), charged(1, "q1", [0, 1]), charged(2, "q3", [0, 1, 3]),
             charged(3, "q2", [0, 1, 2, 3]),
             {"t": 4, "action": "q5", "valid": True, "reward": 0.0, "done": True,
              "obs": "asked [0, 1, 2, 3, 5]; 0 left", "raw": "I pick q5.\nNext action: ```q5```",
              "info": {"search": {"tree_step": 4, "edge_id": q5.edge_id}}}]
    record = {"key": "q#0", "task": TASK.to_dict(), "actions": [s["action"] for s in steps],
              "steps": steps, "outcome": {"success": None, "grade": 1.0,
                                          "charged_simulation": 4}}
    return {3: first, 4: second}, record


def new_env() -> QueryEnv:
    return QueryEnv()


def test_el_turns_are_the_real_queries_with_the_assessment_of_the_state_each_extended():
    trees, record = searched_episode()
    turns = charged_turns(record, trees, lambda a: a.strip())
    assert [t.text for t in turns] == [
        "Next action: ```q0```",                 # a root edge: the root has no value
        "Next action: ```q1```",
        "Assessment: (progress estimate: 0.55)\n\nNext action: ```q3```",   # below q1
        "Assessment: (progress estimate: 0.90)\n\nNext action: ```q2```",   # the second root
        "Assessment: (progress estimate: 0.90)\n\nI pick q5.\nNext action: ```q5```",
    ]


def test_export_gives_el_and_il_chats_of_the_real_query_sequence():
    trees, record = searched_episode()
    out = export_episode(record, trees, new_env)
    assert out.el_skipped is None and out.il_skipped is None
    assert out.el_actions == 5 and len(out.el) == len(out.il) == 5
    targets = [s.messages[-1]["content"] for s in out.el]
    assert [re.findall(r"```(q\d)```", t)[0] for t in targets] == record["actions"]
    assert [s.messages[-1]["content"] for s in out.il][:2] == ["Next action: ```q0```",
                                                             "Next action: ```q1```"]
    assert not any("Assessment" in s.messages[-1]["content"] for s in out.il)
    # the replay asked the queries for real: the last user turn shows four of them answered
    assert "asked [0, 1, 2, 3]; 1 left" in out.el[-1].messages[-2]["content"]


def test_a_charged_query_no_traversal_asked_is_skipped_with_its_reason():
    trees, record = searched_episode()
    record["steps"][2]["action"] = record["actions"][2] = "q4"
    with pytest.raises(FlattenError, match="charged query 'q4' is on no traversal"):
        charged_turns(record, trees, lambda a: a.strip())
    out = export_episode(record, trees, new_env)
    assert out.el == [] and "q4" in out.el_skipped
    assert len(out.il) == 5          # IL needs no tree


def test_charged_query_after_the_last_tree_is_an_error():
    trees, record = searched_episode()
    del trees[4]
    with pytest.raises(FlattenError, match="step 3: a charged query after the last search tree"):
        charged_turns(record, trees, lambda a: a.strip())


def test_clew_data_exports_a_tree_search_run_with_every_query_in_order(tmp_path):
    """A real search on a charged env (TreeSearch), through ``clew eval`` and ``clew data``:
    every selected episode gives EL and IL chats whose targets are its executed queries."""
    task = next(t for t in get_suite("exploration-v1").split("test") if t.env == "treesearch")
    suite = tmp_path / "tasks.jsonl"
    suite.write_text(json.dumps(task.to_dict()) + "\n")
    run = tmp_path / "run"
    assert main(["eval", "--config", "mcts-rollout", "--suite", str(suite), "--out", str(run),
                 "--repeats", "2", "max_episode_steps=12",
                 "agent_options.search.n_simulations=4"]) == 0
    records = read_episodes(run)
    assert all(r["outcome"]["charged_simulation"] > 0 for r in records)
    ds, report = build_datasets(DataConfig(runs=[str(run)], success_only=False,
                                           el_max_actions=None, subsets=["el", "il_all"]))
    assert report["el_episodes"] == report["il_episodes"] == 2
    assert report["el_skipped"] == report["il_skipped"] == {}
    for record in records:
        key = record["key"]
        for subset in ("el", "il_all"):
            rows = [r for r in ds[subset] if r["episode"] == key]
            issued = [re.findall(r"```(.*?)```", r["messages"][-1]["content"])[-1] for r in rows]
            assert issued == record["actions"], subset


def test_a_hand_written_run_directory_round_trips(tmp_path):
    trees, record = searched_episode()
    run = tmp_path / "run"
    for k, tree in trees.items():
        save_tree(run / "trees" / record["key"] / f"{k}.json.gz", tree)
    (run / "episodes.jsonl").write_text(json.dumps(record) + "\n")
    report = build_datasets(DataConfig(runs=[str(run)], subsets=["el", "il_all"]))[1]
    assert report["samples"] == {"el": 5, "il_all": 5}
    assert "charged simulation" not in json.dumps(report)
