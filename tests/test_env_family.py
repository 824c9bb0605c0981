"""Adding an env family from outside clew (docs/methods/envs.md#adding-an-env-family): its own
module (``toy_family.py``) with everything the built-in families have, and one registry line,
give its suite by name, episodes through `clew eval`'s evaluate(), its own metric and the metrics
that travel, a summary row, its difficulty levels in `clew report`, search with heuristic roles
and a reflection memory at the family's cut, and `clew diagnose` against its ground truth."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace

import pytest
from clew import metrics
from clew.envs import registry, suites
from clew.envs.base import Task
from clew.envs.suites import suite_builders
from clew.metrics.summary import summary_table
from clew.records import RunDir
from clew.reports.diagnose import diagnose_run
from clew.reports.report import write_report
from clew.runner.config import EvalConfig
from clew.runner.evaluate import evaluate
from clew.search.tree import read_trees
from toy_family import FAMILY


@pytest.fixture
def corridor(monkeypatch):
    """The user's registration, on copies of the registries so that it ends with the test."""
    monkeypatch.setattr(registry, "ENVS", dict(registry.ENVS))
    monkeypatch.setattr(registry, "REGISTERED", dict(registry.REGISTERED))
    monkeypatch.setattr(metrics, "METRICS", dict(metrics.METRICS))
    monkeypatch.setattr(suites, "_cache", dict(suites._cache))
    registry.register_family("toy_family:FAMILY")          # the one registry line


def walk(task: Task, actions: list[str]) -> tuple[set[int], int, int]:
    """Visited cells, moves and moves into a visited cell, counted from the actions alone."""
    pos, visited, moves, back = task.params["start"], {task.params["start"]}, 0, 0
    for a in actions:
        nxt = pos + (1 if a == "right" else -1)
        if 0 <= nxt < task.params["length"]:
            moves, back, pos = moves + 1, back + (nxt in visited), nxt
            visited.add(nxt)
    return visited, moves, back


def test_a_family_registered_from_outside_runs_end_to_end(corridor, tmp_path):
    assert "toy-corridor-v1" in suite_builders()
    tasks = suites.resolve("toy-corridor-v1:test")
    assert {t.params["length"] for t in tasks} == {6, 9} and len(tasks) == 6
    cfg = EvalConfig(agent="random", suite="toy-corridor-v1:test", out=str(tmp_path / "run"),
                     repeats=2)
    run, agg = evaluate(cfg, progress=False)

    records = RunDir(run.path).episodes()
    assert len(records) == len(tasks) * 2 and agg["episodes"] == len(records)
    for rec in records:
        task = Task.from_dict(rec["task"])
        m = rec["metrics"]
        assert "error" not in m, m
        visited, moves, back = walk(task, rec["actions"])
        assert m["coverage"] == pytest.approx(len(visited) / task.params["length"])
        assert m["redundant_steps"] == back and m["counted_steps"] == moves
        assert m["redundancy"] == pytest.approx(back / moves)
        assert m["agent_return"] == rec["outcome"]["grade"] and m["rmax"] == 1.0
        assert m["gap_total"] == pytest.approx(m["gap_exploration"] + m["gap_exploitation"])
        if rec["outcome"]["success"]:  # seen next door, one move away: exploitable in time
            assert m["gap_total"] == 0 and m["exploitable_at"] < len(rec["actions"])
        assert m["exit_distance"] == abs(task.params["exit"] - task.params["start"]
                                         - sum(1 if a == "right" else -1 for a in rec["actions"]))

    assert math.isfinite(agg["mean"]["coverage"]) and math.isfinite(agg["mean"]["gap_total"])
    row = summary_table([(run.path.name, agg)]).splitlines()
    assert "coverage" in row[0] and row[2].startswith("| run | random | heuristic | 12 |")
    assert json.loads((run.path / "metrics.json").read_text())["aggregate"]["episodes"] == 12

    rep = write_report([run.path], tmp_path / "report")
    levels = (rep.out / "tables" / "by_level.csv").read_text().splitlines()
    assert [line.split(",")[:2] for line in levels[1:]] == [["length", "6"], ["length", "9"]]


def test_search_memory_and_diagnose_use_the_familys_hooks(corridor, tmp_path):
    """R-MCTS with heuristic roles: its value is the family's ``progress`` plus noise, its memory
    retrieves at the family's ``memory_min_score``; ``clew diagnose`` measures it against the
    family's ``steps_to_goal``."""
    options = {"roles": "heuristic", "value": {"noise": 0.1}, "seed": 1,
               "search": {"n_simulations": 4, "branching_factor": 2}}
    cfg = EvalConfig(agent="rmcts", agent_options=options, suite="toy-corridor-v1:train",
                     out=str(tmp_path / "run"), concurrency=1)
    run, _ = evaluate(cfg, progress=False)
    records = RunDir(run.path).episodes()
    assert len(records) == 4 and all(r["memory"]["min_score"] == 0.5 for r in records)
    tree = read_trees(run.path, records[0]["key"])[0]
    exit_ = Task.from_dict(records[0]["task"]).params["exit"]
    valued = [n for n in tree.nodes[1:] if n.value is not None and not n.terminal]
    assert valued
    for node in valued:
        pos, length = map(int, re.match(r"cell (\d+) of (\d+)", node.obs).groups())
        assert node.value_record["info"]["truth"] == pytest.approx(1 - abs(pos - exit_) / length)
    doc = diagnose_run(run.path)
    assert doc["value"]["heuristic"]["all"]["n"] > 0
    assert doc["value"]["heuristic"]["all"]["mae"] < 0.5


def test_without_a_trace_the_travel_metrics_do_not_apply(corridor):
    entry = replace(FAMILY.envs["toy-corridor"], trace=None)
    registry.register_family(replace(FAMILY, envs={"toy-corridor": entry}))
    assert "toy-corridor" not in metrics.envs_with("coverage")
    assert [m.name for m in metrics.metrics_for("toy-corridor")] == ["exit_distance"]
    task = registry.generate("toy-corridor", {"length": 4}, 0)
    scored = metrics.score_episode(task, {"actions": ["left", "right"]})
    assert set(scored) == {"exit_distance"}
