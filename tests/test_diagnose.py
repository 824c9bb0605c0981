"""``clew diagnose``: the search roles against ground truth (docs/methods/diagnose.md).

With heuristic roles the answers are known: the value is ground-truth progress plus Gaussian
noise of a configured size, so the calibration numbers must recover that size; a policy that
samples with oracle-weighted priors must put more mass on optimal actions than a uniform one.
"""

from __future__ import annotations

import gzip
import json
import math

import pytest
from clew.cli.main import main
from clew.reports.diagnose import diagnose_run, families_with_truth, load, spearman, tobit_noise
from clew.reports.report import write_report
from clew.runner.config import EvalConfig
from clew.runner.evaluate import evaluate


def _run(tmp_path, name, options, agent="mcts-heuristic", limit=3, max_steps=30, suite=None):
    cfg = EvalConfig(agent=agent, agent_options=options, suite=suite or "gridmap-v1:test",
                     limit=limit, out=str(tmp_path / name), max_steps=max_steps, concurrency=2)
    run, _ = evaluate(cfg, progress=False)
    return run.path


@pytest.mark.parametrize("noise", [0.1, 0.3])
def test_heuristic_value_noise_is_recovered(tmp_path, noise):
    path = _run(tmp_path, f"n{noise}", {"value": {"noise": noise}, "seed": 1})
    doc = diagnose_run(path)
    v = doc["value"]["heuristic"]["all"]
    assert doc["configured"]["noise"] == noise and doc["skipped"] == {}
    assert v["n"] > 300 and v["unknown"] == 0
    assert abs(v["noise_fit"] - noise) < 0.04, v
    assert abs(v["bias_fit"]) < 0.04
    # clipping at the scale's ends pulls the plain RMSE below the noise; the fit is not fooled
    assert v["rmse"] < noise + 0.02
    # per depth too, each bucket with enough nodes
    for depth, s in doc["value"]["heuristic"]["by_depth"].items():
        if s["n"] >= 100:
            assert abs(s["noise_fit"] - noise) < 0.08, (depth, s)


def test_noise_is_recovered_on_textminigrid_too(tmp_path):
    # the truth there is the BabyAI bot's plan, not a map distance: another oracle, same answer
    doc = diagnose_run(_run(tmp_path, "t", {"value": {"noise": 0.2}}, limit=2, max_steps=20,
                            suite="textminigrid-v1:test"))
    v = doc["value"]["heuristic"]["all"]
    assert doc["families"] == ["textminigrid"] and doc["skipped"] == {} and v["n"] > 100
    assert abs(v["noise_fit"] - 0.2) < 0.04, v
    assert doc["policy"]["all"]["n"] > 50


def test_less_noise_ranks_states_better(tmp_path):
    rho = {}
    for noise in (0.05, 0.5):
        doc = diagnose_run(_run(tmp_path, f"n{noise}", {"value": {"noise": noise}}))
        rho[noise] = doc["value"]["heuristic"]["all"]["spearman"]
    assert rho[0.05] > 0.85 > rho[0.5]


def test_oracle_prior_puts_mass_on_optimal_actions(tmp_path):
    mass = {}
    for prior in ("uniform", "oracle"):
        doc = diagnose_run(_run(tmp_path, prior, {"policy": {"prior": prior}}, limit=2))
        p = doc["policy"]["all"]
        assert p["n"] > 50 and p["none_share"] == 0.0
        mass[prior] = (p["optimal_prior_mass"], p["chance_mass"], p["recall_at_1"])
    uniform, oracle = mass["uniform"], mass["oracle"]
    # a uniform prior over the legal actions is chance level, by construction
    assert uniform[0] == pytest.approx(uniform[1], abs=0.02)
    assert oracle[0] > oracle[1] + 0.2 and oracle[2] > uniform[2] + 0.2


def test_search_effect_counts_add_up(tmp_path):
    doc = diagnose_run(_run(tmp_path, "s", {"value": {"noise": 0.3}}, limit=2))
    s = doc["search"]
    assert s["n"] == doc["trees"] > 0
    assert s["search_better"] + s["policy_better"] + s["equal"] == s["differs"] > 0
    doc_path = tmp_path / "s" / "diagnose" / "nodes.jsonl"
    rows = [json.loads(x) for x in doc_path.read_text().splitlines()]
    assert {r["row"] for r in rows} == {"value", "policy", "search"}
    assert sum(r["row"] == "search" and r["differs"] for r in rows) == s["differs"]
    assert doc_path.parent.joinpath("reliability.png").exists()
    assert load(tmp_path / "s")["search"] == s


def test_a_tree_that_replay_contradicts_is_skipped_not_trusted(tmp_path):
    path = _run(tmp_path, "m", {}, limit=1, max_steps=3)
    files = sorted((path / "trees").glob("*/*.json.gz"))
    data = json.loads(gzip.decompress(files[0].read_bytes()))
    child = next(n for n in data["nodes"] if n["parent"] is not None and n["obs"])
    child["obs"] = "something the env never said"
    files[0].write_bytes(gzip.compress(json.dumps(data).encode()))
    doc = diagnose_run(path)
    assert doc["skipped"] == {"obs_mismatch": 1}
    assert doc["trees"] == len(files)


def test_an_env_without_ground_truth_is_undefined_not_zero(tmp_path, capsys):
    path = _run(tmp_path, "h", {}, suite="rooms-v1:test", limit=1, max_steps=3)
    doc = diagnose_run(path)
    assert doc["value"] == {} and doc["policy"]["all"]["n"] == 0 and doc["trees"] == 3
    assert doc["skipped"] == {"no ground truth (rooms)": 3}
    assert families_with_truth() == ["gridmap", "gridmap-pits", "textminigrid"]
    assert main(["diagnose", str(path)]) == 0
    out = capsys.readouterr().out
    assert "nothing to measure: no ground truth for rooms (Env.steps_to_goal is defined for " \
           "gridmap, gridmap-pits, textminigrid)" in out


def test_unknown_values_are_parse_failures_not_zeros(tmp_path):
    path = _run(tmp_path, "u", {"value": {"noise": 0.1}}, limit=1, max_steps=4)
    before = diagnose_run(path)["value"]["heuristic"]["all"]
    file = min((path / "trees").glob("*/*.json.gz"))
    data = json.loads(gzip.decompress(file.read_bytes()))
    evaluated = [data["nodes"][i] for i in data["eval_order"] if data["nodes"][i]["parent"]]
    # as evaluate_node stores an unreadable value; and as `parse_failure: zero` stores it
    evaluated[0].update(value=None, info={"value_unknown": True})
    evaluated[0]["value_record"].update(v=None, all_failed=True, n_parse_fail=1,
                                        samples=[[None, "?"]])
    evaluated[1].update(value=0.0)
    evaluated[1]["value_record"].update(v=0.0, all_failed=True, n_parse_fail=1,
                                        samples=[[None, "?"]])
    file.write_bytes(gzip.compress(json.dumps(data).encode()))
    after = diagnose_run(path)["value"]["heuristic"]["all"]
    assert (after["n"], after["unknown"]) == (before["n"] - 2, 2)
    assert before["parse_fail_share"] == 0.0 < after["parse_fail_share"]
    rows = [json.loads(x) for x in (path / "diagnose" / "nodes.jsonl").read_text().splitlines()]
    marked = {evaluated[0]["node_id"], evaluated[1]["node_id"]}
    assert [r["value"] for r in rows if r["row"] == "value" and r["t"] == 0
            and r["node"] in marked and r["episode"] == file.parent.name] == [None, None]


def test_tobit_fit_and_rank_correlation_on_known_data():
    import numpy as np

    rng = np.random.default_rng(0)
    truth = rng.uniform(0, 1, 4000)
    values = np.clip(truth + 0.05 + rng.normal(0, 0.25, truth.size), 0, 1)
    bias, sigma = tobit_noise(values.tolist(), truth.tolist())
    assert bias == pytest.approx(0.05, abs=0.015) and sigma == pytest.approx(0.25, abs=0.015)
    assert math.isnan(tobit_noise([0.5] * 3, [0.5] * 3)[1])
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_cli_and_report_section(tmp_path, capsys):
    path = _run(tmp_path, "c", {"value": {"noise": 0.2}}, limit=1, max_steps=10)
    assert main(["diagnose", str(path)]) == 0
    out = capsys.readouterr().out
    assert "value heuristic" in out and "configured noise 0.2" in out
    report = write_report([path])
    assert {"diagnose_value", "diagnose_policy", "diagnose_search"} <= set(report.tables)
    md = (path / "report.md").read_text()
    assert "Diagnostics: value calibration" in md and "diagnose_c_reliability.png" in md
    assert main(["diagnose", str(tmp_path / "nowhere")]) == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.slow
def test_lm_roles_with_the_tiny_model_end_to_end(tmp_path, lively_model_dir, capsys):
    options = {"model": f"hf:{lively_model_dir}",
               "search": {"n_simulations": 3, "branching_factor": 2},
               "policy": {"n_samples_min": 4, "max_tokens": 12},
               "value": {"single": {"n": 2, "max_tokens": 12}}}
    path = _run(tmp_path, "lm", options, agent="mcts", limit=1, max_steps=3)
    assert main(["diagnose", str(path)]) == 0
    doc = load(path)
    assert doc["configured"]["roles"] == "lm" and doc["trees"] == 3 and not doc["skipped"]
    # the random model's proposals do not parse: every expansion is a NONE edge, counted as such
    # (nothing is evaluated, so there is no value row to count as 0)
    p = doc["policy"]["all"]
    assert p["n"] >= 1 and p["none_share"] == 1.0 and p["recall_at_b"] == 0.0
    assert all(v["all"]["n"] + v["all"]["unknown"] >= 1 for v in doc["value"].values())
    assert "nothing parsed 1.000" in capsys.readouterr().out
