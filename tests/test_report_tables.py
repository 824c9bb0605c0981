"""`clew report`: tables and CSV against hand-computed values from the records, plots written."""

from __future__ import annotations

import base64
import csv
import io
import json
import math
import re
import statistics

import numpy as np
import pytest
from clew.cli.main import main
from clew.reports.plots import fit_line
from clew.reports.report import Prices, ReportError, write_report
from clew.search.tree import save_tree
from hypothesis import given, settings
from hypothesis import strategies as st
from report_fixtures import record, write_run


def usage(prompt: int, completion: int, calls: int, role: str = "policy") -> dict:
    return {role: {"prompt_tokens": prompt, "completion_tokens": completion, "calls": calls}}


def dag(level: str) -> dict:
    return {"presets": {"dag_level": level}}  # a level gridmap declares (EnvEntry.levels)


# run "search": 4 episodes, one with an undefined exploration error
SEARCH = [
    record(0, success=True, agent="rmcts", env="gridmap", params=dag("easy"), simulated=20,
           metrics={"exploration_error": 0.2, "exploitation_error": 0.1, "gap_total": 0.4,
                    "gap_exploration": 0.3, "gap_exploitation": 0.1,
                    "share_exploration": 0.75, "share_exploitation": 0.25},
           usage={**usage(100, 20, 2), **usage(30, 10, 1, "value")}, wall=2.0),
    record(1, success=False, agent="rmcts", env="gridmap", params=dag("hard"), simulated=40,
           metrics={"exploration_error": 0.4, "exploitation_error": 0.3, "gap_total": 0.6,
                    "gap_exploration": 0.5, "gap_exploitation": 0.1},
           usage={**usage(100, 20, 2), **usage(30, 10, 1, "value")}, wall=4.0),
    record(2, success=True, agent="rmcts", env="gridmap", params=dag("hard"), simulated=30,
           metrics={"exploration_error": None, "exploitation_error": 0.2, "gap_total": 0.2,
                    "gap_exploration": 0.1, "gap_exploitation": 0.1},
           usage={**usage(100, 20, 2), **usage(30, 10, 1, "value")}, wall=3.0),
    record(3, success=True, agent="rmcts", env="gridmap", params=dag("easy"), simulated=10,
           metrics={"exploration_error": 0.3, "exploitation_error": 0.2, "gap_total": 0.0,
                    "gap_exploration": 0.0, "gap_exploitation": 0.0},
           usage={**usage(100, 20, 2), **usage(30, 10, 1, "value")}, wall=1.0),
]
# run "react": cheaper, worse
REACT = [
    record(i, success=(i == 0), agent="react", env="gridmap", params=dag(lv), simulated=0,
           metrics={"exploration_error": 0.8, "exploitation_error": 0.5},
           usage=usage(50, 10, 1), wall=0.5)
    for i, lv in enumerate(["easy", "hard", "hard", "easy"])
]


@pytest.fixture
def runs(tmp_path):
    search = write_run(tmp_path / "search", SEARCH, agent="rmcts",
                       agent_options={"model": "fake", "search": {"n_simulations": 16}})
    react = write_run(tmp_path / "react", REACT, agent="react")
    return search, react


@pytest.fixture(scope="module")
def rep(tmp_path_factory):
    """One report on both runs, ReAct given: shared because plotting takes a second."""
    tmp = tmp_path_factory.mktemp("report")
    search = write_run(tmp / "search", SEARCH, agent="rmcts",
                       agent_options={"model": "fake", "search": {"n_simulations": 16}})
    react = write_run(tmp / "react", REACT, agent="react")
    return write_report([search, react], tmp / "out", react=react)


def read_csv(path):
    return list(csv.DictReader(io.StringIO(path.read_text())))


def test_summary_csv_matches_the_records(rep):
    rows = {r["run"]: r for r in read_csv(rep.out / "tables" / "summary.csv")}
    s = rows["search"]
    succ = [1, 0, 1, 1]
    assert float(s["success"]) == pytest.approx(0.75)
    assert float(s["success se"]) == pytest.approx(statistics.stdev(succ) / 2)
    assert float(s["explore err"]) == pytest.approx(0.3)  # the undefined one left out
    assert int(s["explore err n"]) == 3
    assert float(s["exploit err"]) == pytest.approx(0.2)
    assert float(s["tokens/task"]) == pytest.approx(160)  # 100+20 policy + 30+10 value
    assert float(s["tokens vs ReAct"]) == pytest.approx(160 / 60)
    assert float(rows["react"]["tokens vs ReAct"]) == pytest.approx(1.0)
    assert float(s["LM calls/task"]) == pytest.approx(3)
    assert float(s["simulated/task"]) == pytest.approx(25)
    assert float(s["executed/task"]) == pytest.approx(5)
    assert float(s["wall s/task"]) == pytest.approx(2.5)
    assert s["agent"] == "rmcts" and s["episodes"] == "4"


def test_gap_table_and_shares(rep):
    rows = {r["run"]: r for r in read_csv(rep.out / "tables" / "gaps.csv")}
    g = rows["search"]
    assert float(g["gap total"]) == pytest.approx(0.3)
    assert float(g["gap exploration"]) == pytest.approx(0.225)
    assert float(g["gap exploitation"]) == pytest.approx(0.075)
    assert float(g["exploration share"]) == pytest.approx(0.225 / 0.3)
    assert float(g["exploration share"]) + float(g["exploitation share"]) == pytest.approx(1.0)
    # one pair of share columns, named for what they are (not four alike)
    assert [h for h in g if "share" in h] == ["exploration share", "exploitation share"]
    assert rows["react"]["gap total"] == ""  # react has no gap metric: undefined, not 0


def test_success_by_level(rep):
    rows = read_csv(rep.out / "tables" / "by_level.csv")
    assert [(r["parameter"], r["level"]) for r in rows] == [("presets.dag_level", "easy"),
                                                           ("presets.dag_level", "hard")]
    by = {r["level"]: r for r in rows}
    assert float(by["easy"]["search success"]) == 1.0
    assert float(by["hard"]["search success"]) == 0.5
    assert float(by["easy"]["react success"]) == 0.5
    assert float(by["hard"]["react success"]) == 0.0
    assert int(by["hard"]["search success n"]) == 2


def test_usage_per_role_and_compute(rep):
    roles = {(r["run"], r["role"]): r for r in read_csv(rep.out / "tables" / "usage_by_role.csv")}
    assert float(roles[("search", "value")]["calls"]) == 1
    assert float(roles[("search", "policy")]["prompt tokens"]) == 100
    assert ("react", "value") not in roles
    comp = {r["run"]: r for r in read_csv(rep.out / "tables" / "compute.csv")}
    assert float(comp["search"]["nodes/tree"]) == 16 and comp["search"]["from"] == "config"
    assert comp["react"]["nodes/tree"] == ""


def test_nodes_per_tree_measured_from_saved_trees(tmp_path):
    run = write_run(tmp_path / "bfs", [record(0, success=True)], agent="bfs")
    for step, n in ((0, 3), (1, 5)):
        nodes = [{"node_id": i, "parent": None if i == 0 else 0, "incoming": None,
                  "depth": 0, "obs": None, "edges": [], "expanded": False, "ns": 0,
                  "value": None, "terminal": False} for i in range(n)]
        save_tree(run / "trees" / "task-0#0" / f"{step}.json.gz",
                  {"schema": "clew.tree/1", "root": 0, "nodes": nodes, "edges": []})
    rep = write_report([run], tmp_path / "out")
    comp = read_csv(rep.out / "tables" / "compute.csv")[0]
    assert float(comp["nodes/tree"]) == 4.0 and comp["from"] == "trees"


def test_plots_written_and_fit_matches_numpy(runs, tmp_path):
    search, react = runs
    third = write_run(tmp_path / "mid", [
        record(i, success=s, metrics={"exploration_error": e})
        for i, (s, e) in enumerate([(True, 0.5), (False, 0.7)])])
    # three runs: points, but no line (R² of 2-3 points says nothing)
    rep = write_report([search, react, third], tmp_path / "three")
    assert "exploration_error" not in json.loads((rep.out / "report.json").read_text())["fits"]
    caption = next(f.caption for f in rep.figures if f.key == "success_vs_exploration_error")
    assert "No fitted line: a line needs at least 4 runs" in caption
    fourth = write_run(tmp_path / "good", [
        record(i, success=s, metrics={"exploration_error": e})
        for i, (s, e) in enumerate([(True, 0.1), (True, 0.1), (True, 0.1), (False, 0.1)])])
    rep = write_report([search, react, third, fourth], tmp_path / "out")
    names = {p.name for p in (rep.out / "plots").glob("*.png")}
    assert {"success_vs_exploration_error.png", "scaling_nodes.png", "success_vs_compute.png",
            "gap_decomposition.png"} <= names
    for p in (rep.out / "plots").glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    xs = np.log10([0.3, 0.8, 0.6, 0.1])
    ys = np.array([0.75, 0.25, 0.5, 0.75])
    slope, intercept = np.polyfit(xs, ys, 1)
    fit = json.loads((rep.out / "report.json").read_text())["fits"]["exploration_error"]
    assert fit["slope"] == pytest.approx(slope) and fit["intercept"] == pytest.approx(intercept)
    assert fit["r2"] == pytest.approx(np.corrcoef(xs, ys)[0, 1] ** 2)
    assert fit["n"] == 4


def test_html_is_self_contained_with_tables_and_plots(rep):
    page = (rep.out / "report.html").read_text()
    assert "<link" not in page and "src='http" not in page and 'src="http' not in page
    imgs = re.findall(r"src='data:image/png;base64,([^']+)'", page)
    assert len(imgs) == len(rep.figures) >= 3
    assert base64.b64decode(imgs[0]) == rep.figures[0].path.read_bytes()
    for key in rep.tables:
        assert f"id='table-{key}'" in page
    md = (rep.out / "report.md").read_text()
    assert "| search |" in md and "plots/gap_decomposition.png" in md


def test_single_run_defaults_to_its_directory_and_react_joins(runs, tmp_path):
    search, react = runs
    rep = write_report([search], react=react)
    assert rep.out == search and (search / "report.md").exists()
    assert [r["run"] for r in read_csv(search / "tables" / "summary.csv")] == ["search", "react"]


def test_different_suites_warn(tmp_path):
    a = write_run(tmp_path / "a", [record(0, success=True)], suite="s1:test")
    b = write_run(tmp_path / "b", [record(0, success=False)], suite="s2:test")
    rep = write_report([a, b], tmp_path / "out")
    assert "different suites" in rep.warning
    assert "different suites" in (rep.out / "report.md").read_text()


def test_not_a_run_directory_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="not a run directory"):
        write_report([tmp_path / "empty"], tmp_path / "out")
    assert main(["report", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2


def test_cli_report(runs, tmp_path, capsys):
    search, react = runs
    assert main(["report", str(search), str(react), "--out", str(tmp_path / "r"),
                 "--react", str(react)]) == 0
    out = capsys.readouterr().out
    assert "| search |" in out and (tmp_path / "r" / "report.html").exists()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-5, 5), st.floats(-5, 5)), min_size=3, max_size=12))
def test_fit_line_agrees_with_numpy(pairs):
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    fit = fit_line(xs, ys)
    if np.var(xs) < 1e-6 or np.var(ys) < 1e-6:
        return  # degenerate: no slope or no R² to compare
    slope, intercept = np.polyfit(xs, ys, 1)
    assert fit is not None
    assert fit.slope == pytest.approx(slope, abs=1e-6, rel=1e-6)
    assert fit.intercept == pytest.approx(intercept, abs=1e-6, rel=1e-6)
    assert fit.r2 == pytest.approx(np.corrcoef(xs, ys)[0, 1] ** 2, abs=1e-6)


def test_fit_line_degenerate_cases():
    assert fit_line([1.0], [1.0]) is None
    assert fit_line([2.0, 2.0, 2.0], [0.1, 0.5, 0.9]) is None
    flat = fit_line([1.0, 2.0, 3.0], [0.5, 0.5, 0.5])
    assert flat.slope == 0 and math.isnan(flat.r2)


def test_levels_one_dict_deep_and_normalized_reward(tmp_path):
    recs = [record(i, success=s, env="rooms", metrics={"normalized_reward": nr},
                   params={"layout": {"size": size, "doors": [1]}, "seed_x": i})
            for i, (s, size, nr) in enumerate([(True, 4, 1.0), (False, 7, 0.5), (True, 7, 0.7)])]
    rep = write_report([write_run(tmp_path / "rooms", recs)], tmp_path / "out")
    rows = read_csv(rep.out / "tables" / "by_level.csv")
    assert [(r["parameter"], r["level"], float(r["rooms success"])) for r in rows] == [
        ("layout.size", "4", 1.0), ("layout.size", "7", 0.5)]
    summary = read_csv(rep.out / "tables" / "summary.csv")[0]
    assert float(summary["norm. best reward"]) == pytest.approx(2.2 / 3)
    assert list(summary).count("norm. best reward") == 1


def test_levels_are_the_ones_each_family_declares(tmp_path):
    """A mixed suite: each record's own family says which parameters are levels; a parameter
    that only looks like a level ("level", "difficulty") is not one unless declared."""
    recs = [record(i, success=i % 2 == 0, env="gridmap",
                   params={**dag(("easy", "hard")[i % 2]), "level": i, "difficulty": i})
            for i in range(4)]
    recs += [record(4 + i, success=i == 0, env="textminigrid",
                    params={"difficulty": ("easy", "hard")[i], "rooms": 4, "presets": i})
             for i in range(2)]
    rep = write_report([write_run(tmp_path / "mixed", recs)], tmp_path / "out")
    rows = read_csv(rep.out / "tables" / "by_level.csv")
    assert [(r["parameter"], r["level"], float(r["mixed success"])) for r in rows] == [
        ("presets.dag_level", "easy", 1.0), ("presets.dag_level", "hard", 0.0),
        ("difficulty", "easy", 1.0), ("difficulty", "hard", 0.0)]


# --- compute and cost (docs/methods/recording.md#cost) -----------------------------------------
def costed(i: int, success: bool, prompt: int, completion: int, compute: dict) -> dict:
    return record(i, success=success, usage=usage(prompt, completion, 2)) | {
        "compute": {"policy": compute}}


def test_cost_table_from_prices_tokens_and_gpu_seconds(tmp_path):
    # a run on a GPU the backend knew: GPU-seconds recorded; costs differ per episode
    gpu = write_run(tmp_path / "gpu", [
        costed(i, s, p, 100, {"engine_s": 2.0, "busy_s": 1.0 + i, "gpu_s": 1.0 + i,
                              "cached_tokens": p // 4})
        for i, (s, p) in enumerate([(True, 1000), (True, 2000), (False, 3000), (False, 4000)])])
    # a run against a server: no GPU count, so --gpus turns busy seconds into GPU-seconds
    server = write_run(tmp_path / "server", [
        costed(0, True, 3000, 0, {"engine_s": 5.0, "busy_s": 4.0}),
        costed(1, False, 3000, 0, {"engine_s": 5.0, "busy_s": 4.0})])
    prices = Prices(prompt=1.0, completion=2.0, gpu_hour=3.6, gpus=2)
    rep = write_report([gpu, server], tmp_path / "out", prices=prices)
    rows = {r["run"]: r for r in read_csv(rep.out / "tables" / "cost.csv")}
    costs = np.array([p / 1e6 + 100 * 2 / 1e6 + (1.0 + i) / 3600 * 3.6
                      for i, p in enumerate([1000, 2000, 3000, 4000])])
    wins = np.array([1.0, 1.0, 0.0, 0.0])
    g = rows["gpu"]
    assert float(g["cost/ep"]) == pytest.approx(costs.mean())
    assert float(g["cost/ep se"]) == pytest.approx(costs.std(ddof=1) / 2)
    r = costs.sum() / wins.sum()
    assert float(g["cost/success"]) == pytest.approx(r)
    # the delta method: var(mean c - r mean s) / mean(s)^2, from numpy's variances
    cov = np.cov(costs, wins)
    var = (cov[0, 0] - 2 * r * cov[0, 1] + r * r * cov[1, 1]) / len(costs)
    assert float(g["cost/success se"]) == pytest.approx(math.sqrt(var) / wins.mean())
    assert float(g["GPU s/ep"]) == pytest.approx(2.5)
    assert float(g["engine s/ep"]) == pytest.approx(2.0)
    assert float(g["cache hit share"]) == pytest.approx(0.25)
    assert float(g["tokens/success"]) == pytest.approx((10000 + 400) / 2)
    s = rows["server"]
    assert float(s["GPU s/ep"]) == pytest.approx(8.0)        # 4 busy seconds x 2 GPUs
    assert float(s["cost/ep"]) == pytest.approx(3000 / 1e6 + 8.0 / 3600 * 3.6)
    assert float(s["cost/success"]) == pytest.approx(2 * float(s["cost/ep"]))
    assert s["cache hit share"] == ""                          # the server did not tell
    assert "3.6 per GPU-hour (2 GPU(s) where a run did not know)" in rep.tables["cost"].note
    # without --gpus a server's GPU time is unknown, and so is a cost per GPU-hour
    rep = write_report([server], tmp_path / "out2", prices=Prices(gpu_hour=3.6))
    row = read_csv(rep.out / "tables" / "cost.csv")[0]
    assert row["GPU s/ep"] == "" and row["cost/ep"] == ""
    # without prices: compute only, and the compute plot is against tokens
    rep = write_report([gpu, server], tmp_path / "out3")
    assert "cost/ep" not in rep.tables["cost"].header
    assert next(f.title for f in rep.figures if f.key == "success_vs_compute") == \
        "Success vs tokens per episode"


def test_cli_report_prices(runs, tmp_path, capsys):
    search, _ = runs
    assert main(["report", str(search), "--out", str(tmp_path / "r"), "--price-tokens", "0.5",
                 "--price-completion", "1.5"]) == 0
    out = capsys.readouterr().out
    assert "### Compute and cost" in out
    assert "0.5 per million prompt tokens, 1.5 per million completion tokens" in out
    assert main(["report", str(search), "--out", str(tmp_path / "r"),
                 "--price-gpu-hour", "-1"]) == 2
    assert "price gpu_hour: must be a number >= 0" in capsys.readouterr().err
