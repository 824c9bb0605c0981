"""Recorded LM calls and replay with no model; compute per episode (docs/methods/recording.md).

The acceptance runs go through the ``clew`` command: an R-MCTS_MAD run with its reflection
memory, recorded at concurrency 4 against a fake model whose calls finish in a random order,
replays at concurrency 1 and 8 into the same episodes, trees and memory; a changed option stops
the replay at the first request the recording lacks, with one error line; a run killed with
SIGKILL and resumed leaves a recording that replays; shards' recordings merge."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clew.agents.lm.base import BusyClock, ChatRequest, ContextLengthError, Sampling
from clew.agents.lm.fake import FakeLM
from clew.agents.lm.recording import (
    EPISODE,
    SESSION,
    Recorder,
    RecordingError,
    Replay,
    ReplayMismatch,
)
from clew.agents.lm.spec import load_model
from clew.cli.main import main

TESTS = Path(__file__).parent
SUITE = "gridmap-mini:test"
#: answers every role of a search agent reads (an action, a status code), cycling per model
FAKE = "fake:" + "|".join(
    f"{why}\nNext action: ```{a}```\nSTATUS CODE: {code}"
    for why, a, code in (("Plan.", "up", "B"), ("Hmm.", "right", "C"), ("Try left.", "left", "A"),
                         ("Down it is.", "down", "D")))
RMCTS_MAD = ["--agent", "rmcts-mad", "--model", FAKE, "--suite", SUITE, "--repeats", "2",
             "max_episode_steps=3", "agent_options.search.n_simulations=3",
             "agent_options.reflection.policy.threshold=0",
             "agent_options.reflection.value.threshold=0",
             # calls finish in a random order: what each request is answered depends on timing
             "agent_options.model_options.latency=0.001",
             "agent_options.model_options.jitter=0.01"]
MCTS = ["--agent", "mcts", "--model", FAKE, "max_episode_steps=3",
        "agent_options.search.n_simulations=2", "agent_options.model_options.jitter=0.005"]


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def episodes(run: Path) -> dict[str, dict]:
    """Episode records by key, without the time they took."""
    out = {}
    for line in (run / "episodes.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec.pop("wall_s")
        out[rec["key"]] = rec
    return out


def trees(run: Path) -> dict[str, dict]:
    """Every tree, without its search's wall time (``counters.seconds``)."""
    out = {}
    for p in sorted((run / "trees").rglob("*.json.gz")):
        tree = json.loads(gzip.decompress(p.read_bytes()))
        tree["counters"].pop("seconds", None)
        out[p.relative_to(run).as_posix()] = tree
    return out


def memory(run: Path) -> dict[str, object]:
    """The memory's records (without their creation times) and its FAISS indexes, byte for
    byte (``meta.json`` names the run's directory, so it is left out)."""
    out: dict[str, object] = {}
    for p in sorted((run / "memory").iterdir()):
        if p.suffix == ".jsonl":
            recs = [json.loads(x) for x in p.read_text().splitlines()]
            for r in recs:
                r.pop("created_at", None)
            out[p.name] = recs
        elif p.suffix == ".faiss":
            out[p.name] = p.read_bytes()
    return out


def metrics(run: Path) -> dict:
    """metrics.json without the episodes' wall time (its means, errors and counts included)."""
    def drop(obj):
        if isinstance(obj, dict):
            return {k: drop(v) for k, v in obj.items() if k != "wall_s"}
        return obj

    return drop(json.loads((run / "metrics.json").read_text()))


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip() and "episodes:" not in x]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# --- acceptance: record at concurrency 4, replay at 1 and 8 -----------------------------------
def test_rmcts_mad_run_replays_identically_with_no_model(cwd, capsys, monkeypatch):
    assert main(["search", *RMCTS_MAD, "--concurrency", "4", "--out", "runs/rec"]) == 0
    out = capsys.readouterr().out
    assert "kB per episode" in out   # the recording's size is reported
    rec = cwd / "runs" / "rec"
    recorded = episodes(rec)
    assert len(recorded) == 8 and len(list((rec / "lm").glob("*#*.json.gz"))) == 8
    # the memory was written and read: episodes of the second wave retrieved reflections
    assert any(r["memory"]["retrieved"]["policy"] for r in recorded.values())
    assert {"policy", "debate", "judge", "reflection"} <= {
        role for r in recorded.values() for role in r["usage"]}

    def no_model(*args, **kwargs):
        raise AssertionError("a replay must not build a model")

    monkeypatch.setattr("clew.agents.lm.spec._build", no_model)
    for c in ("1", "8"):
        assert main(["search", "--replay", "runs/rec", "--concurrency", c,
                     "--out", f"runs/replay{c}"]) == 0, capsys.readouterr().err
        replayed = cwd / "runs" / f"replay{c}"
        assert episodes(replayed) == recorded   # usage and the recorded compute included
        assert metrics(replayed) == metrics(rec)
        assert (replayed / "summary.md").read_text().replace(f"replay{c}", "rec") == \
            (rec / "summary.md").read_text()
        assert trees(replayed) == trees(rec)
        assert memory(replayed) == memory(rec)
        assert not (replayed / "lm").exists()   # a replay records nothing new


def test_model_replay_spec_is_the_replay_flag(cwd, capsys):
    assert main(["search", *MCTS, "--suite", SUITE, "--limit", "2", "--out", "runs/rec"]) == 0
    assert main(["search", "--model", "replay:runs/rec", "--out", "runs/again"]) == 0
    assert episodes(cwd / "runs" / "again") == episodes(cwd / "runs" / "rec")


# --- a changed option --------------------------------------------------------------------------
def test_replay_after_a_changed_option_names_the_field(cwd, capsys):
    assert main(["search", *MCTS, "--suite", SUITE, "--limit", "2", "--out", "runs/rec"]) == 0
    capsys.readouterr()
    code = main(["search", "--replay", "runs/rec", "--concurrency", "1", "--out", "runs/t",
                 "agent_options.policy.temperature=0.5"])
    assert code == 3
    line = error_line(capsys)
    assert "episode gridmap-low-easy-s0#0: request 1 (policy) is not in the recording" in line
    assert "sampling.temperature: 0.5 here, 1.0 recorded" in line
    assert "0 episode(s) finished" in line


def test_replay_keeps_the_episodes_that_finished(cwd, capsys):
    assert main(["search", *MCTS, "--suite", SUITE, "--limit", "2", "--out", "runs/rec"]) == 0
    capsys.readouterr()
    # a second repeat of each task: the first episode replays, the next one was never recorded
    code = main(["search", "--replay", "runs/rec", "--concurrency", "1", "--out", "runs/t",
                 "repeats=2"])
    assert code == 3
    line = error_line(capsys)
    assert "episode gridmap-low-easy-s0#1: request 1 (policy)" in line
    assert "holds no calls for this episode" in line and "1 episode(s) finished" in line
    kept = episodes(cwd / "runs" / "t")
    assert list(kept) == ["gridmap-low-easy-s0#0"]
    assert kept["gridmap-low-easy-s0#0"] == episodes(cwd / "runs" / "rec")[
        "gridmap-low-easy-s0#0"]


def test_replay_needs_a_recording(cwd, capsys):
    assert main(["search", *MCTS, "--suite", SUITE, "--limit", "1", "--no-record",
                 "--out", "runs/plain"]) == 0
    assert not (cwd / "runs" / "plain" / "lm").exists()
    capsys.readouterr()
    assert main(["search", "--replay", "runs/plain", "--out", "runs/t"]) == 2
    assert "no LM recording there" in error_line(capsys)
    assert main(["search", "--replay", "runs/none", "--out", "runs/t"]) == 2
    assert "runs/none is not a run directory" in error_line(capsys)


def test_a_damaged_recording_is_named(cwd, capsys):
    assert main(["search", *MCTS, "--suite", SUITE, "--limit", "1", "--out", "runs/rec"]) == 0
    capsys.readouterr()
    bad = cwd / "runs" / "rec" / "lm" / "gridmap-low-easy-s0#0.json.gz"
    bad.write_bytes(b"not gzip")
    assert main(["search", "--replay", "runs/rec", "--out", "runs/t"]) == 3
    line = error_line(capsys)
    assert str(bad.relative_to(cwd)) in line and "not a readable LM recording" in line


def test_heuristic_runs_record_nothing(cwd):
    assert main(["eval", "--agent", "frontier", "--suite", SUITE, "--limit", "1",
                 "--out", "runs/h"]) == 0
    assert not (cwd / "runs" / "h" / "lm").exists()


# --- kill -9, resume, replay -------------------------------------------------------------------
DRIVER = """
import sys
from clew.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_killed_and_resumed_run_leaves_a_recording_that_replays(tmp_path):
    out = tmp_path / "run"
    args = ["search", *MCTS, "--suite", SUITE, "--repeats", "6", "--concurrency", "3",
            "--out", str(out), "agent_options.model_options.latency=0.02"]
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    done = out / "episodes.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline:
        if done.exists() and len(done.read_text().splitlines()) >= 4:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = len(done.read_text().splitlines())
    assert 4 <= before < 24, "the kill should land mid-run"
    resumed = subprocess.run([sys.executable, "-c", DRIVER, *args, "--resume"],
                             check=False, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    recorded = episodes(out)
    assert len(recorded) == 24
    assert len(list((out / "lm").glob("*#*.json.gz"))) == 24
    replay = subprocess.run([sys.executable, "-c", DRIVER, "search", "--replay", str(out),
                             "--concurrency", "5", "--out", str(tmp_path / "replay")],
                            check=False, capture_output=True, text=True, timeout=300)
    assert replay.returncode == 0, replay.stderr
    assert episodes(tmp_path / "replay") == recorded
    assert trees(tmp_path / "replay") == trees(out)


# --- shards ------------------------------------------------------------------------------------
def test_merged_shards_replay_like_one_run(cwd, capsys):
    for i in (0, 1):
        assert main(["search", *MCTS, "--suite", SUITE, "--shard", f"{i}/2",
                     "--out", f"runs/s{i}"]) == 0
    assert main(["merge", "runs/s0", "runs/s1", "--out", "runs/all"]) == 0
    assert "4 recorded episode(s)" in capsys.readouterr().out
    merged = cwd / "runs" / "all"
    assert len(list((merged / "lm").glob("*#*.json.gz"))) == 4
    assert main(["search", "--replay", "runs/all", "--concurrency", "4",
                 "--out", "runs/replay"]) == 0
    assert episodes(cwd / "runs" / "replay") == episodes(merged)


# --- the recording itself ----------------------------------------------------------------------
def request(content: str, seed: int = 1, role: str = "policy") -> ChatRequest:
    return ChatRequest([{"role": "system", "content": "You walk a line."},
                        {"role": "user", "content": content}], Sampling(n=2, seed=seed), role)


async def record_calls(run: Path, lm, calls) -> None:
    """Make ``calls`` (a list of requests) in episode ``e#0`` of a recording into ``run``."""
    recorder = Recorder(run)
    recorder.start()
    token = SESSION.set(recorder)
    try:
        model = load_model(lm)
        EPISODE.set("e#0")
        recorder.begin("e#0")
        for req in calls:
            try:
                await model.complete(req)
            except ContextLengthError:
                pass
        recorder.finish("e#0")
    finally:
        SESSION.reset(token)


async def replay_calls(run: Path, spec: str, calls) -> list:
    replay = Replay(run)
    token = SESSION.set(replay)
    try:
        model = load_model(spec)
        EPISODE.set("e#0")
        replay.begin("e#0")
        return [[c.text for c in await model.complete(req)] for req in calls]
    finally:
        SESSION.reset(token)


def test_identical_requests_get_their_recorded_answers_in_turn(tmp_path):
    lm = FakeLM(lambda req, i: f"answer {i}", spec="fake:count")
    same = request("at 0 of 3")
    asyncio.run(record_calls(tmp_path, lm, [same, same]))
    assert asyncio.run(replay_calls(tmp_path, "fake:count", [same, same])) == [
        ["answer 0", "answer 1"], ["answer 2", "answer 3"]]
    with pytest.raises(ReplayMismatch, match=r"request 3 \(policy\) was recorded 2 time\(s\)"):
        asyncio.run(replay_calls(tmp_path, "fake:count", [same, same, same]))


def test_mismatch_shows_the_differing_message_against_the_nearest_request(tmp_path):
    lm = FakeLM(lambda req, i: "ok", spec="fake:ok")
    calls = [request("at 0 of 3", seed=1), request("at 1 of 3", seed=2, role="value")]
    asyncio.run(record_calls(tmp_path, lm, calls))
    changed = request("at 1 of 4", seed=2, role="value")
    with pytest.raises(ReplayMismatch) as err:
        asyncio.run(replay_calls(tmp_path, "fake:ok", [calls[0], changed]))
    text = str(err.value)
    assert "request 2 (value) is not in the recording" in text
    assert "nearest recorded request (number 2, value)" in text
    assert "messages[1].content at character 8: 'at 1 of 4' here, 'at 1 of 3' recorded" in text
    with pytest.raises(ReplayMismatch, match="differs in model: 'fake:other' here, 'fake:ok'"):
        asyncio.run(replay_calls(tmp_path, "fake:other", calls))


def test_texts_are_stored_once_and_errors_and_token_counts_replay(tmp_path):
    class Counting(FakeLM):
        def count_tokens(self, messages):
            return 1000 + len(messages)   # what only the model's tokenizer would know

    lm = Counting(lambda req, i: "ok", spec="fake:small", context_length=30)
    long = request("word " * 40)
    asyncio.run(record_calls(tmp_path, lm, [request("short"), long]))
    asyncio.run(record_calls(tmp_path / "counts", lm, []))
    doc = json.loads(gzip.decompress((tmp_path / "lm" / "e#0.json.gz").read_bytes()))
    texts = list(doc["texts"].values())
    assert texts.count("You walk a line.") == 1   # the shared system prompt, once
    assert doc["calls"][1]["error"][0] == "ContextLengthError"
    with pytest.raises(ContextLengthError, match="the context holds 30"):
        asyncio.run(replay_calls(tmp_path, "fake:small", [request("short"), long]))
    # token counts the roles asked are answered as recorded, without the tokenizer
    recorder = Recorder(tmp_path / "c")
    recorder.start()
    token = SESSION.set(recorder)
    model = load_model(lm)
    EPISODE.set("e#0")
    assert model.count_tokens(long.messages) == 1002
    recorder.finish("e#0")
    SESSION.reset(token)
    replay = Replay(tmp_path / "c")
    token = SESSION.set(replay)
    stand_in = load_model("fake:small")
    assert stand_in.context_length == 30 and stand_in.count_tokens(long.messages) == 1002
    SESSION.reset(token)


def test_a_replay_of_a_missing_run_is_an_error(tmp_path):
    with pytest.raises(RecordingError, match="no LM recording"):
        Replay(tmp_path)


# --- compute accounting ------------------------------------------------------------------------
def test_busy_time_is_split_among_the_requests_in_flight():
    clock = BusyClock()
    a = clock.start(0.0)
    b = clock.start(1.0)           # a alone for 1 s, then both share 1 s
    assert clock.stop(2.0, a) == pytest.approx(1.5)
    assert clock.stop(4.0, b) == pytest.approx(2.5)   # then b alone for 2 s: 4 s busy in all
    c = clock.start(10.0)          # idle time is nobody's
    assert clock.stop(11.0, c) == pytest.approx(1.0)


def test_episode_records_carry_compute_per_role(cwd):
    assert main(["search", *MCTS, "--suite", SUITE, "--limit", "2", "--out", "runs/c",
                 "agent_options.model_options.latency=0.01",
                 "agent_options.model_options.gpus=2"]) == 0
    for rec in episodes(cwd / "runs" / "c").values():
        assert set(rec["compute"]) == set(rec["usage"])
        for role, c in rec["compute"].items():
            calls = rec["usage"][role]["calls"]
            assert c["engine_s"] >= 0.01 * calls and 0 < c["busy_s"] <= c["engine_s"]
            assert c["gpu_s"] == pytest.approx(2 * c["busy_s"], abs=1e-5)
            assert "cached_tokens" not in c   # the fake backend does not tell
    metrics = json.loads((cwd / "runs" / "c" / "metrics.json").read_text())
    assert metrics["aggregate"]["mean"]["engine_s"] > 0
    assert metrics["aggregate"]["usage_by_role"]["policy"]["gpu_s"] > 0
