"""clew.records: what every layer writes to and reads from disk (docs/architecture.md, Records).

* :mod:`clew.records.files` — atomic writes (temp file in the same folder, fsync, rename);
* :mod:`clew.records.jsonl` — JSON lines: strict JSON out (NaN becomes null), and reading that
  drops a torn last line with a warning (a kill mid-append) and names the file and line of any
  other bad line;
* :mod:`clew.records.lock` — :class:`DirLock`, one process at a time in a directory (run
  directories, reflection memories);
* :mod:`clew.records.rundir` — :class:`RunDir`, the run directory.

This package imports nothing of clew except :mod:`clew.envs`, so eval, training, search and
agents may all use it (the import direction is checked by ``tests/test_layout.py``).
"""

from clew.records.files import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    write_atomic,
)
from clew.records.jsonl import RecordError, clean_json, dumps, read_jsonl
from clew.records.lock import DirLock, LockedError
from clew.records.rundir import RunDir

__all__ = [
    "DirLock", "LockedError", "RecordError", "RunDir", "atomic_write_bytes", "atomic_write_json", "atomic_write_text", "clean_json",
    "dumps", "read_jsonl", "write_atomic",
]
