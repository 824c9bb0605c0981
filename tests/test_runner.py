"""The episode runner: records, early-stop rules, BACKTRACK, concurrency, failures, resume."""

import asyncio
import json

import pytest
from clew.agents.base import BaseAgent, Decision
from clew.agents.lm.base import LMError
from clew.records import RunDir
from clew.runner.episodes import RunAborted, run_episode, run_suite
from toyenv import ScriptedAgent, line_task, register

register()


def play(agent, task, **kw):
    return asyncio.run(run_episode(agent, task, **kw))


def test_episode_record_holds_steps_outcome_and_interactions():
    rec = play(ScriptedAgent(["right", "left", "right", "right", "right"]), line_task(0))
    assert rec["actions"] == ["right", "left", "right", "right", "right"]
    assert rec["outcome"]["success"] is True
    assert rec["outcome"]["steps"] == 5
    assert rec["outcome"]["stopped_by"] == "done"
    assert rec["interactions"] == {"executed": 5, "simulated": 0}
    assert rec["steps"][0]["obs"].startswith("at 1 of 3") and rec["steps"][1]["obs"].startswith("at 0 of 3")
    json.dumps(rec)  # JSON-serialisable as written to episodes.jsonl


def test_invalid_streak_stops_the_episode():
    rec = play(ScriptedAgent(["jump"] * 10), line_task(0), max_invalid_streak=3)
    assert rec["outcome"]["stopped_by"] == "invalid_streak"
    assert rec["outcome"]["steps"] == 3 and rec["outcome"]["invalid"] == 3
    rec = play(ScriptedAgent(["jump"] * 4), line_task(0), max_invalid_streak=0)
    assert rec["outcome"]["invalid"] == 4 and rec["outcome"]["success"]


def test_max_steps_limit():
    rec = play(ScriptedAgent(["left"] * 50), line_task(0, budget=100), max_steps=7)
    assert rec["outcome"]["steps"] == 7 and rec["outcome"]["stopped_by"] == "max_steps"


def test_backtrack_restores_state_and_keeps_clock():
    script = ["right", "right", Decision("backtrack S1", info={"backtrack": 1})]
    seen = {}

    class Probe(ScriptedAgent):
        async def act(self, episode):
            if episode.t == 3:
                seen["obs"] = episode.obs.text
                seen["path"] = list(episode.path)
            return await super().act(episode)

    play(Probe(script), line_task(0, length=5))
    assert seen["obs"].startswith("You backtracked to state S1")
    assert "at 1 of 5, step 3" in seen["obs"]  # world at S1, clock kept and charged
    assert seen["path"] == [0, 1]


def test_backtrack_to_a_state_off_the_path_is_invalid():
    script = ["right", Decision("backtrack S7", info={"backtrack": 7})]
    rec = play(ScriptedAgent(script), line_task(0, length=5))
    assert rec["steps"][1]["valid"] is False
    assert "not an earlier state" in rec["steps"][1]["obs"]
    # every backtrack costs one step, valid or not: the world stays, the clock advances
    assert rec["steps"][1]["obs"].endswith("at 1 of 5, step 2")


def test_episodes_run_concurrently(tmp_path):
    tasks = [line_task(i) for i in range(8)]
    run = RunDir(tmp_path / "run")
    run.open({"x": 1}, resume=False)
    loop_time = {}

    async def go():
        t0 = asyncio.get_running_loop().time()
        await run_suite(lambda: ScriptedAgent(delay=0.05), tasks, run, concurrency=8,
                        progress=False)
        loop_time["s"] = asyncio.get_running_loop().time() - t0

    asyncio.run(go())
    assert len(run.episodes()) == 8
    # 3 steps x 0.05 s each; sequential would be 8x that. Loose bound: concurrency happened.
    assert loop_time["s"] < 8 * 3 * 0.05 / 2


class Crashy(BaseAgent):
    name = "crashy"

    def __init__(self, exc):
        self.exc = exc

    async def act(self, episode):
        if episode.task.seed == 2:
            raise self.exc
        return Decision("right")


def test_a_failing_episode_is_recorded_and_the_rest_go_on(tmp_path):
    run = RunDir(tmp_path / "run")
    run.open({}, resume=False)
    counts = asyncio.run(run_suite(lambda: Crashy(RuntimeError("boom")),
                                   [line_task(i) for i in range(4)], run, progress=False))
    assert counts == {"skipped": 0, "finished": 3, "failed": 1, "context_length": 0}
    errors = [json.loads(x) for x in run.errors_file.read_text().splitlines()]
    assert errors[0]["key"] == "line-2#0" and "boom" in errors[0]["error"]


def test_model_failure_aborts_but_keeps_finished_episodes(tmp_path):
    run = RunDir(tmp_path / "run")
    run.open({}, resume=False)
    with pytest.raises(RunAborted, match="--resume"):
        asyncio.run(run_suite(lambda: Crashy(LMError("server at 127.0.0.1:1 refused")),
                              [line_task(i) for i in range(4)], run, concurrency=1,
                              progress=False))
    assert sorted(r["key"] for r in run.episodes()) == ["line-0#0", "line-1#0"]


def test_resume_skips_finished_and_reruns_the_rest(tmp_path):
    tasks = [line_task(i) for i in range(5)]
    run = RunDir(tmp_path / "run")
    run.open({"a": 1}, resume=False)
    asyncio.run(run_suite(lambda: ScriptedAgent(), tasks[:2], run, progress=False))
    run.close()  # one writer at a time: the process ends before the run is resumed
    # An interrupted write leaves a torn last line.
    with open(run.episodes_file, "a") as f:
        f.write('{"key": "line-2#0", "acti')
    with pytest.raises(FileExistsError):
        RunDir(tmp_path / "run").open({"a": 1}, resume=False)
    with pytest.raises(ValueError, match="config field 'a'"):
        RunDir(tmp_path / "run").open({"a": 2}, resume=True, compare=("a",))
    run2 = RunDir(tmp_path / "run")
    run2.open({"a": 1}, resume=True, compare=("a",))
    counts = asyncio.run(run_suite(lambda: ScriptedAgent(), tasks, run2, progress=False))
    assert counts["skipped"] == 2 and counts["finished"] == 3
    keys = [r["key"] for r in run2.episodes()]
    assert sorted(keys) == [f"line-{i}#0" for i in range(5)]
