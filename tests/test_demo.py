"""`clew demo --quick`: the whole loop (search -> data -> train -> evaluate) runs end to end."""

import json

import pytest
from clew.scripts.demo import run_demo


@pytest.mark.slow
def test_quick_demo_runs_the_whole_loop(tmp_path, capsys):
    out = tmp_path / "demo"
    assert run_demo(out, quick=True) == 0
    text = capsys.readouterr().out
    # every stage left its artefacts
    assert list((out / "search-train" / "trees").glob("*/*.json.gz")), "no search trees"
    report = json.loads((out / "data" / "export_report.json").read_text())
    assert report["selected"] >= 1
    for kind in ("el", "il"):
        assert (out / "models" / kind / "config.json").exists()
        assert (out / "eval" / f"{kind}-distilled" / "episodes.jsonl").exists()
    # one table per family of the evaluated tasks, each agent labelled heuristic or learned
    assert "## gridmap" in text and "## rooms" in text
    assert "| el-distilled | el-distilled | learned |" in text
    assert "| mcts-heuristic | mcts-heuristic | heuristic |" in text
    assert "explore err" in text and "gap total" in text
