"""`clew merge`: sharded runs merged equal the unsharded run; duplicates, gaps and conflicts."""

from __future__ import annotations

import json
import shutil

import pytest
from clew.cli.main import main
from clew.envs.base import Task
from clew.records import RunDir
from clew.runner.config import EvalConfig
from clew.runner.evaluate import evaluate
from clew.runner.shards import MergeError, merge_shards
from report_fixtures import record, write_run
from toyenv import register

register()


def no_wall(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k != "wall_s"}


@pytest.fixture(scope="module")
def toy_runs(tmp_path_factory):
    """The same random-agent evaluation unsharded and as shards 0/2, 1/2 (tasks[i::2])."""
    tmp = tmp_path_factory.mktemp("shards")
    tasks = [Task("toy-line", {"length": 2 + i % 3, "budget": 6 + i % 4}, seed=i, id=f"line-{i}")
             for i in range(7)]
    suite = tmp / "tasks.jsonl"
    suite.write_text("".join(t.to_json() + "\n" for t in tasks))

    def run(out, shard=None):
        cfg = EvalConfig(agent="random", agent_options={"seed": 3}, suite=str(suite),
                         out=str(tmp / out), repeats=2, concurrency=3, shard=shard)
        return evaluate(cfg, progress=False)[0].path

    return {"full": run("full"), "s0": run("s0", "0/2"), "s1": run("s1", "1/2"), "tmp": tmp,
            "tasks": tasks}


def test_merged_shards_equal_the_unsharded_run(toy_runs, tmp_path):
    merged, counts = merge_shards([toy_runs["s0"], toy_runs["s1"]], tmp_path / "merged")
    full = RunDir(toy_runs["full"]).episodes()
    got = merged.episodes()
    assert counts["episodes"] == len(full) == 14 and counts["duplicates"] == 0
    assert {r["key"]: no_wall(r) for r in got} == {r["key"]: no_wall(r) for r in full}
    # the episodes are varied (the comparison is not between identical trivial records)
    assert len({r["outcome"]["success"] for r in full}) == 2
    # suite order: task order, then repeat
    assert [r["key"] for r in got] == [f"line-{i}#{r}" for i in range(7) for r in range(2)]
    m_full = json.loads((toy_runs["full"] / "metrics.json").read_text())
    m_got = json.loads((merged.path / "metrics.json").read_text())
    assert {k: no_wall(v) for k, v in m_got["episodes"].items()} == \
        {k: no_wall(v) for k, v in m_full["episodes"].items()}
    for key in ("success", "steps", "return", "steps_success"):
        assert m_got["aggregate"]["mean"][key] == pytest.approx(m_full["aggregate"]["mean"][key])
    assert (merged.path / "summary.md").exists()
    cfg = merged.config()
    assert cfg["shard"] is None and [m["shard"] for m in cfg["merged_from"]] == ["0/2", "1/2"]


def test_identical_duplicates_are_kept_once(toy_runs, tmp_path):
    again = tmp_path / "s0-again"
    shutil.copytree(toy_runs["s0"], again)
    _, counts = merge_shards([toy_runs["s0"], again, toy_runs["s1"]], tmp_path / "m")
    assert counts["episodes"] == 14
    assert counts["duplicates"] == len(RunDir(toy_runs["s0"]).episodes())


def test_conflicting_duplicates_are_an_error(toy_runs, tmp_path):
    other = tmp_path / "s0-other"
    shutil.copytree(toy_runs["s0"], other)
    recs = RunDir(other).episodes()
    recs[1]["actions"] = recs[1]["actions"] + ["left"]
    (other / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(MergeError) as err:
        merge_shards([toy_runs["s0"], other, toy_runs["s1"]], tmp_path / "m")
    msg = str(err.value)
    assert recs[1]["key"] in msg and "actions" in msg and str(other) in msg
    assert not (tmp_path / "m").exists()  # nothing written on a refused merge


def test_missing_shard_is_an_error_unless_allowed(toy_runs, tmp_path):
    with pytest.raises(MergeError, match="1/2 missing"):
        merge_shards([toy_runs["s0"]], tmp_path / "m")
    _, counts = merge_shards([toy_runs["s0"]], tmp_path / "m", allow_missing=True)
    assert counts["episodes"] == len(RunDir(toy_runs["s0"]).episodes()) == 8


def test_shards_of_different_runs_are_refused(toy_runs, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(toy_runs["s1"], other)
    cfg = RunDir(other).config()
    cfg["agent_options"] = {"seed": 4}
    import yaml
    (other / "config.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(MergeError, match="agent_options"):
        merge_shards([toy_runs["s0"], other], tmp_path / "m")


def test_trees_and_errors_are_carried_over(tmp_path):
    a = write_run(tmp_path / "a", [record(0, success=True), record(2, success=False)],
                  shard="0/2")
    b = write_run(tmp_path / "b", [record(1, success=True)], shard="1/2")
    RunDir(a).write_tree("task-0#0", 0, {"schema": "x", "n": 1})
    RunDir(a).write_tree("task-0#0", 1, {"schema": "x", "n": 2})
    RunDir(b).write_tree("task-1#0", 0, {"schema": "x", "n": 3})
    RunDir(b).append_error({"key": "task-3#0", "error": "boom"})
    RunDir(b).append_error({"key": "task-2#0", "error": "finished in shard a"})
    merged, counts = merge_shards([a, b], tmp_path / "m")
    assert counts["trees"] == 3
    for run, key, step in ((a, "task-0#0", 0), (a, "task-0#0", 1), (b, "task-1#0", 0)):
        src = run / "trees" / key / f"{step}.json.gz"
        assert (merged.path / "trees" / key / f"{step}.json.gz").read_bytes() == src.read_bytes()
    errors = [json.loads(x) for x in merged.errors_file.read_text().splitlines()]
    assert [e["key"] for e in errors] == ["task-3#0"]
    # keys that do not resolve to a suite are ordered by task number
    assert [r["key"] for r in merged.episodes()] == ["task-0#0", "task-1#0", "task-2#0"]


def test_cli_merge(toy_runs, tmp_path, capsys):
    out = tmp_path / "m"
    assert main(["merge", str(toy_runs["s0"]), str(toy_runs["s1"]), "--out", str(out)]) == 0
    assert "14 episode(s)" in capsys.readouterr().out
    # the merged directory now holds a run: a second merge into it is refused
    assert main(["merge", str(toy_runs["s0"]), str(toy_runs["s1"]), "--out", str(out)]) == 2
    assert main(["merge", str(toy_runs["s0"]), "--out", str(tmp_path / "m2")]) == 2
    assert "missing" in capsys.readouterr().err

