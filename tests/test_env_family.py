"""Adding an env family from outside clew: its own module (``toy_family.py``) and one registry
call give episodes through `clew eval`'s evaluate(), the metrics that travel, a summary row and
the family's difficulty levels in `clew report` (issue 10 item 6)."""

from __future__ import annotations

import json
import math

import pytest
from clew import metrics
from clew.envs import registry
from clew.envs.base import Task
from clew.metrics.summary import summary_table
from clew.records import RunDir
from clew.reports.report import write_report
from clew.runner.config import EvalConfig
from clew.runner.evaluate import evaluate


@pytest.fixture
def corridor(monkeypatch):
    """The user's registration, on copies of the registries so that it ends with the test."""
    monkeypatch.setattr(registry, "ENVS", dict(registry.ENVS))
    monkeypatch.setattr(metrics, "METRICS", dict(metrics.METRICS))
    registry.register("toy-corridor", "toy_family:CorridorEnv", "toy_family:generate_task",
                      trace="toy_family:trace", levels=("length",))
    metrics.register_metric("exit_distance", {"toy-corridor"}, "toy_family:distance_metric",
                            keys=("exit_distance",))  # the family's own metric: one line


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
    tasks = [registry.generate("toy-corridor", {"length": n}, seed) for n in (6, 9)
             for seed in range(3)]
    suite = tmp_path / "corridor.jsonl"
    suite.write_text("".join(t.to_json() + "\n" for t in tasks))
    cfg = EvalConfig(agent="random", suite=str(suite), out=str(tmp_path / "run"), repeats=2)
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


def test_without_a_trace_the_travel_metrics_do_not_apply(corridor):
    registry.register("toy-corridor", "toy_family:CorridorEnv", "toy_family:generate_task")
    assert "toy-corridor" not in metrics.envs_with("coverage")
    assert [m.name for m in metrics.metrics_for("toy-corridor")] == ["exit_distance"]
    task = registry.generate("toy-corridor", {"length": 4}, 0)
    scored = metrics.score_episode(task, {"actions": ["left", "right"]})
    assert set(scored) == {"exit_distance"}
