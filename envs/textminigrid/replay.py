"""Replaying a TextMiniGrid episode record, for its metrics and its trace.

When the record carries per-step ``info["executed"]`` (the runner stores the env's step info),
the executed atomic actions are replayed exactly; otherwise the decision texts are replayed
through the env with ``record["env_options"]`` when present, and with no cap on actions per step
when m is unknown (trajectories scored with ``clew score`` are taken as executed).
"""

from __future__ import annotations

import inspect
from typing import Any

from clew.envs.base import Task
from clew.envs.textminigrid.env import TextMiniGridEnv
from clew.envs.textminigrid.layout import MAX_STEPS

#: m when the record does not say: any number of actions per decision step
UNCAPPED = 10**6


def env_options(record: dict[str, Any]) -> dict[str, Any]:
    """The record's env options that TextMiniGridEnv takes, uncapped m by default, traced."""
    allowed = set(inspect.signature(TextMiniGridEnv.__init__).parameters) - {"self"}
    opts = {k: v for k, v in (record.get("env_options") or {}).items() if k in allowed}
    opts.setdefault("max_actions", UNCAPPED)
    return {**opts, "trace": True}


def executed_from_steps(record: dict[str, Any]) -> list[list[str]] | None:
    """The atomic actions each decision step executed, when every step's info says so."""
    steps = record.get("steps")
    if not isinstance(steps, list) or not steps:
        return None
    out = []
    for s in steps:
        info = s.get("info") if isinstance(s, dict) else None
        if not isinstance(info, dict) or "executed" not in info:
            return None
        out.append(list(info["executed"]))
    return out


def replay(task: Task, record: dict[str, Any]) -> tuple[TextMiniGridEnv, list[dict[str, Any]]]:
    """Replay the episode; return the env (traced) and, per env step, its step info."""
    executed = executed_from_steps(record)
    if executed is not None:  # exact: the atomic actions the env executed, step by step
        env = TextMiniGridEnv(max_actions=UNCAPPED, requeries=0, trace=True,
                              max_steps=env_options(record).get("max_steps", MAX_STEPS))
        env.reset(task)
        for names in executed:
            if names and not env.done:
                env.step(",".join(names))  # the no-op's label is unparsable: a no-op again
        return env, [s["info"] for s in record["steps"]]
    env = TextMiniGridEnv(**env_options(record))
    env.reset(task)
    infos = []
    for action in record.get("actions", []):
        if env.done:
            break
        infos.append(env.step(action).info)
    return env, infos
