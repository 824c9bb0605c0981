"""The issue-13 measurement scripts run end to end on a tiny scale (their figures are in docs)."""

import json


def test_baselines_table_with_published_rows(load_benchmark, tmp_path, capsys):
    bench = load_benchmark("baselines_003")
    published = tmp_path / "rows.json"
    published.write_text(json.dumps({"paper-003-main/H-E3/N36": [0.5, 0.01],
                                     "paper-003-main/M-main/N48": [0.0, None]}))
    table = tmp_path / "t.md"
    assert bench.main(["--suites", "main", "--runs-scale", "0.001", "--published",
                       str(published), "--table", str(table)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    cells = {bench.row_key(r): r for r in rows if "family" in r}
    assert set(cells) == {f"paper-003-main/{i}/N{n}" for i, ns in
                          (("H-E3", (36, 48)), ("T-main", (36, 48, 60)), ("M-main", (36, 48)))
                          for n in ns}
    assert all(r["runs"] == 2 and 0 <= r["mean"] <= 1 for r in cells.values())
    hill = cells["paper-003-main/H-E3/N36"]
    assert hill["published_mean"] == 0.5 and hill["diff"] == round(hill["mean"] - 0.5, 4)
    assert cells["paper-003-main/M-main/N48"]["within_se"] is False  # 0.0 is far off
    text = table.read_text()
    assert "| paper-003-main | Hill | H-E3 | 36 | 2 |" in text and "within SE" in text


def test_baselines_bad_suite_is_one_error_line(load_benchmark, capsys):
    assert load_benchmark("baselines_003").main(["--suites", "mian"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown suite(s) mian")


def test_instance_stats_gridmap_part(load_benchmark, tmp_path, capsys):
    bench = load_benchmark("instances_stats")
    table = tmp_path / "s.md"
    assert bench.main(["--part", "gridmap", "--seeds", "3", "--table", str(table)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()][:-1]
    assert len(rows) == 18  # 2 versions x 9 presets
    high_v2 = [r for r in rows if r["version"] == 2 and r["exploration"] == "high"]
    assert all(r["open_min"] >= 0.9 for r in high_v2)
    assert "| v2 | high | hard | 9x9 |" in table.read_text()


def test_baselines_leave_the_metric_registry_as_it_was(load_benchmark):
    from clew.metrics import METRICS

    before = dict(METRICS)
    load_benchmark("baselines_003").main(["--suites", "main", "--runs-scale", "0.001", "--table",
                                "/dev/null"])
    assert METRICS == before


def test_instance_stats_rooms_parts(load_benchmark, tmp_path, capsys):
    bench = load_benchmark("instances_stats")
    table = tmp_path / "r.md"
    assert bench.main(["--part", "rooms-variants,rooms-typical", "--layouts", "1", "--runs",
                       "1", "--table", str(table)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()][:-1]
    variants = [r for r in rows if r["part"] == "rooms"]
    assert [r["options"] for r in variants] == bench.VARIANTS
    assert all(r["size"] == "pooled" and r["runs"] == 3 for r in variants)
    budgets = [r["door_budget"] for r in variants[:5]]   # C grows with the factor
    assert budgets == sorted(budgets) and budgets[0] < budgets[-1]
    typical = [r for r in rows if r["part"] == "rooms-typical"]
    assert [r["size"] for r in typical] == ["4x4", "5x5", "7x7"]
    assert all(r["layouts"] == 2 and 0 <= r["gap_exploration"] <= 1 for r in typical)
    text = table.read_text()
    assert "door_budget_factor 1.5" in text and "typical-test rule" in text
    assert bench.main(["--part", "rooms-budget"]) == 2
    assert "choose from" in capsys.readouterr().err
