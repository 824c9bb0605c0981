"""The optimal-exploitation gap decomposition of Dark Treasure Rooms (docs/methods/metric-optimal-exploitation-gap.md), on the
shared solver and decomposition of :mod:`clew.envs.measures`.

**Rooms.** ``rooms_gap_metrics`` and ``rooms_exploration_metrics`` (registered for env
``rooms``) replay a run (one clew episode = E rooms-episodes, see ``clew.envs.rooms.env``)
from its actions and compute R^exploit with the fast brute-force orienteering solver of docs/methods/metric-optimal-exploitation-gap.md#rooms-solver
(``clew.envs.rooms.solver``), recomputed only when a step adds knowledge; tests check it
against :func:`optimal_exploitation` and against exhaustive search of the real env.

Decisions (docs/methods/metric-optimal-exploitation-gap.md#decisions): R_i^exploit uses the history *including* episode i (#9); known doors are
symmetric (#8; ``strict_directed=True`` for the directed variant); known balls are those picked
up (#7; ``seen_balls_use_true_value=True`` for the oracle variant); gaps are normalised by the
layout's R^max (#12); shares are per-episode ratios, episodes with Δ_total = 0 are left out and
counted (#12); agent return = last episode (#13); coverage = observation sets, with room and
object coverage beside it (#14), all as fractions in [0, 1] like other envs' coverage (×100
for the paper's %); redundancy over valid steps (#15); sample efficiency counts
valid steps, 1-based, NaN when the final R^exploit is 0 (#16). A truncated run (fewer than E
finished rooms-episodes) is scored on its finished episodes; ``episodes_finished`` says so.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from clew.envs.base import Task
from clew.envs.measures import (
    Edge,
    gap_decomposition,
    known_graph,
    optimal_exploitation,
    redundancy,
    sample_efficiency,
)
from clew.envs.rooms.env import RoomsEnv, observation_sets
from clew.envs.rooms.solver import KnownModel, exploit_value, true_balls
from clew.envs.trace import Replay, classify, step_infos


def rooms_graph(moves: Iterable[Any], symmetric: bool = True) -> dict[Hashable, list[Edge]]:
    """The rooms known model as a generic graph: states = rooms, doors cost ``doors``, balls
    cost ``pickups`` and are one-time (docs/methods/metric-optimal-exploitation-gap.md#generic-solver: key the state by room, not by observation)."""
    transitions = []
    for m in moves:
        if m.kind == "door" and m.moved:
            transitions.append((m.room, m.action, 0, m.next_room))
            if symmetric:
                transitions.append((m.next_room, m.action, 0, m.room))
        elif m.kind == "ball":
            transitions.append((m.room, m.action, m.reward, m.room))
    return known_graph(
        transitions,
        cost=lambda s, a: {"pickups": 1} if a.endswith(" ball") else {"doors": 1},
        once=lambda s, a: a if a.endswith(" ball") else None,
    )


def rooms_exploit_generic(layout: Any, moves: Iterable[Any], symmetric: bool = True) -> float:
    """R^exploit of a rooms history by the generic solver (reference for the fast one)."""
    return optimal_exploitation(
        rooms_graph(moves, symmetric), layout.start,
        {"doors": layout.door_budget, "pickups": layout.max_pickups},
        terminal=lambda s, rem: rem["pickups"] == 0,
    ).value


@dataclass
class RoomsTrace:
    """A replayed rooms run: everything the rooms metrics need.

    Backtracks (runner/episodes.py) restore the world, and with it the env's history, of an earlier
    state; what the agent learnt on the abandoned branch stays known. So ``moves`` holds every
    valid move of the replay, abandoned ones included, in order, and ``curve`` has one entry per
    valid step, an accepted backtrack included (one step of the clock; it adds no knowledge).
    """

    layout: Any
    rmax: int
    n_episodes: int
    moves: list  # valid moves, abandoned branches included (clew.envs.rooms.env.Move)
    calls: int  # all steps, invalid ones and runner steps included (the clock)
    invalid: int
    returns: list[int]  # R^LLM per finished rooms-episode
    curve: list[int]  # R^exploit after each valid step (moves and accepted backtracks)
    exploit: list[int]  # R^exploit after each finished rooms-episode
    start_seen: frozenset  # the start room's observation set
    backtracks: int = 0  # accepted backtracks (valid steps that are not moves)
    #: the rooms-episode each entry of ``curve`` was taken in
    curve_episodes: list[int] = field(default_factory=list)


def record_actions(record: Mapping[str, Any]) -> list[str]:
    if "actions" in record:
        return [str(a) for a in record["actions"]]
    if "steps" in record:
        return [str(s["action"]) for s in record["steps"]]
    raise ValueError("episode record has neither 'actions' nor 'steps'")


def rooms_trace(task: Task, record: Mapping[str, Any], *, strict_directed: bool = False,
                seen_balls_use_true_value: bool = False) -> RoomsTrace:
    """Replay ``record``'s actions on ``task`` and compute R^exploit after every step."""

    env = RoomsEnv(**dict(record.get("env_options") or {}))
    env.reset(task)
    actions = record_actions(record)
    steps = classify(actions, step_infos(record, len(actions)))
    replay = Replay(env, steps)
    timeline: list = []  # per valid step: the Move, or the rooms-episode of a backtrack
    invalid = 0
    for record_step in steps:
        if env.done:
            break
        episode = env.state.episode
        step = replay.step(record_step)
        if not step.valid:
            invalid += 1
        elif record_step.kind == "env":
            timeline.append(env.state.moves[-1])
        else:
            timeline.append(episode)
    s, layout = env.state, env.layout
    moves = [m for m in timeline if not isinstance(m, int)]
    model, value, curve, curve_episodes = KnownModel(), 0, [], []
    truth = true_balls(layout) if seen_balls_use_true_value else None
    for m in timeline:
        if isinstance(m, int):
            curve_episodes.append(m)
        else:
            curve_episodes.append(m.episode)
            changed = model.add_move(m, symmetric=not strict_directed)
            if truth is not None:
                changed = model.add_seen(m, truth) or changed
            if changed:
                value = exploit_value(layout, model)
        curve.append(value)
    finished = len(s.ends)
    exploit, current = [], 0
    last_index: dict[int, int] = {ep: i for i, ep in enumerate(curve_episodes)}
    for ep in range(finished):
        if ep in last_index:
            current = curve[last_index[ep]]
        exploit.append(current)
    start_seen = frozenset(env.start_visible())
    return RoomsTrace(layout, env.oracle().rmax, env.config.n_episodes, moves, s.steps,
                      invalid, env.episode_returns(), curve, exploit, start_seen,
                      len(timeline) - len(moves), curve_episodes)


def rooms_gap_metrics(task: Task, episode: Mapping[str, Any], *, strict_directed: bool = False,
                      seen_balls_use_true_value: bool = False) -> dict[str, Any]:
    """Gap decomposition of one rooms run (docs/methods/metric-optimal-exploitation-gap.md#gap-decomposition, docs/methods/metric-optimal-exploitation-gap.md#rooms-exploration-statistics exploitation and agent return)."""
    t = rooms_trace(task, episode, strict_directed=strict_directed,
                    seen_balls_use_true_value=seen_balls_use_true_value)
    out = {
        "rmax": t.rmax,
        "exploit_return": t.exploit[-1] if t.exploit else math.nan,
        "agent_return": t.returns[-1] if t.returns else math.nan,
        "episodes_finished": len(t.returns),
    }
    gaps = gap_decomposition(t.rmax, t.returns, t.exploit)
    per = gaps.pop("per_episode")
    out.update(gaps)
    out["per_episode"] = {"agent_return": t.returns, "exploit_return": t.exploit, **per}
    return out


def rooms_exploration_metrics(task: Task, episode: Mapping[str, Any]) -> dict[str, Any]:
    """Coverage, redundancy, sample efficiency, invalid rate of one rooms run (docs/methods/metric-optimal-exploitation-gap.md#rooms-exploration-statistics)."""
    t = rooms_trace(task, episode)
    layout = t.layout
    states = observation_sets(t.start_seen, t.moves)
    rooms = {layout.start} | {m.room for m in t.moves} | {m.next_room for m in t.moves}
    objects = {m.action for m in t.moves if m.kind == "ball" or m.moved}
    # valid steps up to the last one taken in a finished rooms-episode
    finished_steps = 1 + max((i for i, ep in enumerate(t.curve_episodes)
                              if ep < len(t.returns)), default=-1)
    final = t.exploit[-1] if t.exploit else 0
    return {
        "coverage": len(states) / layout.n_observation_states,
        "room_coverage": len(rooms) / len(layout.rooms_in_budget),
        "object_coverage": len(objects) / max(1, layout.n_objects_in_budget),
        "redundancy": redundancy([(frozenset(m.seen), m.action) for m in t.moves],
                                 repeats=t.backtracks),
        "sample_efficiency": sample_efficiency(t.curve[:finished_steps], final),
        "invalid_rate": t.invalid / t.calls if t.calls else math.nan,
        "valid_steps": len(t.moves) + t.backtracks,
    }
