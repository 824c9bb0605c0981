"""The four few-shot demonstrations of docs/methods/envs.md#textminigrid, built from bot play.

Scenarios (Appendix B): unblocking an object, unblocking (opening) a door, opening a locked door,
and exploration (leaving the start room). Following the recommended format [D], they come from
2×2-room, medium-density layouts with seeds from 1000 upwards (never test seeds): the BabyAI bot
plays the layout, the first decision-sized window of its actions (at most m, placed around the
event) in which a scenario occurs becomes one example, with a hand-written intention per
scenario. Each example shows the observation, facing and carrying before the window, the reply
with ``<actions>``/``<intentions>``, and the resulting observation, in the run's representation.
Decision: one decision step per example (the method allows 1–3).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from clew.envs.base import Task
from clew.envs.textminigrid.bot import solve_layout
from clew.envs.textminigrid.layout import generate_layout

FEWSHOT_SEEDS = range(1000, 1100)
SCENARIOS = {
    "unblock_object": ("unblocking an object",
                       "An object blocks my way; pick it up and put it down off my path"),
    "unblock_door": ("unblocking a door", "Open the closed door to explore the area behind it"),
    "locked_door": ("opening a locked door",
                    "Use the key of the same color to unlock the locked door"),
    "exploration": ("exploration",
                    "The target is not in this room; leave it through the open door to explore"),
}


@dataclass(frozen=True)
class Example:
    scenario: str
    mission: str
    before: str  # observation, facing, carrying
    actions: tuple[str, ...]
    after: str


def _events(env, actions: list[str]) -> dict[str, int]:
    """Index of the first action of each scenario along the bot's trajectory."""
    level, found = env.level, {}
    start_room = level.room_from_pos(*level.agent_pos)
    targets = env._targets()
    lock_colors = {d.color for d in env.layout.doors if d.locked}
    for i, name in enumerate(actions):
        front = level.grid.get(*level.front_pos)
        blocker = (front is not None and front.type != "door" and all(front is not t for t in targets)
                   and not (front.type == "key" and front.color in lock_colors))
        if name == "Pick Up" and blocker:
            found.setdefault("unblock_object", i)
        if name == "Toggle" and front is not None and front.type == "door" and not front.is_open:
            found.setdefault("locked_door" if front.is_locked else "unblock_door", i)
        env.step(name)
        if name == "Go Forward" and level.room_from_pos(*level.agent_pos) is not start_room:
            found.setdefault("exploration", i)
    return found


def _state_text(env) -> str:
    obs = env.observation().info
    return f"{obs['view']}\nYou are facing {obs['direction']}.\nYou are carrying {obs['inventory']}."


@lru_cache(maxsize=16)
def build_examples(env_class: type, representation: str, max_actions: int
                   ) -> tuple[Example, ...]:
    """One example per scenario, from the first few-shot seeds where each occurs, played by
    ``env_class`` (the TextMiniGrid env, which asks for them: it is not imported here)."""
    examples: dict[str, Example] = {}
    for seed in FEWSHOT_SEEDS:
        layout = generate_layout(2, 3, seed)
        run = solve_layout(layout)
        if not run.success:
            continue
        task = Task("textminigrid", {"layout": layout.to_dict()}, seed=seed)
        scout = env_class(representation, max_actions=1)
        scout.reset(task)
        for scenario, index in _events(scout, run.actions).items():
            if scenario in examples:
                continue
            start = max(0, index - (max_actions - 1) // 2)
            window = run.actions[start:start + max_actions]
            env = env_class(representation, max_actions=max_actions)
            env.reset(task)
            for name in run.actions[:start]:
                env.step(name)
            before = _state_text(env)
            env.step(",".join(window))
            examples[scenario] = Example(scenario, env.level.mission, before, tuple(window),
                                         _state_text(env))
        if len(examples) == len(SCENARIOS):
            break
    return tuple(examples[s] for s in SCENARIOS if s in examples)


def examples_text(env_class: type, representation: str, max_actions: int) -> str:
    """The examples block appended to the system prompt after the Strategic Guide."""
    lines = ["Examples (from another layout; they show the reply format and useful behaviour):"]
    for i, ex in enumerate(build_examples(env_class, representation, max_actions), 1):
        title, intention = SCENARIOS[ex.scenario]
        lines += [
            f"Example {i}: {title}.", f"Mission: {ex.mission}.", "Observation:", ex.before,
            f"<actions>{','.join(ex.actions)}</actions><intentions>{intention}</intentions>",
            "Resulting observation:", ex.after, "",
        ]
    return "\n".join(lines).rstrip()
