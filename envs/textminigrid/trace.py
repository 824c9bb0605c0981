"""TextMiniGrid's trace for the metrics that travel (docs/methods/metric-travel.md).

* ``coverage`` = non-wall cells ever inside the 7×7 visibility mask / non-wall cells (the cells
  the agent stands on are always in view; with ``connect_all`` every non-wall cell is reachable
  in principle; equal to the TextMiniGrid metric's ``ext_coverage``).
* ``redundancy`` = share of atomic actions after which the agent is in a state it has been in
  before, the state being (cell, direction, carried object, what lies in the cell in front):
  blocked actions and turning in circles count, a productive pickup, drop or toggle never does.
* Gap (PickUp missions): the exploiter is asked at every moment of the one episode [D]: V_t = 1
  when, with the cells seen so far as they are now, the agent can face a seen target and pick it
  up within the atomic steps left (:func:`exploit_cost`: a shortest path over (cell, direction,
  hands full) where known floor and open doors are free to enter, a known closed door costs a
  toggle, a locked one needs the matching key in hand, objects block, and a carried object must
  first be dropped on a known empty cell [D: the dropped object is not tracked afterwards, so
  the planner is slightly optimistic when the agent starts with full hands]). ``exploitable_at``
  counts atomic actions. R^max = 1 when the BabyAI bot solved the task within the step limit
  (``oracle_length``), else when this planner solves it with the whole level known.
  Non-PickUp missions get NaN gaps: the planner knows only how to pick up.
* Backtracks (runner/episodes.py): an accepted backtrack restores state S<k> and counts as one
  step (one atomic step of the clock) that returns to a state visited before, so a repeat; a
  refused one costs the step and leaves the agent where it was, also a repeat (as a blocked
  action is). Coverage and the planner's known cells are the cells seen at any time of the
  replay, abandoned branches included; the planner reads them as they are in the world now.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from typing import Any

from clew.envs.base import Task
from clew.envs.textminigrid.env import TextMiniGridEnv
from clew.envs.textminigrid.layout import MAX_STEPS
from clew.envs.textminigrid.replay import UNCAPPED, decisions
from clew.envs.trace import NAN, Replay, Trace, ratio

DIRS = ((1, 0), (0, 1), (-1, 0), (0, -1))  # MiniGrid's DIR_TO_VEC: 0 E, 1 S, 2 W, 3 N


def _describe(obj: Any) -> tuple | None:
    if obj is None:
        return None
    if obj.type == "door":
        return (obj.type, obj.color, bool(obj.is_open), bool(obj.is_locked))
    return (obj.type, obj.color)


def exploit_cost(level: Any, known: set[tuple[int, int]], targets: list[Any],
                 limit: float = math.inf) -> float:
    """Fewest atomic actions to pick up a known target on the known part of ``level`` (inf when
    impossible within ``limit``). ``targets`` are the mission's objects; ``known`` the world
    cells seen so far. The planner's moves: turn (1), forward into known floor or an open door
    (1), into a known closed door (2: toggle, forward), into a known locked door with the
    matching key in hand (2), drop a carried object onto a known empty cell ahead (1), pick up
    a target ahead with empty hands (1)."""
    grid = level.grid
    goals = set()
    for obj in targets:
        pos = obj.cur_pos
        if pos is None or obj is level.carrying:
            continue
        pos = (int(pos[0]), int(pos[1]))
        if pos in known and grid.get(*pos) is obj:
            goals.add(pos)
    if not goals:
        return math.inf
    carrying = level.carrying
    ax, ay = (int(v) for v in level.agent_pos)
    start = (ax, ay, int(level.agent_dir), carrying is not None)
    best = {start: 0}
    heap = [(0, start)]
    while heap:
        cost, state = heapq.heappop(heap)
        if cost > best.get(state, math.inf) or cost > limit:
            continue
        x, y, d, holding = state
        fx, fy = x + DIRS[d][0], y + DIRS[d][1]
        if not holding and (fx, fy) in goals:
            return cost + 1 if cost + 1 <= limit else math.inf
        steps = [(1, (x, y, (d - 1) % 4, holding)), (1, (x, y, (d + 1) % 4, holding))]
        if (fx, fy) in known and 0 <= fx < grid.width and 0 <= fy < grid.height:
            front = grid.get(fx, fy)
            if front is None:
                steps.append((1, (fx, fy, d, holding)))
                if holding:
                    steps.append((1, (x, y, d, False)))
            elif front.type == "door":
                if front.is_open:
                    steps.append((1, (fx, fy, d, holding)))
                elif not front.is_locked or (holding and carrying.type == "key"
                                             and carrying.color == front.color):
                    steps.append((2, (fx, fy, d, holding)))  # toggle (unlock), forward
        for c, nxt in steps:
            if cost + c < best.get(nxt, math.inf):
                best[nxt] = cost + c
                heapq.heappush(heap, (cost + c, nxt))
    return math.inf


def _mission_targets(level: Any, mission: Any) -> list[Any]:
    return [obj for obj in level.grid.grid
            if obj is not None and obj.type == mission.type
            and (mission.color is None or obj.color == mission.color)]


def trace(task: Task, episode: Mapping[str, Any]) -> Trace:
    """Replay atomic action by atomic action (the decisions' executed actions, as the
    TextMiniGrid metric reads them) and evaluate the known-map planner before each one."""
    steps = decisions(task, dict(episode))
    max_steps = int((episode.get("env_options") or {}).get("max_steps", MAX_STEPS))
    env = TextMiniGridEnv(max_actions=UNCAPPED, requeries=0, trace=True, max_steps=max_steps)
    env.reset(task)
    runner = Replay(env, [step for step, _, _ in steps])
    level = env.level
    mission = env.layout.mission
    pickup = mission.kind == "pickup"
    targets = _mission_targets(level, mission) if pickup else []
    known = set(env.state.seen)  # cells seen at any time (a backtrack does not forget them)
    exploitable_at = NAN

    def check(t: int) -> None:
        nonlocal exploitable_at
        if pickup and math.isnan(exploitable_at):
            left = max_steps - env.state.steps
            if exploit_cost(level, known, targets, left) <= left:
                exploitable_at = float(t)

    def state_key() -> tuple:
        fx, fy = (int(v) for v in level.front_pos)
        front = level.grid.get(fx, fy) if 0 <= fx < level.width and 0 <= fy < level.height else None
        ax, ay = (int(v) for v in level.agent_pos)
        return (ax, ay, int(level.agent_dir), _describe(level.carrying), _describe(front))

    visited = {state_key()}
    check(0)
    repeats = taken = 0

    def count() -> None:
        nonlocal repeats, taken
        taken += 1
        key = state_key()
        repeats += key in visited
        visited.add(key)
        known.update(env.state.seen)
        check(env.state.steps)

    for step, names, valid in steps:
        if env.done:
            break
        if step.kind != "env":
            runner.runner_step(step)  # one step; a backtrack restores a copy of the world
            if pickup:
                targets = _mission_targets(level, mission)
            count()
            continue
        for name in names:
            if env.done:
                break
            env.step(name)  # one atomic action; the no-op label is unparsable: the inert action
            count()
        runner.forward(valid)
    st = env.state
    grid = level.grid
    free = {(x, y) for x in range(grid.width) for y in range(grid.height)
            if not (grid.get(x, y) is not None and grid.get(x, y).type == "wall")}
    agent = 1.0 if st.success else 0.0
    if not pickup:
        rmax = exploit = NAN
    else:
        length = task.params.get("oracle_length")
        if isinstance(length, int) and length <= max_steps:
            rmax = 1.0
        else:
            known_all = {(x, y) for x in range(grid.width) for y in range(grid.height)}
            fresh = TextMiniGridEnv(max_steps=max_steps)
            fresh.reset(task)
            cost = exploit_cost(fresh.level, known_all, _mission_targets(fresh.level, mission),
                                max_steps)
            rmax = 1.0 if cost <= max_steps else 0.0
            if rmax == 0.0 and "oracle_length" not in task.params:
                solved = fresh.oracle().solution_length
                rmax = 1.0 if solved is not None and solved <= max_steps else 0.0
        rmax = max(rmax, agent)
        exploit = 0.0 if math.isnan(exploitable_at) else 1.0
    return Trace(
        coverage=len(known & free) / len(free),
        redundancy=ratio(repeats, taken), repeats=repeats, steps=taken,
        rmax=rmax, agent=agent, exploit=exploit, exploitable_at=exploitable_at,
    )
