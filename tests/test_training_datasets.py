"""Run directories to EL / IL datasets (docs/methods/exploratory-learning.md#episode-selection) and the `clew data` command."""

from __future__ import annotations

import json

import pytest
from clew.agents.window import ChatWindow
from clew.cli.main import main
from clew.envs import registry
from clew.training.datasets import (
    DataConfig,
    build_datasets,
    is_selected,
    load_chat_dataset,
    save_datasets,
)
from pydantic import ValidationError
from training_toys import raw, write_run


@pytest.fixture(autouse=True)
def toy_env(monkeypatch):
    monkeypatch.setitem(registry.ENVS, "toy-tree", registry.EnvEntry("training_toys:TreeEnv"))


def test_subsets_selection_and_metadata(tmp_path):
    run = write_run(tmp_path / "run", n_tasks=2)
    ds, report = build_datasets(DataConfig(runs=[str(run)]))
    assert (report["episodes"], report["selected"]) == (4, 3)   # ex-fail is not selected
    assert report["el_episodes"] == 2 and report["il_episodes"] == 3
    assert report["el_skipped"] == {"no search trees": 1}
    # pairs and values come from every tree, the failed episode's too: one pair per tree (at
    # the root, B (Q .75) over A (Q .15); s1's other edge was never visited), a value row per
    # node but s4, which lies past the goal (its replay ends the episode first)
    assert report["samples"] == {"el": 8, "il_all": 3, "il_matched": 2, "pairs": 3, "values": 12}
    assert report["tree_rows"] == {"replay_failed": 3, "value_unknown": 0}
    pair = ds["pairs"][0]
    assert (pair["chosen"][0]["content"], pair["rejected"][0]["content"]) == (raw("B"), raw("A"))
    assert (pair["q_chosen"], pair["q_rejected"], pair["n_chosen"]) == (0.75, 0.15, 2)
    el = ds["el"]
    assert set(el["kind"]) == {"el"} and set(el["task_id"]) == {"ex-0", "ex-1"}
    assert set(ds["il_all"]["task_id"]) == {"ex-0", "ex-1", "ex-91"}
    assert set(ds["il_matched"]["task_id"]) == {"ex-0", "ex-1"}
    assert set(ds["il_all"]["kind"]) == {"il"} and set(el["source_run"]) == {str(run)}
    row = el[3]
    assert row["turn_index"] == 3 and row["n_backtracks"] == 1
    weights = [(m["role"], m["weight"]) for m in row["messages"]]
    assert weights[:2] == [("system", None), ("user", None)]
    assert [w for r, w in weights if r == "assistant"] == [0, 0, 0, 1]


def test_rows_do_not_depend_on_the_order_episodes_finished(tmp_path):
    """A run's episodes finish in any order under concurrency: the data is the same, row for row
    (what a seeded training run's batches depend on)."""
    run = write_run(tmp_path / "run", n_tasks=3)
    file = run / "episodes.jsonl"
    lines = file.read_text().splitlines(keepends=True)
    first = build_datasets(DataConfig(runs=[str(run)]))[0]
    file.write_text("".join(reversed(lines)))
    again = build_datasets(DataConfig(runs=[str(run)]))[0]
    for subset in ("el", "il_all", "pairs", "values"):
        assert first[subset].to_list() == again[subset].to_list(), subset
    assert len(set(first["el"]["task_id"])) > 1           # more than one episode to order


ONE_TURN = {"keep_first_pairs": 0, "keep_last_pairs": 1, "keep_system": False}


def test_one_turn_samples_without_the_system_turn(tmp_path):
    """window 0 + 1 pairs without the system turn: every chat sample and every pair / value
    prompt is the current user turn alone (with its answer)."""
    run = write_run(tmp_path / "run", n_tasks=2)
    ds, report = build_datasets(DataConfig(runs=[str(run)], window=ONE_TURN))
    assert report["samples"]["el"] == 8 and report["samples"]["pairs"] == 3
    for subset in ("el", "il_all"):
        assert [[m["role"] for m in row] for row in ds[subset]["messages"]] == (
            [["user", "assistant"]] * len(ds[subset]))
    assert {tuple(m["role"] for m in p) for p in ds["pairs"]["prompt"]} == {("user",)}
    assert {tuple(m["role"] for m in v) for v in ds["values"]["prompt"]} == {("user",)}
    kept = build_datasets(DataConfig(runs=[str(run)]))[0]
    assert kept["el"][0]["messages"][0]["role"] == "system"


def test_window_per_env_overrides_the_window_for_that_env_only(tmp_path):
    """env_window: an env named there gets its own window in chats, pairs and values; the
    other envs keep ``window``; the digest changes only when it is set."""
    run = write_run(tmp_path / "run", n_tasks=2)
    one_turn = ONE_TURN
    here = build_datasets(DataConfig(runs=[str(run)], env_window={"toy-tree": one_turn}))[0]
    flat = build_datasets(DataConfig(runs=[str(run)], window=one_turn))[0]
    for subset in ("el", "il_all", "pairs", "values"):
        assert here[subset].to_list() == flat[subset].to_list(), subset
    elsewhere = DataConfig(runs=[str(run)], env_window={"gridmap": one_turn})
    assert build_datasets(elsewhere)[0]["el"].to_list() == (
        build_datasets(DataConfig(runs=[str(run)]))[0]["el"].to_list())
    assert elsewhere.window_of("toy-tree").keep_first_pairs == 2
    assert DataConfig(runs=["r"]).digest() != DataConfig(runs=["r"],
                                                         env_window={"x": one_turn}).digest()
    with pytest.raises(ValidationError, match="env_window.toy-tree.keep_last_pairs"):
        DataConfig(runs=["r"], env_window={"toy-tree": {**one_turn, "keep_last_pairs": 0}})


def test_the_windows_old_keys_are_read_with_a_warning(capsys):
    old = DataConfig(runs=["r"], elide_keep_first_pairs=0, elide_keep_last_pairs=1,
                     elide_keep_system=False, env_history={"x": ONE_TURN})
    assert old.window == ChatWindow(**ONE_TURN) and old.env_window == {"x": ChatWindow(**ONE_TURN)}
    err = capsys.readouterr().err
    assert "elide_keep_first_pairs is deprecated and read as window.keep_first_pairs" in err
    with pytest.raises(ValidationError, match="elide_keep_last_pairs and window.keep_last_pairs"):
        DataConfig(runs=["r"], elide_keep_last_pairs=1, window={"keep_last_pairs": 2})


def test_selection_by_ground_truth():
    assert is_selected({"outcome": {"success": True}})
    assert not is_selected({"outcome": {"success": None, "grade": 0.5}})
    assert is_selected({"outcome": {"success": None, "grade": 1.0}})
    assert not is_selected({"outcome": {"success": False, "success_est": True}})
    assert is_selected({"outcome": {"success": False, "success_est": True}}, "est")
    with pytest.raises(ValueError, match="'k' records no success estimate"):
        is_selected({"key": "k", "outcome": {"success": True}}, "est")
    with pytest.raises(ValidationError, match="select_by"):
        DataConfig(runs=["r"], select_by="guess")


def test_grade_cut_per_env(tmp_path):
    """env_select_min_grade: an env named there is selected by its own cut (where episodes have
    no success flag), the others by select_min_grade; a name no env has is an error up front."""
    run = write_run(tmp_path / "run", n_tasks=3, failed=False, without_trees=False)
    file = run / "episodes.jsonl"
    records = [json.loads(line) for line in file.read_text().splitlines()]
    for record, grade in zip(records, (0.4, 0.6, 0.9)):   # graded, as rooms is: no success flag
        record["outcome"] = {"success": None, "grade": grade}
    file.write_text("".join(json.dumps(r) + "\n" for r in records))
    selected = {}
    for name, options in {"global": {}, "low global": {"select_min_grade": 0.5},
                          "toy cut": {"env_select_min_grade": {"toy-tree": 0.5}},
                          "other env's cut": {"env_select_min_grade": {"rooms": 0.3}}}.items():
        ds = build_datasets(DataConfig(runs=[str(run)], subsets=["il_all"], **options))[0]
        selected[name] = sorted(set(ds["il_all"]["task_id"]))
    assert selected == {"global": [], "low global": ["ex-1", "ex-2"],
                        "toy cut": ["ex-1", "ex-2"], "other env's cut": []}
    cfg = DataConfig(runs=["r"], select_min_grade=0.9, env_select_min_grade={"rooms": 0.5})
    assert (cfg.min_grade_of("rooms"), cfg.min_grade_of("gridmap")) == (0.5, 0.9)
    assert DataConfig(runs=["r"]).digest() != cfg.model_copy(
        update={"select_min_grade": 1.0}).digest()
    plain = DataConfig(runs=["r"])                      # the dead-end options count when set
    assert plain.digest() != DataConfig(runs=["r"], el_dead_ends=True).digest()
    assert plain.digest() != DataConfig(runs=["r"], el_back_one="bare").digest()
    with pytest.raises(ValidationError, match="(?s)env_select_min_grade.*unknown env.*'room'"):
        DataConfig(runs=["r"], env_select_min_grade={"room": 0.5})
    with pytest.raises(ValidationError, match="env_select_min_grade.rooms"):
        DataConfig(runs=["r"], env_select_min_grade={"rooms": 1.5})


def test_jsonl_export_and_reload(tmp_path):
    run = write_run(tmp_path / "run", n_tasks=1, failed=False, without_trees=False)
    cfg = DataConfig(runs=[str(run)],
                     formats=["chat", "openai", "prompt_completion", "context_response"])
    ds, report = build_datasets(cfg)
    out = save_datasets(ds, report, tmp_path / "data", cfg.formats)
    lines = [json.loads(x) for x in (out / "el.jsonl").read_text().splitlines()]
    assert len(lines) == 4 and lines[-1]["meta"]["kind"] == "el"
    for m in lines[-1]["messages"]:
        assert ("weight" in m) == (m["role"] == "assistant")
    oa = json.loads((out / "el.openai.jsonl").read_text().splitlines()[-1])
    assert oa == {"messages": lines[-1]["messages"]}
    pc = json.loads((out / "el.prompt_completion.jsonl").read_text().splitlines()[-1])
    assert pc["completion"][0]["content"] == lines[-1]["messages"][-1]["content"]
    assert pc["prompt"][-1]["role"] == "user"
    cr = json.loads((out / "el.context_response.jsonl").read_text().splitlines()[-1])
    assert cr["response"] == pc["completion"][0]["content"] and cr["metadata"]["task_id"]
    for source in (out / "el", out / "el.jsonl"):
        back = load_chat_dataset(source)
        assert [m["content"] for m in back[3]["messages"]] == \
               [m["content"] for m in ds["el"][3]["messages"]]
        assert [m["weight"] for m in back[3]["messages"]] == \
               [m["weight"] for m in ds["el"][3]["messages"]]
    assert json.loads((out / "export_report.json").read_text())["samples"]["el"] == 4


def test_torn_last_line_dropped_and_bad_inner_line_named(tmp_path, capsys):
    """`clew data` reads runs as `clew eval --resume` does: a line torn by a kill mid-append is
    dropped with a warning; a bad line before the end is an error naming file and line."""
    run = write_run(tmp_path / "run", n_tasks=2, failed=False, without_trees=False)
    file = run / "episodes.jsonl"
    clean = file.read_text()
    n = len(clean.splitlines())
    assert main(["data", "--out", str(tmp_path / "clean"), str(run)]) == 0
    with open(file, "a") as fh:
        fh.write('{"key": "ex-9#0", "task": {"env": "toy-tr')
    capsys.readouterr()
    assert main(["data", "--out", str(tmp_path / "torn"), str(run)]) == 0
    assert f"episodes.jsonl:{n + 1}: dropping a torn last line" in capsys.readouterr().err
    for name in ("el", "il_all"):
        assert (tmp_path / "torn" / f"{name}.jsonl").read_text() == \
               (tmp_path / "clean" / f"{name}.jsonl").read_text()
    assert file.read_text().startswith(clean)  # a reader never repairs: only --resume does
    file.write_text("{not json\n" + clean)
    with pytest.raises(ValueError, match=r"episodes.jsonl:1: corrupt line"):
        build_datasets(DataConfig(runs=[str(run)]))


def test_clew_data_command(tmp_path, capsys):
    run = write_run(tmp_path / "run", n_tasks=2)
    out = tmp_path / "data"
    assert main(["data", "--out", str(out), str(run), "el_max_actions=3"]) == 1  # EL empty
    text = capsys.readouterr().out
    assert "EL from 0" in text and "too long" in text
    assert load_chat_dataset(out / "il_all").num_rows == 3
    assert main(["data", "--out", str(out), str(run), "sample_mode=bogus"]) == 2
    assert "sample_mode" in capsys.readouterr().err
    assert main(["data", "--out", str(out)]) == 2
    assert "runs" in capsys.readouterr().err
