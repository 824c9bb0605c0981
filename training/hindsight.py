"""Hindsight paths: an episode's shortest way through the states it visited, and the branches it
walked into and out of (docs/methods/exploratory-learning.md#hindsight-paths).

A search that explores by walking leaves loops in its executed path: it goes down a corridor,
finds nothing and walks back, or turns left and then right. Imitating that path teaches the
loops. After the episode, the states it visited (by :meth:`Env.state_key`) and the moves between
them are known without any oracle: the executed moves, and every legal action from a visited
state tried in the simulator that lands on another visited state. The shortest path from the
first state to the last one through that graph is the *shortcut*; a loop the executed path made
from a state of the shortcut and closed there again is a *detour*, a branch that was entered and
given up.

Decisions:

* A shortcut is used only when replaying it reaches the state the episode ended in with at
  least the episode's observed score (:func:`clew.agents.value.observed_score`: success where it
  ends the episode, else the rewards received), so what the agent saw says it is as good; envs
  without a ``state_key`` have no shortcut.
* A detour runs from its state of the shortcut to where the executed path turned round (the
  first state of the loop seen again) or met the shortcut; a step back onto the shortcut is no
  detour (walking back is not a branch); detours are kept in the order they were walked, one per
  first action, and never along the shortcut's own next move.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from clew.agents.value import observed_score
from clew.envs.base import Env, Task


@dataclass
class Hindsight:
    """The shortcut's actions and, per position on it, the detours walked from that state."""

    path: list[str]
    detours: dict[int, list[list[str]]] = field(default_factory=dict)
    dead_ends: int = 0                  # detours that are dead ends found in the simulator


def _walk(env: Env, task: Task, actions: list[str]) -> tuple[list[Any], dict[Any, Any]]:
    """State keys after reset and after every action, and one snapshot per key."""
    env.reset(task)
    keys = [env.state_key()]
    snaps = {keys[0]: env.snapshot()}
    for action in actions:
        env.step(action)
        keys.append(env.state_key())
        snaps.setdefault(keys[-1], env.snapshot())
    return keys, snaps


def _shortest(env: Env, keys: list[Any], actions: list[str],
              snaps: dict[Any, Any]) -> list[tuple[Any, str]] | None:
    """(state key, action) pairs of the shortest path from ``keys[0]`` to ``keys[-1]`` through
    the visited states, or ``None``."""
    moves: dict[Any, dict[Any, str]] = {}
    for i, action in enumerate(actions):
        if keys[i] != keys[i + 1]:
            moves.setdefault(keys[i], {}).setdefault(keys[i + 1], action)
    seen = set(keys)
    for key, snap in snaps.items():
        if key == keys[-1]:
            continue
        env.restore(snap)
        for action in env.legal_actions():
            probe = env.copy()
            probe.step(action)
            lands = probe.state_key()
            if lands in seen and lands != key:
                moves.setdefault(key, {}).setdefault(lands, action)
    came: dict[Any, tuple[Any, str] | None] = {keys[0]: None}
    todo = deque([keys[0]])
    while todo:
        key = todo.popleft()
        for nxt, action in moves.get(key, {}).items():
            if nxt not in came:
                came[nxt] = (key, action)
                todo.append(nxt)
    if keys[-1] not in came:
        return None
    out, key = [], keys[-1]
    while came[key] is not None:
        key, action = came[key]
        out.append((key, action))
    return out[::-1]


def _detours(keys: list[Any], actions: list[str], spine: list[Any],
             spine_actions: list[str]) -> dict[int, list[list[str]]]:
    """Per shortcut position, the loops the executed path made from that state, cut where it
    turned round."""
    at = {key: p for p, key in enumerate(spine)}
    last = {key: i for i, key in enumerate(keys)}     # the last visit of each state
    out: dict[int, list[list[str]]] = {}
    for i, action in enumerate(actions):
        p = at.get(keys[i])
        if p is None or p >= len(spine_actions) or keys[i + 1] == keys[i]:
            continue
        if action == spine_actions[p] or last[keys[i]] == i:
            continue                       # the shortcut's own move, or no loop back here
        branch, seen = [], {keys[i]}
        for j in range(i, len(actions)):
            if keys[j + 1] in seen or keys[j + 1] in at:
                break
            branch.append(actions[j])
            seen.add(keys[j + 1])
        firsts = [d[0] for d in out.get(p, [])]
        if branch and branch[0] not in firsts:
            out.setdefault(p, []).append(branch)
    return out


def _dead_ends(env: Env, spine: list[Any], spine_actions: list[str], snaps: dict[Any, Any],
               detours: dict[int, list[list[str]]]) -> int:
    """Add, per shortcut position, the one-move dead ends next to it; return how many."""
    on, added = set(spine), 0
    for p, key in enumerate(spine[:-1]):
        env.restore(snaps[key])
        firsts = [d[0] for d in detours.get(p, [])]
        for action in env.legal_actions():
            if action == spine_actions[p] or action in firsts:
                continue
            probe = env.copy()
            probe.step(action)
            if probe.done or probe.state_key() in on:
                continue
            back, inside = probe.legal_actions(), probe.state_key()
            if len(back) != 1:
                continue
            probe.step(back[0])
            if probe.state_key() in (key, inside):   # straight back, or nowhere (a pit)
                detours.setdefault(p, []).append([action])
                added += 1
    return added


def hindsight(env: Env, task: Task, actions: list[str],
              dead_ends: bool = False) -> Hindsight | None:
    """The episode's shortcut and detours (with ``dead_ends``, also the dead ends next to the
    shortcut), or ``None`` where there is no shortcut (no state keys, or replaying it does not
    end as well as the episode did). ``env`` is used up."""
    keys, snaps = _walk(env, task, actions)
    if keys[0] is None:
        return None
    done, score = env.done, observed_score(env)
    steps = _shortest(env, keys, actions, snaps)
    if steps is None:
        return None
    path = [a for _, a in steps]
    env.reset(task)
    for action in path:
        env.step(action)
    if env.state_key() != keys[-1] or env.done != done or observed_score(env) < score:
        return None
    spine = [k for k, _ in steps] + [keys[-1]]
    found = Hindsight(path, _detours(keys, actions, spine, path))
    if dead_ends:
        found.dead_ends = _dead_ends(env, spine, path, snaps, found.detours)
    return found
