"""`clew demo --quick`: the whole loop (search -> data -> train -> evaluate) runs end to end."""

import json

import pytest
from clew.cli.demo import run_demo


@pytest.mark.slow
def test_quick_demo_runs_the_whole_loop(tmp_path, capsys):
    out = tmp_path / "demo"
    assert run_demo(out, quick=True) == 0
    text = capsys.readouterr().out
    r1 = out / "round-1"
    # every stage left its artefacts
    assert list(r1.glob("search/*/trees/*/*.json.gz")), "no search trees"
    report = json.loads((r1 / "data" / "export_report.json").read_text())
    assert report["selected"] >= 1
    for kind in ("el", "il"):
        assert (r1 / "models" / kind / "config.json").exists()
        assert (r1 / "eval" / f"{kind}-distilled" / "gridmap" / "episodes.jsonl").exists()
    # one table per family, each agent labelled heuristic or learned, a line on what to read
    for family in ("gridmap", "rooms", "oracle-query", "textminigrid"):
        assert f"## {family}" in text
    assert "| r1 el-distilled | el-distilled | learned |" in text
    assert "| mcts-heuristic | mcts-heuristic | heuristic |" in text
    assert "explore err" in text and "gap total" in text
    assert "charged to the 16-query budget" in text
    assert "Against random (success): mcts-heuristic" in text
