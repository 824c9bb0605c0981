"""What a family gives the metrics that travel: one replayed episode, summarised (a Trace).

Coverage, redundancy and the optimal-exploitation gap decomposition have one meaning everywhere
but a different definition per family (docs/methods/metric-travel.md): what the "state space"
is, what counts as returning to a known state, what a perfect exploiter could have done with
what the agent knew. Each family answers those questions in a trace function,
``trace(task, episode) -> Trace``, in its own folder (``clew.envs.gridmap.trace``, ...), named
by its registry entry (:class:`clew.envs.registry.EnvEntry`). ``clew.metrics.travel`` turns
a trace into the reported keys; a new family with a trace gets those metrics with no change
there.

The type lives here, in ``envs``, because envs may not import ``eval`` (the layering of
docs/architecture.md) while eval reads what envs return; it is kept out of
:mod:`clew.envs.base` because only families that define these measures need it, not every env.

The ``episode`` a trace reads is an episode record as ``episodes.jsonl`` holds it, or as
``clew score`` builds it: ``actions`` (list of strings; required), and when present ``steps``
(each with the env's step ``info``) and ``env_options`` (the env's constructor options). A
trace replays the actions on a fresh env of the task, so it scores trajectories produced
anywhere.

Runner steps (runner/episodes.py): a ``backtrack S<k>`` decision and a reply with no action are
carried out by the runner, not by ``env.step``; each costs one step of the env clock
(docs/methods/exploratory-learning.md#backtrack-turns), and a backtrack restores state S<k> of
the current path. Every replay of a record reads its steps with :func:`record_steps` and steps
the env with :class:`Replay`, which does what the runner did: ``step.info["backtrack"]`` /
``["backtrack_error"]`` / ``["no_action"]`` say so when the record has step infos; a record of
bare action strings (``clew score``) has its ``backtrack S<k>`` strings read by
:func:`parse_backtrack` (the parser the distilled agent uses too). State ids are the runner's
(:class:`StatePath`): S0 is the initial state, every valid forward step creates the next id, a
backtrack cuts the path back to an earlier id. How a backtrack counts in each metric is on the
metric's page (docs/methods/metric-*.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from clew.envs.base import Env, Observation, Step, Task

NAN = math.nan


@dataclass
class Trace:
    """One episode as the metrics that travel need it. A value a family cannot define is NaN,
    and the family's trace docstring says why (e.g. the gap of non-PickUp TextMiniGrid
    missions); NaN is reported as "undefined", never as 0.

    * ``coverage`` in [0, 1]: the share of a finite state (or query) space the agent reached.
    * ``redundancy`` in [0, 1] = ``repeats`` / ``steps``: the share of counted steps that led
      back to something already reached (NaN when no step counted).
    * ``rmax`` (R^max: the best return with full knowledge), ``agent`` (R^agent, the return
      obtained) and ``exploit`` (R^exploit: the best return a perfect exploiter could get from
      what the agent knew); ``exploitable_at``: the first decision point at which that return
      was within reach (NaN if never).
    """

    coverage: float
    redundancy: float
    repeats: int
    steps: int
    rmax: float
    agent: float
    exploit: float
    exploitable_at: float = NAN


def record_actions(task: Task, episode: Mapping[str, Any]) -> list[str]:
    """The actions of an episode record (``actions``, else each step's ``action``)."""
    actions = episode.get("actions")
    if actions is None and isinstance(episode.get("steps"), list):
        actions = [s.get("action") for s in episode["steps"]]
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise ValueError(f"travel metrics: the episode of task {task.id!r} needs 'actions', "
                         "a list of strings")
    return actions


def ratio(num: int, den: int) -> float:
    """``num / den``, NaN when nothing was counted."""
    return num / den if den else NAN


# --- runner steps: backtracks and replies without an action -----------------------------------
BACKTRACK_RE = re.compile(r"^\s*backtrack(?:\s+S?(\d+))?\s*$", re.IGNORECASE)


def parse_backtrack(action: str | None) -> tuple[bool, int | None]:
    """``(is_backtrack, target)``: ``backtrack S3`` -> (True, 3); bare ``backtrack`` -> (True,
    None); anything else -> (False, None)."""
    if action is None:
        return False, None
    m = BACKTRACK_RE.match(action)
    if not m:
        return False, None
    return True, (int(m.group(1)) if m.group(1) is not None else None)


@dataclass(frozen=True)
class RecordStep:
    """One step of an episode record, as the runner executed it.

    ``kind``: ``env`` (the action went to ``env.step``), ``backtrack`` or ``no_action`` (runner
    steps). ``target``: the state id a backtrack asked for (None: a bare ``backtrack``, or one
    the agent could not resolve). ``failed``: the record says the runner refused the backtrack.
    ``known``: the kind comes from the record's step info (else from the action string).
    """

    action: str
    info: Mapping[str, Any] = field(default_factory=dict)
    kind: Literal["env", "backtrack", "no_action"] = "env"
    target: int | None = None
    failed: bool = False
    known: bool = False


def classify(actions: Sequence[str], infos: Sequence[Any] | None = None) -> list[RecordStep]:
    """The steps of ``actions``; ``infos`` (one recorded step info per action, when the record
    has them) say which were runner steps, else ``backtrack S<k>`` strings are backtracks."""
    out = []
    for i, action in enumerate(actions):
        info = infos[i] if infos is not None and isinstance(infos[i], Mapping) else None
        if info is not None:
            if "backtrack" in info or "backtrack_error" in info:
                target = info.get("backtrack")
                try:
                    target = None if target is None else int(target)
                except (TypeError, ValueError):
                    target = None
                out.append(RecordStep(action, info, "backtrack", target,
                                      "backtrack_error" in info, True))
            elif info.get("no_action"):
                out.append(RecordStep(action, info, "no_action", known=True))
            else:
                out.append(RecordStep(action, info, known=True))
            continue
        is_back, target = parse_backtrack(action)
        out.append(RecordStep(action, {}, "backtrack", target) if is_back
                   else RecordStep(action))
    return out


def record_steps(task: Task, episode: Mapping[str, Any]) -> list[RecordStep]:
    """The steps of an episode record: its actions (:func:`record_actions`) with each step's
    recorded info when ``steps`` holds one per action."""
    actions = record_actions(task, episode)
    return classify(actions, step_infos(episode, len(actions)))


def step_infos(episode: Mapping[str, Any], n: int) -> list[Mapping[str, Any]] | None:
    """Each step's recorded ``info`` when the record's ``steps`` hold one for each of its ``n``
    actions, else None."""
    steps = episode.get("steps")
    if isinstance(steps, list) and len(steps) == n and all(
            isinstance(s, Mapping) and isinstance(s.get("info"), Mapping) for s in steps):
        return [s["info"] for s in steps]
    return None


class StatePath:
    """The runner's state ids (runner/episodes.py): S0 is the initial state, every valid forward
    step creates the next id (ids are never reused), a backtrack cuts the path back to an
    earlier id on it."""

    def __init__(self) -> None:
        self.path: list[int] = [0]
        self.next_id = 1

    @property
    def current(self) -> int:
        return self.path[-1]

    def forward(self) -> int:
        sid = self.next_id
        self.path.append(sid)
        self.next_id += 1
        return sid

    def resolve(self, step: RecordStep, supports_backtrack: bool = True) -> int | None:
        """The state id a backtrack step returns to, or None when the runner refused it (not an
        earlier state on the path, or no backtrack in this env). A bare ``backtrack`` string
        means the state before the current one (agents/distilled.py)."""
        if step.failed or not supports_backtrack:
            return None
        k = step.target
        if k is None and not step.known and len(self.path) > 1:
            k = self.path[-2]
        if k is None or k not in self.path[:-1]:
            if step.known:
                raise ValueError(f"the record's backtrack to S{k} does not replay: not an "
                                 f"earlier state on the replayed path {self.path}")
            return None
        return k

    def cut(self, k: int) -> None:
        del self.path[self.path.index(k) + 1:]


class Replay:
    """Steps ``env`` (reset to the task) through an episode's steps as the runner did.

    ``step`` sends an ``env`` step to ``env.step``; a runner step advances the clock by one and,
    for a backtrack the runner accepted, restores the snapshot of its target state with
    ``keep_clock=True``. The env's own state is then that of the target: whatever the replaying
    metric counts as knowledge (cells seen, moves made) it keeps itself. Snapshots are taken only
    when ``steps`` hold a backtrack. ``forward(valid)`` registers a forward step made by other
    means (TextMiniGrid replays atomic actions one by one).
    """

    def __init__(self, env: Env, steps: Sequence[RecordStep] = ()):
        self.env = env
        self.ids = StatePath()
        self.keep = env.flags.supports_backtrack and any(s.kind == "backtrack" for s in steps)
        self.snaps: dict[int, Any] = {0: env.snapshot()} if self.keep else {}
        self.backtracks = 0  # accepted backtracks

    def forward(self, valid: bool) -> None:
        if valid:
            sid = self.ids.forward()
            if self.keep:
                self.snaps[sid] = self.env.snapshot()

    def step(self, step: RecordStep) -> Step:
        if step.kind == "env":
            result = self.env.step(step.action)
            self.forward(result.valid)
            return result
        return self.runner_step(step)

    def runner_step(self, step: RecordStep) -> Step:
        env = self.env
        env.set_clock(env.clock() + 1)
        if step.kind == "no_action":
            return Step(env.observation(), 0.0, env.done, False, {"no_action": True})
        k = self.ids.resolve(step, env.flags.supports_backtrack)
        if k is None or k not in self.snaps:
            return Step(env.observation(), 0.0, env.done, False,
                        {"backtrack_error": f"cannot backtrack to S{step.target}"})
        env.restore(self.snaps[k], keep_clock=True)
        self.ids.cut(k)
        self.backtracks += 1
        obs = env.observation()
        return Step(Observation(obs.text, obs.info), 0.0, env.done, True, {"backtrack": k})
