"""Run directories that survive cluster use (issue 19 items 1-3): sharded R-MCTS runs merge and
report like the unsharded run; paths inside a run are relative to it, so resume works under any
spelling of ``--out``, from another directory, after a move or a copy; one process at a time per
directory; repeated task ids refused before any work."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from clew.agents import memory as memory_module
from clew.records import RunDir
from clew.reports.report import write_report
from clew.runner.config import ConfigError, EvalConfig
from clew.runner.evaluate import evaluate
from clew.runner.shards import merge_shards
from toyenv import line_task, register

register()
TESTS = Path(__file__).parent
# R-MCTS with heuristic roles: reflections are written after every episode and retrieved at
# every expansion, so each shard's memory is real.
RMCTS = {"seed": 5, "search": {"n_simulations": 4}, "reflection": {"use_gt_success": True}}


def hash_encode(self, texts):
    rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], dtype=np.uint8)
            .astype(np.float32) - 127.5 for t in texts]
    return np.stack([r / np.linalg.norm(r) for r in rows]) if rows else \
        np.zeros((0, 16), dtype=np.float32)


def patch_embedding(mp: pytest.MonkeyPatch) -> None:
    """A cheap deterministic stand-in for MiniLM (its forward pass dominates these tests' time;
    what is tested here is where the memory lives, not what it retrieves)."""
    mp.setattr(memory_module.Embedder, "encode", hash_encode)
    mp.setattr(memory_module.Embedder, "dim", property(lambda self: 16))


@pytest.fixture(autouse=True)
def hash_embedding(monkeypatch):
    patch_embedding(monkeypatch)


def write_suite(path: Path, n: int = 6) -> Path:
    path.write_text("".join(line_task(i, length=2 + i % 3, budget=8).to_json() + "\n"
                            for i in range(n)))
    return path


def rmcts(suite: Path, out: str | Path, **kw) -> RunDir:
    cfg = EvalConfig(agent="rmcts", agent_options=json.loads(json.dumps(RMCTS)),
                     suite=str(suite), out=str(out), concurrency=2, **kw)
    return evaluate(cfg, progress=False)[0]


def memory_lines(folder: Path) -> int:
    return sum(len(f.read_text().splitlines()) for f in folder.glob("*.jsonl"))


def report_rows(run: Path, out: Path) -> dict:
    """The report's tables without what names the run or measures wall time."""
    doc = json.loads((write_report([run], out).out / "report.json").read_text())
    tables = {}
    for key, table in doc["tables"].items():
        keep = [j for j, h in enumerate(table["header"]) if h not in ("run", "wall s/task")]
        tables[key] = [[row[j] for j in keep] for row in table["rows"]]
    return tables


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rmcts")
    suite = write_suite(tmp / "tasks.jsonl")
    with pytest.MonkeyPatch.context() as mp:
        patch_embedding(mp)
        run = rmcts(suite, tmp / "full")
    return suite, run.path


@pytest.mark.parametrize("n", [2, 3])
def test_sharded_rmcts_runs_merge_keep_each_memory_and_report_like_unsharded(unsharded, tmp_path,
                                                                             n):
    suite, full = unsharded
    shards = [rmcts(suite, tmp_path / f"shard-{i}", shard=f"{i}/{n}").path for i in range(n)]
    for s in shards:  # the record names no path: shards of one run have equal options
        assert RunDir(s).config()["agent_options"] == RMCTS
        assert memory_lines(s / "memory") > 0
    merged, counts = merge_shards(shards, tmp_path / "merged")
    assert counts["episodes"] == 6 and counts["shards"] == n
    for i, s in enumerate(shards):
        kept = merged.path / "shard_memory" / f"{i}-of-{n}"
        assert sorted(p.name for p in kept.iterdir()) == sorted(p.name for p in
                                                               (s / "memory").iterdir())
        assert memory_lines(kept) == memory_lines(s / "memory")
    assert report_rows(merged.path, tmp_path / "rep-m") == report_rows(full, tmp_path / "rep-f")


def cut_last_episodes(run: Path, keep: int) -> None:
    """What a kill leaves: only the first ``keep`` episodes recorded."""
    lines = (run / "episodes.jsonl").read_text().splitlines(keepends=True)
    (run / "episodes.jsonl").write_text("".join(lines[:keep]))


def keys(run: Path) -> list[str]:
    return sorted(json.loads(x)["key"] for x in (run / "episodes.jsonl").read_text().splitlines())


def test_resume_under_any_spelling_of_out_after_a_move_and_a_copy(tmp_path, monkeypatch):
    suite = write_suite(tmp_path / "tasks.jsonl")
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(work)
    rmcts(suite, "runs/x")  # relative --out
    run = work / "runs" / "x"
    every = keys(run)
    assert len(every) == 6 and "memory" not in RunDir(run).config()["agent_options"]

    def resume(out, from_dir):
        target = Path(from_dir, out)
        cut_last_episodes(target, 3)
        # the memory is found by the run's own location: rebuilt there, nowhere else
        shutil.rmtree(target / "memory")
        monkeypatch.chdir(from_dir)
        rmcts(suite, out, resume=True)
        assert memory_lines(target / "memory") > 0

    resume(str(run), work)                       # absolute
    resume(os.path.relpath(run, elsewhere), elsewhere)   # another working directory
    assert keys(run) == every
    moved = tmp_path / "moved"
    shutil.move(run, moved)                      # a moved run (a requeue on another node)
    resume("../moved", elsewhere)
    copied = tmp_path / "copied"
    shutil.copytree(moved, copied)               # a copy
    resume(str(copied), tmp_path)
    for r in (moved, copied):
        assert keys(r) == every
    assert not run.exists() and not (elsewhere / "memory").exists()
    assert not (tmp_path / "memory").exists()


def test_memory_dir_named_inside_the_run_is_stored_relative(tmp_path, monkeypatch):
    suite = write_suite(tmp_path / "tasks.jsonl", 2)
    monkeypatch.chdir(tmp_path)
    cfg = EvalConfig(agent="rmcts", suite=str(suite), out="runs/y",
                     agent_options={**RMCTS, "memory": {"dir": "runs/y/memory"}})
    evaluate(cfg, progress=False)
    assert "memory" not in RunDir("runs/y").config()["agent_options"]  # the default place
    cfg = EvalConfig(agent="rmcts", suite=str(suite), out="runs/z",
                     agent_options={**RMCTS, "memory": {"dir": "runs/z/mem"}})
    evaluate(cfg, progress=False)
    assert RunDir("runs/z").config()["agent_options"]["memory"] == {"dir": "mem"}
    shutil.move("runs/z", "runs/w")
    cut_last_episodes(Path("runs/w"), 1)
    cfg = EvalConfig(agent="rmcts", suite=str(suite), out="runs/w", resume=True,
                     agent_options={**RMCTS, "memory": {"dir": "runs/w/mem"}})
    evaluate(cfg, progress=False)
    assert len(keys(Path("runs/w"))) == 2 and memory_lines(Path("runs/w/mem")) > 0


def test_no_temporary_memory_folder_is_left_behind(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    suite = write_suite(tmp_path / "tasks.jsonl", 2)
    rmcts(suite, tmp_path / "run")
    assert list((tmp_path / "tmp").iterdir()) == []


# --- one process per directory ------------------------------------------------------------------
DRIVER = """
import sys
sys.path.insert(0, {tests!r})
import toyenv
toyenv.register()
from clew.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def clew(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", DRIVER.format(tests=str(TESTS)), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_processes_on_one_run_directory(tmp_path):
    """The issue's race: a run and a --resume of it started together. One runs, the other is
    refused naming the holder; nothing is recorded twice and the run resumes cleanly."""
    suite = write_suite(tmp_path / "tasks.jsonl", 8)
    go = tmp_path / "go"   # the first run waits for it: it holds the directory meanwhile
    args = ["eval", "--agent", "toy-scripted", "--suite", str(suite), "--out",
            str(tmp_path / "x"), "--concurrency", "2", f"agent_options.hold={go}"]
    first = clew(*args)
    deadline = time.time() + 60
    while not (tmp_path / "x" / ".lock").exists() and time.time() < deadline:
        time.sleep(0.01)
    second = clew(*args, "--resume")
    _, err2 = second.communicate(timeout=120)
    go.touch()
    _, err1 = first.communicate(timeout=120)
    assert first.returncode == 0, err1
    assert second.returncode == 2
    assert err2.strip().splitlines() == [
        f"error: run directory {tmp_path / 'x'} is in use by pid {first.pid} on host "
        f"{socket.gethostname()}" + err2.split(socket.gethostname(), 1)[1].strip()]
    assert "Traceback" not in err2
    assert keys(tmp_path / "x") == sorted(f"line-{i}#0" for i in range(8))
    assert not (tmp_path / "x" / ".lock").exists()
    again = clew(*args, "--resume")
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert "8 already finished" in out


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    suite = write_suite(tmp_path / "tasks.jsonl", 2)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / ".lock").write_text(json.dumps({"pid": int(dead.stdout),
                                                      "host": socket.gethostname()}))
    proc = clew("eval", "--agent", "toy-scripted", "--suite", str(suite), "--out",
                str(tmp_path / "x"))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert f"taking over the lock of run directory {tmp_path / 'x'} left by pid " \
           f"{int(dead.stdout)}" in err
    assert len(keys(tmp_path / "x")) == 2


def test_a_kill_during_the_first_config_write_leaves_a_directory_that_starts_over(tmp_path):
    """Found by the 200-run stress test: killed while config.yaml was first written, a run
    directory holds only the lock and a temp file; --resume (and a plain rerun) start it."""
    suite = write_suite(tmp_path / "tasks.jsonl", 2)
    out = tmp_path / "x"
    out.mkdir()
    (out / ".lock").write_text("")                       # flock released by the kill
    (out / ".config.yaml.k1l_ed.tmp").write_text("agent: toy-scr")
    proc = clew("eval", "--agent", "toy-scripted", "--suite", str(suite), "--out", str(out),
                "--resume")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert len(keys(out)) == 2
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []


def test_repeated_task_ids_are_refused_before_any_episode(tmp_path):
    suite = tmp_path / "tasks.jsonl"
    tasks = [line_task(0), line_task(1), line_task(0, length=5)]
    suite.write_text("".join(t.to_json() + "\n" for t in tasks))
    cfg = EvalConfig(agent="toy-scripted", suite=str(suite), out=str(tmp_path / "x"))
    with pytest.raises(ConfigError, match=r"task id\(s\) 'line-0' appear more than once"):
        evaluate(cfg, progress=False)
    assert not (tmp_path / "x").exists()


def test_resume_drops_repeated_records_written_before_the_lock(tmp_path, capsys):
    suite = write_suite(tmp_path / "tasks.jsonl", 4)
    cfg = {"agent": "toy-scripted", "suite": str(suite), "out": str(tmp_path / "x")}
    evaluate(EvalConfig(**cfg), progress=False)
    episodes = tmp_path / "x" / "episodes.jsonl"
    lines = episodes.read_text().splitlines(keepends=True)
    twice = json.loads(lines[1])
    twice["wall_s"] += 1.0  # the same episode played by a second, unlocked process
    episodes.write_text("".join(lines[:3]) + json.dumps(twice) + "\n")  # 4th episode lost
    capsys.readouterr()
    run, agg = evaluate(EvalConfig(**cfg, resume=True), progress=False)
    assert "dropping 1 duplicate episode record(s) (line(s) 4)" in capsys.readouterr().err
    assert keys(run.path) == [f"line-{i}#0" for i in range(4)]
    assert agg["counts"] == {"skipped": 3, "finished": 1, "failed": 0,
                             "context_length": 0}
