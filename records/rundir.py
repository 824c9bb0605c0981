"""The run directory: the unit of record, self-describing and append-only
(docs/architecture.md, Data on disk).

```
runs/NAME/
  config.yaml          resolved config (with clew version and git commit)
  episodes.jsonl       one line per finished episode
  errors.jsonl         episodes that failed (rerun by --resume)
  trees/EPISODE/STEP.json.gz
  lm/                  the LM calls of each episode, for replay (clew.agents.lm.recording)
  memory/              the reflection memory of R-MCTS agents (unless the config names another)
  metrics.json         per-episode and aggregated metrics
  summary.md           the summary table
  .lock                while a process writes the run (clew.records.lock)
```

Whole-file writes are atomic (:mod:`clew.records.files`). ``episodes.jsonl`` is appended one
fsync'd batch at a time; a line torn by a kill is dropped with a warning by every reader and cut
from the file when a run is resumed (:mod:`clew.records.jsonl`), so a resumed run holds every
finished episode exactly once. Readers: ``clew eval --resume``, ``clew report``, ``clew merge``
and ``clew data`` all read through this class.

Decisions:

* One writer: :meth:`RunDir.open` takes the directory's :class:`~clew.records.lock.DirLock`
  until :meth:`RunDir.close`; a second process is refused with the holder's pid and host.
  Readers take no lock: appends are whole lines, so a report of a running run is consistent.
* A record of an episode that is already recorded, equal to the first apart from
  :data:`VOLATILE` fields, is dropped with a warning (older versions without the lock could
  write one twice); on resume the file is rewritten without it. Two *different* records of one
  episode are an error naming the lines: which one is right is not clew's guess.
* Paths inside a run are stored relative to the run (:meth:`RunDir.relative`,
  :meth:`RunDir.resolve`), so a run can be moved, copied, or resumed under another spelling of
  ``--out`` or from another working directory.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml
from clew.records.files import atomic_write_json, atomic_write_text
from clew.records.jsonl import RecordError, dumps, numbered_jsonl
from clew.records.lock import LOCK_NAME, DirLock

#: record fields that legitimately differ between two runs of the same episode (the time it
#: took, and the engine time, GPU share and prefix-cache hits of its LM calls)
VOLATILE = ("wall_s", "compute")


def differing_fields(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Fields (apart from :data:`VOLATILE`) in which two episode records differ."""
    keys = (set(a) | set(b)) - set(VOLATILE)
    return sorted(k for k in keys if a.get(k) != b.get(k))


def first_of_each(items: Iterable[tuple[dict[str, Any], Any]],
                  conflict: Callable[[str, Any, Any, list[str]], Exception]
                  ) -> tuple[list[tuple[dict[str, Any], Any]], list[Any]]:
    """Episode records (each with where it came from) without repeats: a record of an episode
    already seen, equal to the first but for :data:`VOLATILE` fields, is dropped (its origin is
    returned); one that differs raises ``conflict(key, first origin, its origin, fields)``. A
    record without a string ``key`` is kept as it is."""
    first: dict[str, tuple[dict[str, Any], Any]] = {}
    kept, dropped = [], []
    for rec, origin in items:
        key = rec.get("key")
        if isinstance(key, str) and key in first:
            rec0, origin0 = first[key]
            diff = differing_fields(rec0, rec)
            if diff:
                raise conflict(key, origin0, origin, diff)
            dropped.append(origin)
            continue
        if isinstance(key, str):
            first[key] = (rec, origin)
        kept.append((rec, origin))
    return kept, dropped


def unique_episodes(numbered: list[tuple[int, Any]], file: Path
                    ) -> tuple[list[dict[str, Any]], list[int]]:
    """The records of ``numbered`` (line, record) without repeated episodes, and the line
    numbers dropped; see the module docstring."""
    for line, rec in numbered:
        if not isinstance(rec, dict):
            raise RecordError(f"{file}:{line}: not an episode record (a JSON object expected)")

    def conflict(key: str, line0: int, line: int, diff: list[str]) -> Exception:
        return RecordError(
            f"{file}: episode {key!r} is recorded twice with different contents (lines "
            f"{line0} and {line}; fields: {', '.join(diff)}): two processes wrote this "
            f"run at once; keep one of the two lines and delete the other")

    pairs, dropped = first_of_each(((rec, line) for line, rec in numbered), conflict)
    kept = [rec for rec, _ in pairs]
    if dropped:
        lines = ", ".join(map(str, dropped[:10])) + (" ..." if len(dropped) > 10 else "")
        print(f"warning: {file}: dropping {len(dropped)} duplicate episode record(s) (line(s) "
              f"{lines}): each repeats an earlier record of the same episode", file=sys.stderr)
    return kept, dropped



def _leftover(p: Path) -> bool:
    """The lock, or the temp file of an atomic write killed before its rename: not part of a
    run (a directory holding only these holds no run; a kill during the very first write of
    config.yaml leaves exactly that)."""
    return p.name == LOCK_NAME or (p.is_file() and p.name.startswith(".")
                                   and p.name.endswith(".tmp"))

def tree_step(path: Path) -> int | None:
    """The real step a tree file holds (``STEP.json.gz``; ``step_STEP`` and plain ``.json`` are
    read too), or ``None`` for a file that is not a tree."""
    m = re.fullmatch(r"(?:step_)?(\d+)\.json(?:\.gz)?", path.name)
    return int(m.group(1)) if m else None


def tree_files(folder: Path) -> list[tuple[int, Path]]:
    """The tree files of one episode folder (``trees/EPISODE/``), in step order."""
    found = [(tree_step(p), p) for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []
    return sorted((step, p) for step, p in found if step is not None)


class RunDir:
    """One run directory. ``open`` checks it is new, or compatible when resuming, and holds its
    lock until ``close``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.lock = DirLock(self.path, what="run directory")

    @property
    def episodes_file(self) -> Path:
        return self.path / "episodes.jsonl"

    @property
    def errors_file(self) -> Path:
        return self.path / "errors.jsonl"

    def holds_run(self) -> bool:
        """Whether the directory already holds (part of) a run."""
        return self.path.is_dir() and not all(_leftover(p) for p in self.path.iterdir())

    def open(self, config: dict[str, Any], *, resume: bool, compare: tuple[str, ...] = (),
             check: Callable[[dict[str, Any]], None] | None = None) -> RunDir:
        """Take the directory (one writer) and record ``config``. Resuming a directory that holds
        a run first refuses a change in the fields ``compare`` and calls ``check`` with the
        recorded config (it raises to refuse), then repairs the records; without ``resume`` a
        run already there is refused."""
        self.lock.acquire()
        try:
            if self.holds_run():
                if not resume:
                    raise FileExistsError(
                        f"run directory {self.path} already holds a run; pass --resume to "
                        f"continue it or choose another --out")
                old = self.config()
                for key in compare:
                    if old.get(key) != config.get(key):
                        raise RecordError(
                            f"cannot resume {self.path}: config field {key!r} was "
                            f"{old.get(key)!r}, now {config.get(key)!r} (leave it out to use "
                            f"the run's, or choose another --out)")
                if check is not None:
                    check(old)
                self.repair()
                # A failed episode is retried on resume; its old error line goes.
                self.errors_file.unlink(missing_ok=True)
            self.path.mkdir(parents=True, exist_ok=True)
            for p in self.path.iterdir():  # temp files of a writer killed mid-write (we hold it)
                if p.name != LOCK_NAME and _leftover(p):
                    p.unlink(missing_ok=True)
            atomic_write_text(self.path / "config.yaml", yaml.safe_dump(config, sort_keys=False))
        except BaseException:
            self.lock.release()
            raise
        return self

    def close(self) -> None:
        """Release the directory for other processes."""
        self.lock.release()

    def __enter__(self) -> RunDir:  # noqa: PYI034 - Self needs Python 3.11
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def repair(self) -> None:
        """Cut a torn last line and drop repeated episode records (the writer's job on
        resume, under the lock)."""
        kept, dropped = unique_episodes(numbered_jsonl(self.episodes_file, repair=True),
                                        self.episodes_file)
        if dropped:
            atomic_write_text(self.episodes_file, "".join(dumps(r) + "\n" for r in kept))

    def config(self) -> dict[str, Any]:
        file = self.path / "config.yaml"
        if not file.exists():
            raise FileNotFoundError(f"{self.path} is not a run directory (no config.yaml)")
        try:
            data = yaml.safe_load(file.read_text()) or {}
        except yaml.YAMLError as exc:
            raise RecordError(f"{file}: not valid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise RecordError(f"{file}: the top level must be a mapping")
        return data

    def relative(self, path: str | Path) -> str:
        """``path`` as stored in the run: relative to the run when inside it, else absolute."""
        full = Path(path).expanduser().resolve()
        try:
            return full.relative_to(self.path.resolve()).as_posix() or "."
        except ValueError:
            return str(full)

    def resolve(self, stored: str | Path) -> Path:
        """A path as stored in the run (:meth:`relative`), as a path to use now."""
        p = Path(stored).expanduser()
        return p if p.is_absolute() else self.path / p

    def episodes(self) -> list[dict[str, Any]]:
        """Finished episodes, one per key (see the module docstring on repeated records)."""
        return unique_episodes(numbered_jsonl(self.episodes_file), self.episodes_file)[0]

    def finished_keys(self) -> set[str]:
        return {rec["key"] for rec in self.episodes() if isinstance(rec.get("key"), str)}

    def _append(self, file: Path, *records: dict[str, Any]) -> None:
        with open(file, "a", encoding="utf-8") as f:
            f.write("".join(dumps(r) + "\n" for r in records))
            f.flush()
            os.fsync(f.fileno())

    def append_episode(self, record: dict[str, Any]) -> None:
        self._append(self.episodes_file, record)

    def append_episodes(self, records: list[dict[str, Any]]) -> None:
        """Several finished episodes, one fsync (group commit)."""
        self._append(self.episodes_file, *records)

    def append_error(self, record: dict[str, Any]) -> None:
        self._append(self.errors_file, record)

    def tree_dir(self, key: str) -> Path:
        return self.path / "trees" / key.replace("/", "_")

    def tree_files(self, key: str) -> list[tuple[int, Path]]:
        """The tree files of one episode, in step order (:func:`tree_files`)."""
        return tree_files(self.tree_dir(key))

    def clear_trees(self, key: str) -> None:
        """Trees of an interrupted episode are stale: the rerun writes them again."""
        shutil.rmtree(self.tree_dir(key), ignore_errors=True)

    def write_tree(self, key: str, step: int, tree: dict[str, Any]) -> Path:
        path = self.tree_dir(key) / f"{step}.json.gz"
        atomic_write_json(path, tree, compress=True)
        return path

    def write_json(self, name: str, obj: Any) -> None:
        atomic_write_json(self.path / name, obj)

    def write_text(self, name: str, text: str) -> None:
        atomic_write_text(self.path / name, text)
