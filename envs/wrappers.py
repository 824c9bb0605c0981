"""The episode rules, written once, as a wrapper any env gets (Gymnasium's ``TimeLimit`` spirit).

Three rules cut an episode short; each is *truncation* (the task did not end it), reported on
the :class:`~clew.envs.base.Step` as ``truncated=True`` and ``truncated_by`` naming the rule:

* ``max_steps``: the step limit of the run;
* ``invalid_streak``: ``max_invalid_streak`` invalid actions in a row, as the env declares it
  (``Env.max_invalid_streak``: 3 by default, ``None`` for envs whose own rules say how invalid
  actions count);
* ``repeated_action``: the same action (by ``env.canonical``) ``REPEAT_LIMIT`` times in a row,
  for envs whose ``flags.repeat_rule_applies``.

The run config may override the last two (``None``: as the env declares; ``0``: off). The runner
wraps the real env; ``Episode.simulator()`` copies the wrapped env, so a search tree's simulator
follows the same rules from the same history: its horizon is the runner's limit minus the steps
already taken. The wrapper's counters are part of its snapshot; ``restore(..., keep_clock=True)``
(a backtrack) brings the world back but not the counters, as it keeps the env's step clock.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from clew.envs.base import Env, Observation, Step, Task

REPEAT_LIMIT = 5


@dataclass(frozen=True)
class RulesState:
    """What the rules have counted so far in an episode."""

    steps: int = 0
    invalid_streak: int = 0
    recent: tuple[str, ...] = ()      # canonical keys of the last actions, newest last


class EpisodeRules:
    """``env`` with the episode rules; everything else is the env's own (attribute access falls
    through to it)."""

    def __init__(self, env: Env, max_steps: int | None = None,
                 max_invalid_streak: int | None = None, repeat_limit: int | None = None):
        self.env = env
        self.max_steps = max_steps
        self.max_invalid_streak = (env.max_invalid_streak if max_invalid_streak is None
                                   else max_invalid_streak or None)
        declared = REPEAT_LIMIT if env.flags.repeat_rule_applies else None
        self.repeat_limit = declared if repeat_limit is None else repeat_limit or None
        self.rules = RulesState()

    @property
    def unwrapped(self) -> Env:
        return self.env

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    # --- the rules -------------------------------------------------------------------------
    @property
    def truncated_by(self) -> str | None:
        """The rule that ends the episode now, or ``None``."""
        r = self.rules
        if self.max_steps is not None and r.steps >= self.max_steps:
            return "max_steps"
        if self.max_invalid_streak and r.invalid_streak >= self.max_invalid_streak:
            return "invalid_streak"
        if self.repeat_limit and len(r.recent) >= self.repeat_limit and \
                len(set(r.recent[-self.repeat_limit:])) == 1:
            return "repeated_action"
        return None

    def account(self, action: str, step: Step) -> Step:
        """Count one step (made by ``step`` or by the runner itself, e.g. a backtrack) and return
        it with its truncation."""
        r = self.rules
        keep = max(self.repeat_limit or 0, 1)
        self.rules = RulesState(steps=r.steps + 1,
                                invalid_streak=0 if step.valid else r.invalid_streak + 1,
                                recent=(*r.recent, self.env.canonical(action))[-keep:])
        by = self.truncated_by
        return replace(step, truncated=by is not None, truncated_by=by)

    # --- the env interface -----------------------------------------------------------------
    def reset(self, task: Task) -> Observation:
        self.rules = RulesState()
        return self.env.reset(task)

    def step(self, action: str) -> Step:
        return self.account(action, self.env.step(action))

    def snapshot(self) -> Any:
        return self.env.snapshot(), self.rules

    def restore(self, snap: Any, keep_clock: bool = False) -> None:
        env_snap, rules = snap
        self.env.restore(env_snap, keep_clock=keep_clock)
        if not keep_clock:
            self.rules = rules

    def copy(self) -> EpisodeRules:
        other = EpisodeRules(self.env.copy(), self.max_steps)
        other.max_invalid_streak, other.repeat_limit = self.max_invalid_streak, self.repeat_limit
        other.rules = self.rules
        return other
