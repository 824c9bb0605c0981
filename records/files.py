"""Atomic file writes: temp file in the same folder, fsync, rename.

Used by everything that records: run directories, search trees, reflection memories, datasets.
A reader never sees half a file: it sees the old file or the new one.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from clew.records.jsonl import clean_json

# mkstemp creates files 0600; an atomic write should give the mode a plain open() would, so that
# colleagues sharing a cluster folder can read reports. The umask is read once, at import, since
# reading it means setting it (not thread-safe later, when writer threads run).
_UMASK = os.umask(0o022)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK


def write_atomic(path: str | Path, data: bytes | Iterable[bytes]) -> None:
    """Write ``data`` (bytes, or an iterable of chunks for output too large to hold at once)
    to ``path`` so that a reader sees the old file or the whole new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.writelines([data] if isinstance(data, (bytes, bytearray)) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# The two names below say what is written; both go through write_atomic.
atomic_write_bytes = write_atomic


def atomic_write_text(path: str | Path, text: str) -> None:
    write_atomic(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any, *, compress: bool = False) -> None:
    """Strict JSON (NaN/inf as null, :func:`clean_json`); gzip with a fixed mtime when
    ``compress``, so the same object gives the same bytes."""
    data = json.dumps(clean_json(obj), indent=None if compress else 1, allow_nan=False).encode()
    write_atomic(path, gzip.compress(data, mtime=0) if compress else data)
