"""Reflection memory under concurrency (issue 11 item 6, issue 16 item 7): a fixed order of
waves makes R-MCTS runs reproducible whatever the timing; stores keep their records in that
order; handles carry their own options; temporary memories belong to one run; one process
writes a memory directory at a time."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import subprocess
import sys
import textwrap
from typing import ClassVar

import numpy as np
import pytest
from clew.agents.lm.base import ChatRequest, Completion, LanguageModel
from clew.agents.memory import ReflectionMemory, open_memory
from clew.agents.usage import Usage
from clew.records import RunDir
from clew.runner.config import EvalConfig
from clew.runner.episodes import run_suite
from clew.runner.registry import build_agent
from toyenv import line_task, register

register()
# names added by the fix are imported in the tests that need them, so that each test fails on
# its own on the code before it


def _h(*parts) -> int:
    return int(hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:8], 16)


class JitterLM(LanguageModel):
    """Answers that depend only on the request (its messages, seed and the sample index), after
    a random delay per call: which call finishes first changes from run to run."""

    spec = "jitter"

    def __init__(self):
        self.rng = random.Random()        # unseeded on purpose: the timing differs per run
        self.calls = 0

    def text(self, req: ChatRequest, j: int) -> str:
        content = "\n".join(m["content"] for m in req.messages)
        h = _h(content, req.sampling.seed, j)
        if req.role == "policy":
            return f"Thinking.\nNext action:\n```\n{'right' if h % 3 else 'left'}\n```"
        if req.role == "rubric":
            return "<rubric>- is the agent at the end of the line?</rubric>"
        if req.role == "value":
            return f"Thoughts: hmm\nSTATUS CODE: {'ABCDE'[h % 5]}"
        return f"lesson {h % 97}: look before you step"

    async def generate(self, requests):
        self.calls += 1
        await asyncio.sleep(self.rng.uniform(0.0, 0.01))
        return [[Completion(self.text(r, j), "stop", Usage(len(r.messages), 3, 1))
                 for j in range(r.sampling.n)] for r in requests]


TASKS = [line_task(i, length=2 + i % 3, budget=5) for i in range(8)]


def rmcts_run(path, lm):
    opts = {"model": lm, "memory": {"dir": str(path / "memory")},
            "search": {"n_simulations": 3, "branching_factor": 2},
            "policy": {"n_samples_min": 4}, "value": {"single": {"n": 3}},
            "reflection": {"policy": {"threshold": 0.0}, "value": {"threshold": 0.0}}}
    run = RunDir(path)
    run.open({"agent": "rmcts"}, resume=False)
    asyncio.run(run_suite(lambda: build_agent("rmcts", **opts), TASKS, run, concurrency=4,
                          max_steps=5, progress=False, waves=True))
    from clew.agents.memory import close_memory

    close_memory(path / "memory")
    return run


def without_timings(rec: dict) -> dict:
    """The record without what varies between runs: its wall time and its calls' compute."""
    from clew.records.rundir import VOLATILE

    return {k: v for k, v in rec.items() if k not in VOLATILE}


def memory_records(path, name):
    out = []
    for line in (path / "memory" / f"{name}.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec.pop("created_at", None)
        out.append(rec)
    return out


def test_two_concurrent_rmcts_runs_are_identical_whatever_the_timing(tmp_path):
    runs = [rmcts_run(tmp_path / f"run{i}", JitterLM()) for i in range(2)]
    a, b = ([without_timings(r) for r in sorted(run.episodes(), key=lambda r: r["key"])]
            for run in runs)
    assert len(a) == len(TASKS) and a == b
    for name in ("policy", "value", "tasks"):
        ra, rb = (memory_records(run.path, name) for run in runs)
        assert ra and ra == rb, name
    for name in ("policy", "value"):
        fa, fb = ((run.path / "memory" / f"{name}.faiss").read_bytes() for run in runs)
        assert fa == fb
    # each episode saw exactly the reflections of the waves before its own (waves of 4 in
    # task order), and says which ones it retrieved
    policy = memory_records(runs[0].path, "policy")
    for rec in a:
        wave = int(rec["key"].split("-")[1].split("#")[0]) // 4
        seen = rec["memory"]
        assert seen["wave"] == wave
        assert seen["policy"] == sum(1 for r in policy if r["order"]["wave"] < wave)
        visible_ids = {r["id"] for r in policy[:seen["policy"]]}
        assert set(seen["retrieved"]["policy"]) <= visible_ids
        if wave == 0:
            assert seen["policy"] == 0 and seen["retrieved"]["policy"] == []
    assert any(rec["memory"]["retrieved"]["policy"] for rec in a)   # the memory was used
    # the stored order is the run's order, not the order in which episodes finished
    keys = [(r["order"]["wave"], r["order"]["position"], r["order"]["seq"]) for r in policy]
    assert keys == sorted(keys)


def test_eval_runs_memory_agents_in_waves(tmp_path):
    from clew.runner.evaluate import memory_dir

    assert memory_dir(EvalConfig(agent="rmcts", suite="gridmap-mini:test",
                                 agent_options={"memory": {"dir": "m"}})) == "m"
    assert memory_dir(EvalConfig(agent="mcts", suite="gridmap-mini:test")) is None


# --- the store keeps a run's order ------------------------------------------------------------
class AxisEmbedder:
    """Each distinct text gets an axis of its own: a record is its key's only match."""

    model_id = "axis-order"
    dim = 32
    axes: ClassVar[dict[str, int]] = {}

    def encode(self, texts):
        rows = [self.axes.setdefault(t, len(self.axes) % self.dim) for t in texts]
        return np.stack([np.eye(self.dim, dtype=np.float32)[i] for i in rows])


def rec(name):
    return {"dedup": name, "key_text": name, "reflection": name}


def test_records_land_in_run_order_and_waves_see_earlier_waves_only(tmp_path):
    from clew.agents.base import EpisodeOrder

    mem = ReflectionMemory(tmp_path, embedder=AxisEmbedder(), min_score=-1.0, policy_top_m=10)
    mem.add("policy", rec("earlier-run"))                        # a record of an earlier run
    run = "runs/x"
    late, early = EpisodeOrder(run, 1, 5), EpisodeOrder(run, 0, 2)
    mem.add("policy", rec("w1-p5"), late)                         # arrives first
    mem.add("policy", rec("w0-p2-a"), early)
    mem.add("policy", rec("w0-p2-b"), early)
    mem.add("policy", rec("w0-p1"), EpisodeOrder(run, 0, 1))
    assert [r["dedup"] for r in mem.policy.records] == [
        "earlier-run", "w0-p1", "w0-p2-a", "w0-p2-b", "w1-p5"]
    assert mem.policy.index.ntotal == 5
    # FAISS rows follow the records: each record is its own best match
    for i, r in enumerate(mem.policy.records):
        assert mem.retrieve("policy", r["key_text"])[0]["key_text"] == r["key_text"]
    assert mem.begin_task(EpisodeOrder(run, 0, 0)).policy == 1       # the earlier run only
    assert mem.begin_task(EpisodeOrder(run, 1, 4)).policy == 4       # + wave 0
    assert mem.begin_task(EpisodeOrder(run, 2, 8)).policy == 5
    assert mem.begin_task(EpisodeOrder("runs/new", 0, 0)).policy == 5   # a new run sees all
    view = mem.begin_task(EpisodeOrder(run, 1, 4))
    got = {r["dedup"] for r in mem.retrieve("policy", "anything", view)}
    assert got == {"earlier-run", "w0-p1", "w0-p2-a", "w0-p2-b"}
    # ids come from the content, so identical runs write identical files
    assert mem.policy.records[1]["id"] == "policy-" + "w0-p1"[:16]


def test_a_duplicate_keeps_the_record_earlier_in_the_order(tmp_path):
    from clew.agents.base import EpisodeOrder

    mem = ReflectionMemory(tmp_path, embedder=AxisEmbedder())
    mem.add("policy", {**rec("same"), "reflection": "from position 3"}, EpisodeOrder("r", 0, 3))
    assert mem.add("policy", {**rec("same"), "reflection": "from position 1"},
                   EpisodeOrder("r", 0, 1))
    assert not mem.add("policy", {**rec("same"), "reflection": "from position 2"},
                       EpisodeOrder("r", 0, 2))
    assert [r["reflection"] for r in mem.policy.records] == ["from position 1"]
    assert mem.policy.index.ntotal == 1


# --- handles, runs, processes -----------------------------------------------------------------
def test_open_memory_gives_each_handle_its_own_options(tmp_path):
    a = open_memory(tmp_path / "m", min_score=0.9, policy_top_m=1)
    b = open_memory(tmp_path / "m", min_score=0.1, policy_top_m=3)
    assert (a.min_score, a.top_m["policy"]) == (0.9, 1)
    assert (b.min_score, b.top_m["policy"]) == (0.1, 3)
    assert a.policy is b.policy                                  # one set of files, one writer
    a.close()


def test_temporary_memories_belong_to_one_run(tmp_path):
    """Two runs in one process of an agent without memory.dir: the agents of one run share a
    temporary memory, the next run gets a fresh one (issue 16 item 7)."""
    opts = {"roles": "heuristic", "search": {"n_simulations": 2},
            "reflection": {"policy": {"threshold": 0.0}, "value": {"threshold": 0.0}}}
    dirs, firsts = [], []
    for i in range(2):
        run = RunDir(tmp_path / f"r{i}")
        run.open({}, resume=False)
        built = []

        def factory(built=built):
            agent = build_agent("rmcts", **opts)
            built.append(agent)
            return agent

        asyncio.run(run_suite(factory, TASKS[:2], run, concurrency=1, max_steps=4,
                              progress=False))
        dirs.append({str(a.memory.dir) for a in built})
        firsts.append(len(built[0].memory.policy.records))
    assert len(dirs[0]) == len(dirs[1]) == 1     # one memory per run
    assert dirs[0] != dirs[1]                    # not shared across runs
    assert firsts[0] > 0                         # (the memory was written)
    outside = {str(build_agent("rmcts", **opts).memory.dir) for _ in range(2)}
    assert len(outside) == 2 and not outside & (dirs[0] | dirs[1])   # outside a run: own


HOLD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    from clew.agents.memory import ReflectionMemory
    from test_memory_order import AxisEmbedder
    mem = ReflectionMemory({path!r}, embedder=AxisEmbedder())
    print("held", flush=True)
    time.sleep(60)
""")


def test_a_second_process_cannot_write_the_same_memory(tmp_path):
    from clew.agents.memory_store import MemoryLockError

    path = str(tmp_path / "m")
    tests = os.path.dirname(__file__)
    holder = subprocess.Popen([sys.executable, "-c", HOLD.format(tests=tests, path=path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(MemoryLockError, match=rf"error: .*in use by process {holder.pid} "
                                                  rf"on host \S+"):
            ReflectionMemory(path, embedder=AxisEmbedder())
    finally:
        holder.kill()
        holder.wait()
    # the holder died without releasing: its lock is taken over, with a warning
    mem = ReflectionMemory(path, embedder=AxisEmbedder())
    assert (tmp_path / "m" / "lock").read_text().split()[0] == str(os.getpid())
    mem.close()
    assert (tmp_path / "m" / "lock").read_text() == ""          # released: free


def test_a_stale_lock_is_taken_over_with_a_warning(tmp_path, capsys):
    path = tmp_path / "m"
    path.mkdir()
    (path / "lock").write_text("999999 some-host\n")              # nobody holds the flock
    mem = ReflectionMemory(path, embedder=AxisEmbedder())
    err = capsys.readouterr().err
    assert "warning:" in err and "999999 on host some-host" in err and "no longer running" in err
    mem.close()


def test_the_cut_is_the_families_unless_the_options_give_one(tmp_path):
    from clew.envs.gridmap.env import GridMapEnv
    from clew.envs.registry import make

    cut = make("gridmap").memory_min_score
    mem = open_memory(tmp_path / "m", embedding_model="unused")
    assert mem.begin_task(family_cut=cut).min_score == GridMapEnv.memory_min_score == 0.97
    assert mem.begin_task(family_cut=None).min_score == 0.25        # a family without one
    assert open_memory(tmp_path / "m", embedding_model="unused",
                       min_score=0.5).begin_task(family_cut=cut).min_score == 0.5
    mem.close()


@pytest.mark.parametrize("suite", ["gridmap-v1:test", "textminigrid-v1:test", "rooms-v1:test"])
def test_memory_keys_hold_no_generic_instruction_text(suite):
    """Keys are the env's compact view of task and state (issue 11 item 6): no sentence of the
    family's instructions, no step counter, and states of different tasks stay apart."""
    import re

    from clew.envs.registry import make_for
    from clew.envs.suites import resolve

    views = set()
    for task in resolve(suite)[:4]:
        env = make_for(task)
        obs = env.reset(task).text
        legal = env.legal_actions()
        later = env.step(legal[0]).obs.text if legal else obs
        for text in (obs, later):
            view = env.memory_view(text)
            lines = text.splitlines()
            assert view and all(any(v in line for line in lines) for v in view.splitlines())
            sentences = [x for x in re.split(r"(?<=[.!?])\s+", env.instructions()) if len(x) > 30]
            assert not any(x in view for x in sentences)
            assert "Steps used" not in view and "Based on the observation" not in view
            views.add(view)
    assert len(views) > 1
