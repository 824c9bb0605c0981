"""System prompts (docs/methods/envs.md#grid-map-with-task-dag) and the structured-memory harness (docs/methods/envs.md#grid-map-with-task-dag) of the grid map.

A prompt set is named by up to three tokens joined by '-' (or '+'): a mode ``default`` |
``reasoning``, a type ``base`` | ``balance`` | ``exploration`` | ``exploitation``, and optionally
``harness``. Examples: ``default`` (= default-base), ``reasoning-balance``, ``default-harness``.
The paper's eight prompt sets are :data:`PROMPT_SETS`.

Decisions taken (docs/methods/metric-explore-exploit-error.md#decisions):

* "default" asks for the JSON object only; "reasoning" asks for a short reasoning passage
  before the JSON object (native thinking is the LM backend's setting, not this text's).
* docs/methods/envs.md#grid-map-with-task-dag harness system prompt = the prompt plus one statement about the per-turn summary.
* the coordinate line states a direction's mapping only after that direction was taken and
  moved the agent. The summary's cell lists use the env's fixed convention.
* known impassable cells: every non-admissible neighbour of a visited cell, including
  coordinates outside the grid (the agent cannot tell a boundary from a wall).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from clew.envs.base import Observation
from clew.envs.gridmap.actions import parse_direction
from clew.envs.gridmap.instance import DIRECTIONS, Cell, Node, prec, step_cell

MODES = ("default", "reasoning")
TYPES = ("base", "balance", "exploration", "exploitation")
PROMPT_SETS = tuple(m if t == "base" else f"{m}-{t}" for m in MODES for t in TYPES)

ENVIRONMENT = (
    "You are steering an agent through a grid world of symbolic states that you can only "
    "partly see. Your goal is to activate the goal state.\n"
    "On every turn you receive your position [x, y], the directions you may legally move, and "
    "any symbolic state found on your current cell. A newly found state may come with its "
    "prerequisites (the states that must be activated before it) and hints about the states it "
    "leads to. A state becomes activated when you stand on its cell and its prerequisites are "
    "satisfied; if you reach it earlier, you must satisfy its prerequisites elsewhere and come "
    "back. Each move uses one step. You cannot see the whole map, the hidden step budget, or "
    "states you have not found yet."
)
_EXPLORE = ("purposely heading to cells you have not visited, roaming to uncover cells and "
            "symbolic states you have not found yet")
_EXPLOIT = ("going first, among the states you have already found, for those whose "
            "prerequisites are already met, taking the shortest available path to activate them")
STRATEGY = {
    "base": "",
    "exploration": f"Strategy: give priority to exploration, that is, {_EXPLORE}.",
    "exploitation": f"Strategy: give priority to exploitation, that is, {_EXPLOIT}.",
    "balance": (f"Exploration means {_EXPLORE}. Exploitation means {_EXPLOIT}. Choose whatever "
                "mix of exploration and exploitation is most likely to finish the task in the "
                "fewest steps."),
}
ACTION_FORMAT = (
    "Answer with exactly one JSON object holding one legal action taken from the available "
    'directions: {"action": "up"}, {"action": "down"}, {"action": "left"} or '
    '{"action": "right"}.'
)
MODE_TEXT = {
    "default": "Reply with the JSON object only.",
    "reasoning": ("First reason briefly about where you are, what you know and what to do next; "
                  "then end your reply with the JSON object."),
}
#: the notation of one action, for roles that put it inside their own reply format
ANSWER_NOTATION = 'a JSON object naming one legal direction, e.g. {"action": "up"}'
ACTION_HELP = ("Moves: up, down, left, right (one cell per move); each observation lists the "
               "moves that are legal there.")
HARNESS_NOTE = (
    "Each turn also brings a summary of the explored map: visited cells, reachable frontier "
    "cells, discovered states, activated states and prerequisite relations."
)


def parse_variant(variant: str) -> tuple[str, str, bool]:
    """(mode, type, harness) of a prompt-set name; unknown tokens are an error naming them."""
    mode, kind, harness = "default", "base", False
    for token in filter(None, re.split(r"[-+_,\s]+", (variant or "default").lower())):
        if token in MODES:
            mode = token
        elif token in TYPES:
            kind = token
        elif token == "harness":
            harness = True
        else:
            raise ValueError(f"gridmap prompt variant {variant!r}: unknown token {token!r}; "
                             f"use a mode ({', '.join(MODES)}), a type ({', '.join(TYPES)}) "
                             "and optionally 'harness'")
    return mode, kind, harness


def task_description(variant: str = "default") -> str:
    """The role-neutral part of the system prompt: environment description and strategy
    sentence, without the reply format (Env.task_description)."""
    _, kind, harness = parse_variant(variant)
    parts = [ENVIRONMENT]
    if harness:
        parts.append(HARNESS_NOTE)
    if STRATEGY[kind]:
        parts.append(STRATEGY[kind])
    return "\n\n".join(parts)


def instructions(variant: str = "default") -> str:
    """System prompt: environment description, strategy sentence, action format (docs/methods/envs.md#grid-map-with-task-dag)."""
    mode, _, _ = parse_variant(variant)
    return f"{task_description(variant)}\n\n{ACTION_FORMAT} {MODE_TEXT[mode]}"


# --- harness (docs/methods/envs.md#grid-map-with-task-dag) ----------------------------------------------------------------------------
def _fmt(cell: Cell) -> str:
    return f"[{cell[0]}, {cell[1]}]"


def _cells(cells: set[Cell]) -> str:
    return ", ".join(_fmt(c) for c in sorted(cells)) if cells else "none"


def harness_summary(observations: Sequence[Observation | dict[str, Any]],
                    actions: Sequence[str] = ()) -> str:
    """The rule-based memory summary of docs/methods/envs.md#grid-map-with-task-dag, built only from past observations and actions.

    ``observations[i+1]`` is the observation after ``actions[i]``; observations may be
    :class:`Observation` objects or their ``info`` dicts.
    """
    infos = [o.info if isinstance(o, Observation) else o for o in observations]
    if not infos:
        raise ValueError("harness_summary: no observation yet")
    learned: dict[str, Cell] = {}
    visited: set[Cell] = set()
    passable: set[Cell] = set()
    blocked: set[Cell] = set()
    states: dict[str, dict[str, Any]] = {}
    goal = None
    for i, info in enumerate(infos):
        pos = (int(info["position"][0]), int(info["position"][1]))
        if i > 0 and i - 1 < len(actions):
            prev = tuple(infos[i - 1]["position"])
            direction = parse_direction(actions[i - 1])
            if direction and pos != prev:
                learned[direction] = (pos[0] - prev[0], pos[1] - prev[1])
        visited.add(pos)
        here = set(info.get("moves_here", info.get("legal_moves", [])))
        for d in DIRECTIONS:
            (passable if d in here else blocked).add(step_cell(pos, d))
        node = info.get("node")
        if node:
            states[node["name"]] = {"cell": pos, **node}
        goal = info.get("goal") or goal
    activated = set(infos[-1].get("activated", [])) | {
        u for u, s in states.items() if s["status"] == "achieved"}

    def label(name: str) -> str:
        return f"{name} (goal)" if name == goal else name

    if learned:
        axes = ", ".join(f"{d} = {'x' if dx else 'y'}{'+' if dx + dy > 0 else '-'}1"
                         for d, (dx, dy) in sorted(learned.items(),
                                                   key=lambda kv: list(DIRECTIONS).index(kv[0])))
        coords = f"Coordinates: [x, y]; {axes}."
    else:
        coords = "Coordinates: [x, y]; no move observed yet."
    lines = [f"{coords} Goal state: {goal or 'not known yet'}.",
             f"Visited: {_cells(visited)}.",
             f"Known passable but unvisited: {_cells(passable - visited)}.",
             f"Known impassable: {_cells(blocked - passable)}."]
    ready = []
    for name in sorted(states, key=lambda u: states[u]["cell"]):
        s = states[name]
        options = tuple(tuple(o) for o in s["options"])
        line = f"{label(name)} at {_fmt(s['cell'])}: "
        if name in activated:
            line += "activated"
        else:
            line += "not activated"
            if options:
                line += f"; needs {prereq_text(options, label)}"
            if prec(Node(name, s["cell"], options), activated):
                ready.append(name)
        if s["children"]:
            line += "; it leads to " + ", ".join(label(c) for c in s["children"])
        lines.append(line + ".")
    lines.append(f"Activated: {', '.join(label(u) for u in sorted(activated)) or 'none'}. "
                 f"Ready to activate now: {', '.join(label(u) for u in ready) or 'none'}.")
    last = infos[-1]
    lines.append(f"Legal moves: {', '.join(last.get('legal_moves', [])) or 'none'}. "
                 f"Steps used: {last.get('steps', len(infos) - 1)}.")
    return "\n".join(lines)


def prereq_text(options: tuple[tuple[str, ...], ...] | list[list[str]], name=lambda s: s) -> str:
    """The docs/methods/envs.md#grid-map-with-task-dag wording of a DNF precondition (``name`` decorates each node name)."""
    opts = [[name(p) for p in o] for o in options]
    if not opts:
        return "nothing"
    if len(opts) == 1:
        o = opts[0]
        return o[0] if len(o) == 1 else "all of " + ", ".join(o)
    if all(len(o) == 1 for o in opts):
        return "any one of " + ", ".join(o[0] for o in opts)
    return "either " + " or ".join("(" + " and ".join(o) + ")" for o in opts)
