"""The observation rules and the chat-turn reading of benchmarks/distill_reads.py (the probe
itself needs a trained model; docs/results.md#why-grid-maps-and-rooms-stayed-at-random-round-2)."""

import json
import random
import sys

import pytest
from clew.envs.suites import get_suite


@pytest.fixture(scope="module")
def reads(load_benchmark):
    return load_benchmark("distill_reads")


def test_the_rules(reads):
    assert reads.allowed("gridmap", ["up", "down", "left"], "up") == ["up", "left"]
    assert reads.allowed("gridmap", ["down"], "up") == ["down"]  # a dead end: back is all there is
    assert reads.allowed("gridmap", ["up", "down"], None) == ["up", "down"]
    seen = ["teal door", "red door", "jade ball"]
    assert reads.allowed("rooms", seen, "teal door") == ["jade ball"]
    assert reads.allowed("rooms", seen[:2], "teal door") == ["red door"]
    with pytest.raises(ValueError, match="no rule for env 'textminigrid'"):
        reads.allowed("textminigrid", ["forward"], None)


def chat(env, user, answer):
    return {"meta": {"env": env}, "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": user},
        {"role": "assistant", "content": f"Assessment: (progress estimate: 0.20)\n\nNext action: ```{answer}```"}]}


def test_a_turn_counts_only_where_the_rule_narrows_the_choice(reads):
    user = "[S3] OBSERVATION:\nPosition [2, 2]. Legal moves: up, down, left. Steps used: 3.\nPREVIOUS ACTION: up"
    assert reads.turn(chat("gridmap", user, "left")) == (["up", "down", "left"], ["up", "left"], "left")
    assert reads.turn(chat("gridmap", user.replace("up, down, left", "down"), "down")) is None
    assert reads.turn(chat("gridmap", user, "backtrack S1")) is None
    rooms = "Reward: 0\nYou see: teal door, jade ball\nPREVIOUS ACTION: red door"
    assert reads.turn(chat("rooms", rooms, "teal door")) == (["teal door", "jade ball"], ["jade ball"], "teal door")
    assert reads.turn(chat("rooms", rooms.replace(", jade ball", ""), "teal door")) is None


def test_the_grid_map_rule_beats_the_uniform_walk(reads):
    # The claim the docs build on: undoing no move finds goals a uniform walk rarely does.
    tasks = [t for t in get_suite("exploration-v1").split("test") if t.env == "gridmap"]
    rng = random.Random(0)
    uniform = sum(reads.play(t, False, rng) >= 1.0 for t in tasks for _ in range(40))
    rule = sum(reads.play(t, True, rng) >= 1.0 for t in tasks for _ in range(40))
    assert rule > 3 * uniform + 10


def test_fewer_episodes_than_tasks_is_an_error_naming_the_file(reads, tmp_path):
    from argparse import Namespace

    tasks = [t for t in get_suite("exploration-v1").split("test") if t.env == "gridmap"]
    path = tmp_path / "maps.jsonl"
    path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in tasks))
    with pytest.raises(SystemExit, match=r"error: .*maps.jsonl: --episodes 2 is less than one"):
        reads.rules(Namespace(tasks=str(path), episodes=2, seed=0))
    out = reads.rules(Namespace(tasks=str(path), episodes=len(tasks), seed=0))
    assert out["episodes"] == len(tasks)


def test_an_unreadable_task_file_is_one_error_line(reads, tmp_path, monkeypatch):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"env": "gridmap"\n')
    monkeypatch.setattr(sys, "argv", ["distill_reads.py", "rules", "--tasks", str(bad)])
    with pytest.raises(SystemExit, match=r"^error: .*bad.jsonl:1: not a task"):
        reads.main()
