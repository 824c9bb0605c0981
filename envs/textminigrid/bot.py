"""The BabyAI bot as oracle: solution length L* and behavioural difficulty (docs/methods/metric-textminigrid.md#behavioral-difficulty).

``minigrid.utils.baby_ai_bot.BabyAIBot`` plans with its own partial map, so L* includes the bot's
exploration. It reads the level it is given and must start on a fresh level (or a deep copy of
one); it never steps the level itself: we loop ``a = bot.replan(); level.step(a)``.

Failures are data, not crashes: the bot raises now and then (an ``AssertionError`` inside its
planner, ``DisappearedBoxError`` when a box vanished, ~1% of generated tasks), may
give up (it answers ``done`` with an empty plan) or may need more than the 200-step budget.
:class:`BotRun` records which happened; the suite replaces such seeds (docs/methods/metric-textminigrid.md#behavioral-difficulty).

Difficulty levels use the method page's calibrated fixed thresholds: easy L* ≤ 6, medium 7–13,
hard 14–45, super-hard ≥ 46.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from clew.envs.textminigrid.layout import MAX_STEPS, Layout, build_level
from minigrid.core.actions import Actions
from minigrid.envs.babyai.core.roomgrid_level import RoomGridLevel
from minigrid.utils.baby_ai_bot import BabyAIBot

LEVELS = ("easy", "medium", "hard", "super-hard")
THRESHOLDS = (6, 13, 45)  # upper bounds of easy, medium, hard

# MiniGrid action ids -> canonical prompt names (docs/methods/envs.md#textminigrid)
ACTION_NAMES = {
    Actions.left: "Turn Left", Actions.right: "Turn Right", Actions.forward: "Go Forward",
    Actions.pickup: "Pick Up", Actions.drop: "Drop", Actions.toggle: "Toggle",
}


def difficulty(solution_length: int | None) -> str | None:
    """Behavioural-difficulty level of an oracle solution length (None when the bot failed)."""
    if solution_length is None:
        return None
    for level, bound in zip(LEVELS, THRESHOLDS):
        if solution_length <= bound:
            return level
    return LEVELS[-1]


@dataclass
class BotRun:
    """What the bot did from one state: its actions and whether they solved the mission."""

    actions: list[str] = field(default_factory=list)
    success: bool = False
    failure: str | None = None  # "exception: ...", "gave up", "step limit"

    @property
    def length(self) -> int | None:
        """L*: atomic actions to success, or None if the bot did not succeed."""
        return len(self.actions) if self.success else None


def run_bot(level: RoomGridLevel, max_steps: int = MAX_STEPS, in_place: bool = False) -> BotRun:
    """Let the bot play ``level`` from its current state until success or ``max_steps`` actions.

    The level is deep-copied unless ``in_place``; a fresh bot starts with an empty map, so from a
    mid-episode state its plan includes re-exploring what it has not seen itself.
    """
    env = level if in_place else copy.deepcopy(level)
    env.max_steps = 10**9  # our own budget below; MiniGrid's truncation would stop early
    run = BotRun()
    try:
        bot = BabyAIBot(env)
        while len(run.actions) < max_steps:
            action = bot.replan()
            if action == Actions.done:
                run.failure = "gave up"
                return run
            _, reward, terminated, _, _ = env.step(action)
            run.actions.append(ACTION_NAMES[Actions(action)])
            if terminated:
                run.success = reward > 0
                if not run.success:
                    run.failure = "mission failed"
                return run
        run.failure = "step limit"
    except Exception as exc:  # noqa: BLE001 - any bot error is a recorded failure, never raised
        run.failure = f"exception: {type(exc).__name__}: {exc}"
    return run


def solve_layout(layout: Layout, max_steps: int = MAX_STEPS) -> BotRun:
    """The bot on a fresh level built from ``layout`` (L* of docs/methods/metric-textminigrid.md#behavioral-difficulty)."""
    return run_bot(build_level(layout), max_steps=max_steps, in_place=True)
