"""Score trajectories produced anywhere (``clew score FILE.jsonl``).

Each input line is ``{"task": <task JSON>, "actions": [...]}``; each output line is one JSON object
of metrics for that line (with the per-step labels), or ``{"line": N, "error": ...}`` for a line
that cannot be scored. A bad line never stops the others.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from clew.envs.base import Task
from clew.metrics import metrics_for, score_episode


def score_line(text: str) -> dict[str, Any]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise ValueError("a line must be a JSON object with 'task' and 'actions'")  # noqa: TRY004
    if "task" not in obj or "actions" not in obj:
        raise ValueError("a line needs both 'task' and 'actions'")
    try:
        task = Task.from_dict(obj["task"])
    except ValueError as exc:
        raise ValueError(f"task: {exc}") from None
    actions = obj["actions"]
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise ValueError("'actions' must be a list of strings")
    if not metrics_for(task.env):
        raise ValueError(f"no metric is registered for environment {task.env!r}")
    return {"task_id": task.id, "env": task.env, **score_episode(task, {"actions": actions})}


def score_lines(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any], str | None]]:
    """Yield ``(line number, result, error)`` for each non-blank line."""
    for lineno, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            yield lineno, {"line": lineno, **score_line(text)}, None
        except Exception as exc:  # noqa: BLE001 (one bad line must not stop the rest)
            msg = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
            yield lineno, {"line": lineno, "error": msg}, msg
