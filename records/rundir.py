"""The run directory: the unit of record, self-describing and append-only (docs/architecture.md#data-on-disk).

```
runs/NAME/
  config.yaml          resolved config (with clew version and git commit)
  episodes.jsonl       one line per finished episode
  errors.jsonl         episodes that failed (rerun by --resume)
  trees/EPISODE/STEP.json.gz
  metrics.json         per-episode and aggregated metrics
  summary.md           the summary table
```

Whole-file writes are atomic (:mod:`clew.records.files`). ``episodes.jsonl`` is appended one
fsync'd line at a time; a line torn by a kill is dropped with a warning by every reader and cut
from the file when a run is resumed (:mod:`clew.records.jsonl`), so a resumed run holds every
finished episode exactly once. Readers: ``clew eval --resume``, ``clew report``, ``clew merge``
and ``clew data`` all read through this class.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import yaml
from clew.records.files import atomic_write_json, atomic_write_text
from clew.records.jsonl import dumps, read_jsonl


class RunDir:
    """One run directory. ``open`` checks it is new, or compatible when resuming."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    def episodes_file(self) -> Path:
        return self.path / "episodes.jsonl"

    @property
    def errors_file(self) -> Path:
        return self.path / "errors.jsonl"

    def open(self, config: dict[str, Any], *, resume: bool, compare: tuple[str, ...] = ()) -> None:
        if self.path.exists() and any(self.path.iterdir()):
            if not resume:
                raise FileExistsError(
                    f"run directory {self.path} already holds a run; pass --resume to continue "
                    f"it or choose another --out")
            old = self.config()
            for key in compare:
                if old.get(key) != config.get(key):
                    raise ValueError(
                        f"cannot resume {self.path}: config field {key!r} was "
                        f"{old.get(key)!r}, now {config.get(key)!r}")
            read_jsonl(self.episodes_file, repair=True)
            # A failed episode is retried on resume; its old error line goes.
            if self.errors_file.exists():
                self.errors_file.unlink()
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path / "config.yaml", yaml.safe_dump(config, sort_keys=False))

    def config(self) -> dict[str, Any]:
        file = self.path / "config.yaml"
        if not file.exists():
            raise FileNotFoundError(f"{self.path} is not a run directory (no config.yaml)")
        try:
            return yaml.safe_load(file.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"{file}: not valid YAML: {exc}") from None

    def episodes(self) -> list[dict[str, Any]]:
        """Finished episodes, one per key (a duplicate key would be a bug: it is an error)."""
        records = read_jsonl(self.episodes_file)
        seen: set[str] = set()
        for rec in records:
            if rec.get("key") in seen:
                raise ValueError(f"{self.episodes_file}: episode {rec['key']!r} recorded twice")
            seen.add(rec.get("key"))
        return records

    def finished_keys(self) -> set[str]:
        return {rec["key"] for rec in read_jsonl(self.episodes_file)}

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
