"""The join, grading and statistics of benchmarks/value_ranking.py, with scripted value models
(docs/methods/exploratory-learning.md#learned-value)."""

import asyncio
import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def ranking(load_benchmark):
    return load_benchmark("value_ranking")


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_nodes_join_their_prompts_and_the_grades_rank_them(ranking, tmp_path):
    run = tmp_path / "run"
    _write(run / "diagnose" / "nodes.jsonl", [
        {"row": "value", "episode": "e#0", "t": 0, "node": n, "progress": p, "value": 0.5}
        for n, p in enumerate([0.1, 0.5, 0.9])] + [
        {"row": "policy", "episode": "e#0", "t": 0, "node": 0},
        {"row": "value", "episode": "e#0", "t": 1, "node": 0, "progress": None, "value": 0.2}])
    prompt = [{"role": "user", "content": "where am I"}]
    _write(tmp_path / "values.jsonl", [
        {"episode": "e#0", "t": 0, "node": n, "prompt": prompt} for n in (2, 0, 1, 7)] + [
        {"episode": "e#0", "t": 1, "node": 0, "prompt": prompt}])
    rows = ranking.joined(run, tmp_path / "values.jsonl")
    # node 7 has no diagnosis, (t 1, node 0) no ground truth: both left out, file order kept
    assert [r["progress"] for r in rows] == [0.9, 0.1, 0.5]
    # a scripted model answers one grade per request, in order: it ranks the three nodes right
    model = "fake:" + "|".join(f"Value estimate: ```{g}```" for g in ("0.8", "0.2", "0.4"))
    graded = asyncio.run(ranking.grade_all(model, rows, n_samples=1, seed=0))
    assert graded == pytest.approx([0.8, 0.2, 0.4])
    good = ranking.stats("m", graded, [r["progress"] for r in rows])
    assert good["spearman"] == pytest.approx(1.0) and good["nodes"] == 3
    assert good["mae"] == pytest.approx((0.1 + 0.1 + 0.1) / 3) and good["distinct"] == 3
    # the run's own constant value does not rank; an unreadable grade is counted, not zero
    flat = ranking.stats("run", [r["run_value"] for r in rows], [r["progress"] for r in rows])
    assert flat["distinct"] == 1 and flat["pearson"] is None
    partial = ranking.stats("m", [0.8, None, 0.4], [0.9, 0.1, 0.5])
    assert (partial["nodes"], partial["unknown"]) == (2, 1)


def test_trees_are_sampled_whole_and_ranked_one_by_one(ranking):
    rows = [{"tree": (f"e#{i % 4}", 0), "progress": i / 12} for i in range(12)]
    taken = ranking.sample_trees(rows, nodes=5, seed=0)
    trees = {r["tree"] for r in taken}
    assert len(taken) == 6 and len(trees) == 2          # whole trees of three, until five
    assert taken == ranking.sample_trees(rows, nodes=5, seed=0)
    # one tree ranked right, one upside down: right over all nodes, level within the trees
    progress = [0.1, 0.2, 0.3, 0.7, 0.8, 0.9]
    values = [0.1, 0.2, 0.3, 0.9, 0.8, 0.7]
    s = ranking.stats("m", values, progress, [("a", 0)] * 3 + [("b", 0)] * 3)
    assert s["spearman_within"] == pytest.approx(0.0) and s["trees"] == 2
    assert s["spearman"] > 0.7
