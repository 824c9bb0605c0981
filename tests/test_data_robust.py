"""`clew data` as robust as the rest (issue 19 item 4): a damaged tree or record costs only its
episode, counted in the export report; an empty subset warns, names the option that helps and
exits non-zero unless allowed; skip reasons keep their numbers."""

from __future__ import annotations

import json

import pytest
from clew.cli.main import main
from clew.envs import registry
from clew.training.datasets import DataConfig, build_datasets
from training_toys import write_run


@pytest.fixture(autouse=True)
def toy_env(monkeypatch):
    monkeypatch.setitem(registry.ENVS, "toy-tree", registry.EnvEntry("training_toys:TreeEnv"))


def test_an_unreadable_tree_skips_that_episodes_el_only(tmp_path, capsys):
    run = write_run(tmp_path / "run", n_tasks=3, failed=False, without_trees=False)
    bad = run / "trees" / "ex-1#0" / "0.json.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00garbage, not a gzip stream")
    assert main(["data", "--out", str(tmp_path / "data"), str(run)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert "EL skipped 1 episode(s): unreadable tree" in out and str(bad) in out
    report = json.loads((tmp_path / "data" / "export_report.json").read_text())
    assert report["el_skipped"] == {"unreadable tree": 1}
    assert report["el_episodes"] == 2 and report["il_episodes"] == 3  # IL needs no tree
    assert len(report["unreadable_trees"]) == 1 and str(bad) in report["unreadable_trees"][0]


def test_a_record_that_cannot_be_rebuilt_is_skipped_and_counted(tmp_path, capsys):
    run = write_run(tmp_path / "run", n_tasks=2, failed=False, without_trees=False)
    lines = (run / "episodes.jsonl").read_text().splitlines()
    broken = json.loads(lines[0])
    broken["task"] = {"env": "toy-tree"}            # params, seed, id gone
    (run / "episodes.jsonl").write_text("\n".join([json.dumps(broken), lines[1]]) + "\n")
    ds, report = build_datasets(DataConfig(runs=[str(run)]))
    assert report["episodes"] == 2 and report["selected"] == 1
    assert len(report["unreadable_records"]) == 1
    assert "episode record 1: the task cannot be rebuilt" in report["unreadable_records"][0]
    assert report["el_episodes"] == 1 and ds["el"].num_rows > 0
    assert "cannot be exported" in capsys.readouterr().err


def test_empty_subset_warns_with_the_option_and_exits_non_zero_unless_allowed(tmp_path, capsys):
    run = write_run(tmp_path / "run", n_tasks=2, failed=False, without_trees=False)
    args = ["data", "--out", str(tmp_path / "data"), str(run), "el_max_actions=3"]
    assert main(args) == 1
    out, err = capsys.readouterr()
    # the reasons keep their numbers; the hint names the option and a value that helps
    assert "e.g. ex-0#0: too long (4 actions > el_max_actions 3)" in out
    assert "warning: no samples in el, il_matched; raise el_max_actions (now 3; the skipped " \
           "trajectories have up to 4 actions), e.g. el_max_actions=4" in err
    assert main([*args, "allow_empty=true"]) == 0
    assert main(["data", "--out", str(tmp_path / "data"), str(run), "el_max_actions=4"]) == 0


def test_the_demo_search_into_clew_data_is_not_a_silent_zero(tmp_path, capsys):
    """The path a new user takes: the demo's search, then `clew data` with its defaults."""
    from clew.runner.config import load_yaml

    search = load_yaml("demo", presets="loop")["search"]["agent_options"]["search"]
    run = tmp_path / "search"
    opts = [f"agent_options.search.{k}={v}" for k, v in search.items()]
    assert main(["search", "--agent", "mcts", "--suite", "exploration-v1:train", "--limit", "6",
                 "--out", str(run), "max_episode_steps=40", *opts]) == 0
    capsys.readouterr()
    code = main(["data", "--out", str(tmp_path / "data"), str(run)])
    out, err = capsys.readouterr()
    report = json.loads((tmp_path / "data" / "export_report.json").read_text())
    # the demo's trajectories are longer than the default el_max_actions (seeded: always so)
    assert report["samples"]["el"] == 0 and report["samples"]["il_all"] > 0
    assert code == 1 and "raise el_max_actions (now 20" in err
    assert "#" not in "".join(report["el_skipped"])  # reasons read as text, not 'turn # of #'
    assert "env_options" not in out + err            # no budget option the env does not have
