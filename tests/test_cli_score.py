"""`clew score`: one JSON line per input line, bad lines reported by number, the rest scored."""

import json

from clew.cli.main import main
from clew.envs.suites import get_suite


def test_score_reports_bad_lines_and_scores_the_others(tmp_path, capsys):
    task = get_suite("gridmap-mini").split("test")[0]
    good = json.dumps({"task": task.to_dict(), "actions": ["up", "left", "down", "right"]})
    lines = [
        good,
        "{not json",
        json.dumps({"task": task.to_dict()}),                       # no actions
        json.dumps({"task": {"env": "nowhere", "params": {}}, "actions": []}),
        json.dumps({"task": task.to_dict(), "actions": "up"}),     # not a list
        "",
        good,
    ]
    f = tmp_path / "traj.jsonl"
    f.write_text("\n".join(lines) + "\n")
    rc = main(["score", str(f)])
    out, err = capsys.readouterr()
    results = [json.loads(x) for x in out.splitlines()]
    assert rc == 1
    assert [r["line"] for r in results] == [1, 2, 3, 4, 5, 7]
    for r in results:
        if r["line"] in (1, 7):
            assert "error" not in r
            assert len(r["labels"]) == 4
            assert r["exploration_error"] is None or 0 <= r["exploration_error"] <= 1
        else:
            assert "error" in r
    assert f"{f}:2: not valid JSON" in err
    assert f"{f}:3:" in err and "actions" in err
    assert f"{f}:4:" in err and "nowhere" in err
    assert f"{f}:5:" in err and "list of strings" in err
    assert results[0] == {**results[5], "line": 1}


def test_eval_rejects_unknown_agent_and_suite_before_work(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["eval", "--agent", "nobody", "--suite", "gridmap-mini:test",
                 "--out", str(out)]) == 2
    assert "unknown agent 'nobody'" in capsys.readouterr().err
    assert main(["eval", "--agent", "random", "--suite", "gridmap-mini:dev",
                 "--out", str(out)]) == 2
    assert "no split 'dev'" in capsys.readouterr().err
    assert not out.exists()


def test_eval_writes_a_run_directory_and_summary(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["eval", "--agent", "frontier", "--suite", "gridmap-mini:test",
                 "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "| frontier |" in stdout and "explore err" in stdout
    for name in ("config.yaml", "episodes.jsonl", "metrics.json", "summary.md"):
        assert (out / name).exists()
    metrics = json.loads((out / "metrics.json").read_text())
    n = len(get_suite("gridmap-mini").split("test"))
    assert metrics["aggregate"]["episodes"] == n
    assert metrics["aggregate"]["mean"]["success"] == 1.0
