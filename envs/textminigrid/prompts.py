"""TextMiniGrid prompts: the system prompt components and the user prompt (docs/methods/envs.md#textminigrid).

System prompt (docs/methods/envs.md#textminigrid): an intro line and the Observation Description are always present; the
Action Description, Mission Description and Strategic Guide are switched by the prompt
``variant``, a ``+``-joined set of component names:

* ``default`` (= ``full``) = ``action+mission+strategy``;
* ``obs`` = observation description only; any subset such as ``action+strategy``;
* add ``fewshot`` for the four demonstrations of docs/methods/envs.md#textminigrid (see :mod:`.fewshot`).

:data:`ABLATION_VARIANTS` lists the 2³ = 8 combinations of the Appendix D.1 ablation (docs/methods/envs.md#textminigrid).
All prose is paraphrased from the paper; format literals (labels, tags, tokens) are exact (docs/methods/envs.md#textminigrid).
Decision: the SD and Hybrid observation descriptions are the method page's replacements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from clew.envs.textminigrid.render import REPRESENTATIONS

COMPONENTS = ("action", "mission", "strategy")
THINK_LINE = "Take a deep breath and work on this problem step-by-step."  # OPRO

ABLATION_VARIANTS: tuple[str, ...] = tuple(
    "+".join(("obs",) + combo) for r in range(len(COMPONENTS) + 1)
    for combo in combinations(COMPONENTS, r)
)

INTRO = (
    "You are an agent exploring a grid world. Your job is to accomplish the missions you are "
    "given by choosing actions."
)

OBS_SC = """\
Observation description:
- You receive a partial view of the world: a 7x7 grid of cells in front of you. Each cell is written with 2 characters: first its color, then its type.
- A cell is empty (EM), a wall (WW), or holds an object.
- Color letters: R red, G green, B blue, P purple, Y yellow, E grey.
- Type letters: K key, D closed unlocked door, L closed locked door, A ball, B box. An open door is written __ (no color).
- You are II. Which way you face (North, East, South or West) is given separately as text. The grid is drawn with North at the top.
- Only cells inside the 7x7 square in front of you can be revealed. Walls and closed doors block your view; other objects do not.
- XX marks cells you cannot see (or reach) from where you stand.
- Each row is one line; every cell is followed by ';'."""

OBS_HYBRID = """\
Observation description:
- You receive a partial view of the world: a 7x7 grid of cells in front of you. Each cell holds a readable name, written Color_Type for objects (for example Red_Box).
- Cell names: Empty, Wall, Unseen (a cell you cannot see), Agent (you), <Color>_Key, <Color>_Ball, <Color>_Box, <Color>_Closed_Door (closed, unlocked), <Color>_Locked_Door (closed, locked), Open_Door.
- Colors: Red, Green, Blue, Purple, Yellow, Grey.
- Which way you face (North, East, South or West) is given separately as text. The grid is drawn with North at the top.
- Only cells inside the 7x7 square in front of you can be revealed. Walls and closed doors block your view; other objects do not.
- Each row is one line; every cell is followed by ';'."""

OBS_SD = """\
Observation description:
- You receive a list of sentences, one per visible wall, door or object, such as "You see a red ball 2 steps left and 1 step forward."
- Positions are counted in steps left or right and steps forward, relative to the direction you are facing now.
- Empty cells are not listed. Doors are described as open, closed or locked.
- You can see the 7x7 area in front of you. Walls and closed doors block your view; other objects do not.
- Which way you face (North, East, South or West) is given separately as text."""

ACTION_DESCRIPTION = """\
Action description:
- The actions are: Turn Left, Turn Right, Go Forward, Pick Up, Drop, Toggle.
- Turn Left and Turn Right rotate you by 90 degrees.
- Go Forward moves you one cell in the direction you face, only into an empty cell or an open door.
- Pick Up takes the object in the cell in front of you.
- Drop puts the object you carry into the cell in front of you, which must be empty.
- Toggle switches the state of the door in front of you. An unlocked door opens without a key; a locked door opens only if you hold a key of the same color.
- You can carry only one object. To take another one, drop the one you carry first."""

MISSION_DESCRIPTION = """\
Mission description (objects are identified by color and type):
1. Go to an object: stand in a cell next to it and face it.
2. Pick up an object: stand next to it, face it and pick it up.
3. Open a door: stand next to it, face it and toggle it. If it is locked, first find and pick up the key of the same color, then come back and toggle.
4. Put an object next to another: pick up the first object, go near the second one, and drop the first object in a cell adjacent to the second."""

STRATEGIC_GUIDE = """\
Strategic guide:
1. The grid is only partly visible, so explore. Closed doors lead to new areas and new objects.
2. A locked door needs the key of the same color. Doors open up new areas, so finding such keys is a priority.
3. A door blocked by an object can be freed by picking that object up. If the blocked door is also locked, first move the blocker somewhere off your path, then fetch the key, unlock the door, and then deal with the blocker again (you can hold only one object at a time).
4. For a pick-up mission, success happens at the moment of pickup. The object can be dropped afterwards.
5. The world is static: objects move only when you move them.
6. After picking up a blocker you may drop it, but not somewhere on your own route.
7. If you must pick up a blocker while already holding something, first drop what you hold somewhere off your route.
8. When you find a locked door, look for the key of its color."""

OBSERVATION_DESCRIPTIONS = {"sc": OBS_SC, "sd": OBS_SD, "hybrid": OBS_HYBRID}


@dataclass(frozen=True)
class PromptVariant:
    """Which system prompt components are on (docs/methods/envs.md#textminigrid, docs/methods/envs.md#textminigrid)."""

    action: bool = True
    mission: bool = True
    strategy: bool = True
    fewshot: bool = False

    @classmethod
    def parse(cls, variant: str) -> PromptVariant:
        text = (variant or "default").strip().lower()
        tokens = [t.strip() for t in text.split("+") if t.strip()]
        on: set[str] = set()
        fewshot = False
        for tok in tokens:
            if tok in ("default", "full"):
                on.update(COMPONENTS)
            elif tok in COMPONENTS:
                on.add(tok)
            elif tok == "fewshot":
                fewshot = True
            elif tok != "obs":
                raise ValueError(
                    f"textminigrid prompt variant {variant!r}: unknown component {tok!r}; use "
                    f"'default', 'obs', 'fewshot' or a '+'-joined subset of {', '.join(COMPONENTS)}")
        if tokens == ["fewshot"]:
            on.update(COMPONENTS)
        return cls("action" in on, "mission" in on, "strategy" in on, fewshot)


def system_prompt(representation: str, variant: str = "default", examples: str | None = None) -> str:
    """The system prompt for one observation format and prompt variant (docs/methods/envs.md#textminigrid)."""
    if representation not in OBSERVATION_DESCRIPTIONS:
        raise ValueError(f"textminigrid: unknown representation {representation!r}; "
                         f"choose one of {', '.join(REPRESENTATIONS)}")
    v = PromptVariant.parse(variant)
    parts = [INTRO, OBSERVATION_DESCRIPTIONS[representation]]
    if v.action:
        parts.append(ACTION_DESCRIPTION)
    if v.mission:
        parts.append(MISSION_DESCRIPTION)
    if v.strategy:
        parts.append(STRATEGIC_GUIDE)
    if v.fewshot and examples:
        parts.append(examples)
    return "\n\n".join(parts)


@dataclass(frozen=True)
class Transition:
    """One executed atomic action and what followed it (docs/methods/envs.md#textminigrid)."""

    action: str
    observation: str
    direction: str
    inventory: str


def instruction_block(max_actions: int) -> str:
    s = "" if max_actions == 1 else "s"
    return (
        "Based on the observation and the information above, choose the actions to take.\n"
        f"You may take at most {max_actions} action{s} in this turn.\n"
        "Write the actions between <actions> and </actions>, separated by ',' without whitespace.\n"
        "For example, to turn left, go forward and then pick up the object in front of you, write "
        "<actions>Turn Left,Go Forward,Pick Up</actions>.\n"
        "Also write the intention behind your actions between <intentions> and </intentions>.\n"
        "For example: <intentions>Explore the left side of the grid</intentions>."
    )


def answer_notation(max_actions: int) -> str:
    """How one decision is written, for roles that put it inside their own reply format."""
    s = "" if max_actions == 1 else "s"
    return (f"up to {max_actions} action{s} between <actions> and </actions>, separated by ',' "
            "without whitespace, e.g. <actions>Turn Left,Go Forward</actions>")


def without_instructions(text: str, max_actions: int) -> str:
    """A user prompt without its instruction block and thinking line (what the env asks of the
    reply), for roles with a reply format of their own (Env.neutral_observation)."""
    for block in (f"\n{instruction_block(max_actions)}", f"\n{THINK_LINE}"):
        text = text.replace(block, "")
    return text


def transitions_block(transitions: Sequence[Transition]) -> str:
    lines = ["Here are the results of the actions you just executed:"]
    for i, tr in enumerate(transitions):
        lines += [f"Action{i}: {tr.action}", f"Observation{i}:", tr.observation,
                  f"Direction{i}:{tr.direction}", f"Inventory{i}:{tr.inventory}"]
    return "\n".join(lines)


def user_prompt(
    mission: str,
    transitions: Sequence[Transition],
    observation: str,
    direction: str,
    inventory: str,
    max_actions: int,
    think: bool = False,
    memory: str | None = None,
) -> str:
    """The user prompt of docs/methods/envs.md#textminigrid (``memory``: the optional text block of docs/methods/envs.md#textminigrid's alternative)."""
    parts = [f"Your final mission is to {mission}.\nYou have no subgoals."]
    if memory:
        parts.append(memory)
    if transitions:
        parts.append(transitions_block(transitions))
    parts.append(f"Your current observation:\n{observation}\n"
                 f"You are facing {direction}.\nYou are carrying {inventory}.")
    parts.append(instruction_block(max_actions))
    if think:
        parts.append(THINK_LINE)
    return "\n".join(parts)


def memory_block(entries: Sequence[tuple[str, str, str | None]]) -> str:
    """docs/methods/envs.md#textminigrid alternative: the last q decision steps as (starting observation, actions, intention)."""
    lines = ["Your previous decision steps (oldest first):"]
    for i, (obs, actions, intention) in enumerate(entries):
        lines += [f"Step{i} observation:", obs, f"Step{i} actions: {actions}",
                  f"Step{i} intention: {intention or '(none)'}"]
    return "\n".join(lines)


def build_messages(system: str, history: Sequence[dict[str, str]], user: str) -> list[dict[str, str]]:
    """Chat messages of docs/methods/envs.md#textminigrid: system, the last q (user, assistant) pairs, the current user turn."""
    return [{"role": "system", "content": system}, *history, {"role": "user", "content": user}]
