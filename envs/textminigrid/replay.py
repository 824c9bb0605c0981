"""Replaying a TextMiniGrid episode record, for its metrics and its trace.

When the record carries per-step ``info["executed"]`` (the runner stores the env's step info),
the executed atomic actions are replayed exactly; otherwise the decision texts are replayed
through the env with ``record["env_options"]`` when present, and with no cap on actions per step
when m is unknown (trajectories scored with ``clew score`` are taken as executed).

Runner steps (:class:`clew.envs.trace.Replay`): a ``backtrack S<k>`` the runner accepted
restores state S<k> (world and episode state) and costs one atomic step of the clock; a refused
one, or a reply with no action, costs the step and changes nothing else. The env's state after
a backtrack has forgotten the abandoned branch, but the agent has not: :class:`Seen` keeps, over
the whole replay, the cells seen, the cells stood on in order, when the target was first seen
and the boxes destroyed (the metric pages say how a backtrack counts).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from clew.envs.base import Task
from clew.envs.textminigrid.env import TextMiniGridEnv
from clew.envs.textminigrid.layout import MAX_STEPS
from clew.envs.trace import RecordStep, Replay, classify, step_infos

#: m when the record does not say: any number of actions per decision step
UNCAPPED = 10**6


@dataclass
class Seen:
    """What the agent met over the whole replay, backtracks notwithstanding."""

    cells_seen: set[tuple[int, int]] = field(default_factory=set)
    path: list[tuple[int, int]] = field(default_factory=list)  # cells stood on, in order
    first_sight: int | None = None
    boxes_destroyed: int = 0

    @property
    def moves(self) -> int:
        """Changes of cell along ``path``: moves, and backtracks to another cell."""
        return sum(a != b for a, b in zip(self.path, self.path[1:]))

    def start(self, env: TextMiniGridEnv) -> None:
        self.cells_seen |= env.state.seen
        self.path.append(_cell(env))
        self.first_sight = env.state.target_first_seen

    def after(self, env: TextMiniGridEnv, info: dict[str, Any], before: tuple[int, int]) -> None:
        """Take in one replayed step; ``before``: the state's (poses, boxes destroyed) before."""
        st = env.state
        self.cells_seen |= st.seen
        if "backtrack" in info:
            self.path.append(_cell(env))
        else:
            self.path.extend((int(p[0]), int(p[1])) for p in st.poses[before[0]:])
            self.boxes_destroyed += max(0, st.boxes_destroyed - before[1])
        if self.first_sight is None:
            self.first_sight = st.target_first_seen


def _cell(env: TextMiniGridEnv) -> tuple[int, int]:
    return int(env.level.agent_pos[0]), int(env.level.agent_pos[1])


def env_options(record: dict[str, Any]) -> dict[str, Any]:
    """The record's env options that TextMiniGridEnv takes, uncapped m by default, traced."""
    allowed = set(inspect.signature(TextMiniGridEnv.__init__).parameters) - {"self"}
    opts = {k: v for k, v in (record.get("env_options") or {}).items() if k in allowed}
    opts.setdefault("max_actions", UNCAPPED)
    return {**opts, "trace": True}


def executed_from_steps(record: dict[str, Any]) -> list[list[str]] | None:
    """The atomic actions each decision step executed, when every step's info says so (a
    runner step, which executes nothing, has an empty list)."""
    steps = record.get("steps")
    if not isinstance(steps, list) or not steps:
        return None
    out = []
    for s in steps:
        info = s.get("info") if isinstance(s, dict) else None
        if not isinstance(info, dict):
            return None
        if "executed" not in info:
            if not _runner_info(info):
                return None
            out.append([])
            continue
        out.append(list(info["executed"]))
    return out


def _runner_info(info: dict[str, Any]) -> bool:
    return "backtrack" in info or "backtrack_error" in info or bool(info.get("no_action"))


def record_steps(record: dict[str, Any]) -> list[RecordStep]:
    actions = [str(a) for a in record.get("actions", [])]
    return classify(actions, step_infos(record, len(actions)))


def decisions(task: Task, record: dict[str, Any]) -> list[tuple[RecordStep, list[str], bool]]:
    """Per step of the episode: the step as the runner executed it (runner steps with their
    outcome in ``info``), the atomic actions it executed and whether it was valid (a valid
    forward step creates the next state id)."""
    executed = executed_from_steps(record)
    if executed is not None:
        steps = classify([str(s.get("action", "")) for s in record["steps"]],
                         [s["info"] for s in record["steps"]])
        return [(step, names, bool(s.get("valid")))
                for step, names, s in zip(steps, executed, record["steps"])]
    log: list[tuple[RecordStep, list[str], bool]] = []
    replay(task, record, log=log)
    return log


def replay(task: Task, record: dict[str, Any], seen: Seen | None = None,
           log: list[tuple[RecordStep, list[str], bool]] | None = None,
           ) -> tuple[TextMiniGridEnv, list[dict[str, Any]]]:
    """Replay the episode; return the env (traced) and, per step, its step info (a runner
    step's: ``backtrack``, ``backtrack_error`` or ``no_action``). ``seen``, when given, is
    filled over the whole replay; ``log`` receives the :func:`decisions` entries."""
    executed = executed_from_steps(record)
    if executed is not None:  # exact: the atomic actions the env executed, step by step
        env = TextMiniGridEnv(max_actions=UNCAPPED, requeries=0, trace=True,
                              max_steps=env_options(record).get("max_steps", MAX_STEPS))
        steps = classify([str(s.get("action", "")) for s in record["steps"]],
                         [s["info"] for s in record["steps"]])
    else:
        env = TextMiniGridEnv(**env_options(record))
        steps = record_steps(record)
    env.reset(task)
    runner = Replay(env, steps)
    if seen is not None:
        seen.start(env)
    infos = []
    for i, step in enumerate(steps):
        if env.done:
            if executed is None:
                break
            infos.append(dict(step.info))  # the record's own steps, kept as recorded
            continue
        before = len(env.state.poses), env.state.boxes_destroyed
        if step.kind != "env":
            result = runner.runner_step(step)
            info, valid = dict(result.info), result.valid
            done = RecordStep(step.action, info, step.kind, info.get("backtrack"),
                              not valid and step.kind == "backtrack", True)
        elif executed is not None:
            names = executed[i]
            if names:  # the no-op's label is unparsable: a no-op again
                env.step(",".join(names))
            valid = bool(record["steps"][i].get("valid"))
            runner.forward(valid)
            info, done = dict(step.info), step
        else:
            result = runner.step(step)
            info, valid, done = dict(result.info), result.valid, step
        infos.append(info)
        if log is not None:
            log.append((done, list(info.get("executed", [])), valid))
        if seen is not None:
            seen.after(env, info, before)
    return env, infos
