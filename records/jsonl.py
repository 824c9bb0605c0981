"""JSON lines, the format of ``episodes.jsonl``, ``errors.jsonl`` and exported datasets.

Writing: :func:`dumps` gives one strict JSON line (NaN and infinities become null: JSON has no
NaN, and null reads as "undefined" everywhere in clew).

Reading: :func:`read_jsonl`. Appends are one fsync'd line at a time, so the only damage a kill
can do is a torn *last* line; it is dropped with a warning on stderr (and, with ``repair``, cut
from the file, so the next append starts on a clean line). A bad line anywhere else is not a
kill's doing: it is an error naming the file and line.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any


class RecordError(ValueError):
    """A file of records that cannot be read as it is; the message names the file (and line) and
    says what to do."""


def clean_json(obj: Any) -> Any:
    """NaN/inf become null, recursively; keys become strings."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): clean_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_json(v) for v in obj]
    return obj


def dumps(obj: Any) -> str:
    return json.dumps(clean_json(obj), separators=(",", ":"), allow_nan=False)


def numbered_jsonl(path: str | Path, *, repair: bool = False) -> list[tuple[int, Any]]:
    """``(line number, value)`` for every non-blank line of ``path`` (``[]`` when the file does
    not exist); the torn-last-line rule of the module docstring applies."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    out, offset = [], 0
    for i, line in enumerate(lines):
        last = i == len(lines) - 1 or (i == len(lines) - 2 and lines[-1] == b"")
        if line.strip():
            try:
                out.append((i + 1, json.loads(line)))
            except ValueError as exc:  # JSONDecodeError, or UnicodeDecodeError mid-character
                if not last:
                    reason = getattr(exc, "msg", None) or type(exc).__name__
                    raise RecordError(
                        f"{path}:{i + 1}: corrupt line ({reason}); only a last line can be torn "
                        f"by a kill, so this file was edited or damaged: repair or remove that "
                        f"line") from None
                print(f"warning: {path}:{i + 1}: dropping a torn last line (interrupted write)",
                      file=sys.stderr)
                if repair:
                    with open(path, "r+b") as f:
                        f.truncate(offset)
                        f.flush()
                        os.fsync(f.fileno())
                break
        offset += len(line) + 1
    return out


def read_jsonl(path: str | Path, *, repair: bool = False) -> list[Any]:
    """The values of :func:`numbered_jsonl`, without line numbers."""
    return [value for _, value in numbered_jsonl(path, repair=repair)]
