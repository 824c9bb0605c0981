"""Prompt text of Dark Treasure Rooms (spec_001 §2.7, §3.4).

Three instruction variants, the only part that changes between conditions:

* ``task`` (aliases ``default``, ``task_oriented``): the paper's task-oriented exploration
  sentence, verbatim from its example prompt (Fig. 8, "reward" wording, spec §5 #21);
* ``exploit`` (aliases ``lower_bound``): soft exploration lower bound;
* ``explore`` (aliases ``upper_bound``): soft exploration upper bound.

The two bound sentences are the spec's reconstruction (§3.4, §5 #22), not the paper's text.

:func:`render_prompt` assembles the full single-user-message prompt of §2.7: past episodes,
instruction block, current episode, question. [decision, spec §5 #20] In episode 1 the past
block is the header followed by ``None``.
"""

from __future__ import annotations

from collections.abc import Sequence

SENTENCES = {
    "task": "Based on the current and past trials, explore the environment to collect "
            "information that may help to become better at maximizing the reward.",
    "exploit": "Based on the current and past trials, use what you already know to collect as "
               "much reward as possible in this episode.",
    "explore": "Ignore the reward. Your only goal is to visit rooms and interact with objects "
               "that you have not visited or interacted with in any earlier episode.",
}
ALIASES = {
    "default": "task", "task_oriented": "task", "task-oriented": "task",
    "lower_bound": "exploit", "lower": "exploit", "upper_bound": "explore", "upper": "explore",
}
QUESTION = ("Which object do you want to interact with next?\n"
            "Reply with one object enclosed with < and >, e.g. <door>. "
            "What is your next action?")
#: the reply rule of the env's own prompt, and the notation of one action for clew's roles
REPLY_RULE = "Reply with one object enclosed with < and >, e.g. <door>."
ANSWER_NOTATION = "the full name of one object you see, enclosed with < and >, e.g. <teal door>"
ACTION_HELP = ("Interact with one object you see: going through a door, or picking up a ball, "
               "key or box. Each observation lists the objects you see now.")
_NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def variant_name(variant: str) -> str:
    name = ALIASES.get(variant, variant)
    if name not in SENTENCES:
        known = ", ".join(sorted({*SENTENCES, *ALIASES}))
        raise ValueError(f"rooms: unknown instruction variant {variant!r}; known: {known}")
    return name


def instructions(variant: str = "task", door_budget: int | str = "C",
                 n_episodes: int | str = 20, max_pickups: int = 3) -> str:
    """The instruction block (spec §2.7) with the variant's sentence."""
    pickups = _NUMBERS.get(max_pickups, str(max_pickups))
    return (
        "You are controlling an agent in an unknown world.\n"
        f"Over a total of {n_episodes} episodes, you can interact with objects in the "
        "environment.\n"
        f"You have {door_budget} door interactions per episode but can pick up {pickups} balls, "
        "keys, or boxes.\n"
        + SENTENCES[variant_name(variant)]
    )


def see(objects: Sequence[str]) -> str:
    return "You see: " + ", ".join(objects)


def episode_lines(first: Sequence[str], steps: Sequence[tuple[Sequence[str], str, int,
                                                               Sequence[str]]]) -> list[str]:
    """Transcript of one episode: per step ``You see`` / ``>action`` / ``Reward``, then the
    observation after the last step. ``steps`` holds (seen, action, reward, after)."""
    lines = []
    current = first
    for seen, action, reward, after in steps:
        lines += [see(seen), f">{action}", f"Reward: {reward}"]
        current = after
    lines.append(see(current))
    return lines


def render_prompt(past: Sequence[list[str]], current: list[str] | None, variant: str,
                  door_budget: int, n_episodes: int, max_pickups: int = 3) -> str:
    """The full prompt: ``past`` and ``current`` are :func:`episode_lines` outputs."""
    blocks = []
    if past:
        blocks.append("Your past episodes:")
        for i, lines in enumerate(past, 1):
            blocks.append("\n".join([f"Episode {i}:", *lines]))
    else:
        blocks.append("Your past episodes:\nNone")
    blocks.append(instructions(variant, door_budget, n_episodes, max_pickups))
    if current is not None:
        blocks.append("\n".join(["Current episode:", *current]))
        blocks.append(QUESTION)
    return "\n\n".join(blocks)
