"""The grid map's trace for the metrics that travel (docs/methods/metric-travel.md).

* ``coverage`` = visited cells / |M| (observed = visited: the map shows only the cell the agent
  stands on).
* ``redundancy`` = revisits / valid moves, a revisit being a move into an already visited cell
  (invalid actions are not moves; the grid map's error metric counts them).
* Backtracks (runner/episodes.py): a backtrack the runner accepted restores the world of state
  S<k> (position, achieved nodes) and costs one step; it counts as a valid move into an
  already visited cell, so a revisit. What the agent saw stays known: coverage and the
  exploiter's known map are the cells visited at any time of the replay, abandoned branches
  included. A refused backtrack costs a step and is not a move.
* Gap: binary returns (goal achieved or not). The exploiter is asked at every moment of the one
  episode [D]: V_t = 1 when the goal can be achieved from the agent's cell, with the nodes
  achieved so far, within B − steps_t moves, walking only on visited cells and using only
  discovered nodes (their cells and prerequisites are what a visit reveals): a shortest-path
  search over (node, achieved set) with BFS distances inside the visited cells
  (:func:`exploit_cost`; tests check it against the generic solver
  :func:`clew.envs.rooms.metrics.optimal_exploitation`). R^exploit = max_t V_t,
  ``exploitable_at`` = the first such t in actions taken (invalid ones included). R^max = the
  same with the whole map and DAG known, from the start (1 on every generated instance we have
  seen).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from typing import Any

from clew.envs.base import Task
from clew.envs.gridmap.env import GridMapEnv
from clew.envs.gridmap.instance import ACHIEVED, Instance, bfs, prec
from clew.envs.trace import NAN, Replay, Trace, ratio, record_steps


def exploit_cost(instance: Instance, known: Iterable[tuple[int, int]], achieved: Iterable[str],
                 position: tuple[int, int]) -> float:
    """Fewest moves that achieve the goal from ``position`` walking only on ``known`` cells and
    using only the nodes on them (inf when impossible; 0 when the goal is achieved).

    Any walk that achieves the goal achieves nodes v1, ..., vk = goal in some order, each
    with its prerequisites among the earlier ones, and costs at least the sum of the known-map
    distances between consecutive ones; walking those shortest paths achieves them (passing
    other nodes only achieves more, and prerequisites are monotone). So the optimum is a
    shortest path over (last node reached, achieved set), which Dijkstra finds.
    """
    known = frozenset(known)
    done = frozenset(achieved)
    goal = instance.goal
    if goal in done:
        return 0.0
    cands = [n for n in instance.nodes if n.cell in known and n.name not in done]
    if goal not in {n.name for n in cands}:
        return math.inf
    tables: dict[tuple[int, int], dict] = {}

    def dist(a: tuple[int, int], b: tuple[int, int]) -> float:
        if a not in tables:
            tables[a] = bfs(known, a)
        return tables[a].get(b, math.inf)

    start = (position, done)
    best = {start: 0.0}
    heap = [(0.0, 0, position, done)]
    tie = 1  # heap tie-breaker: cells and frozensets do not compare
    while heap:
        cost, _, cell, have = heapq.heappop(heap)
        if goal in have:
            return cost
        if cost > best.get((cell, have), math.inf):
            continue
        for node in cands:
            if node.name in have or not prec(node, have):
                continue
            d = dist(cell, node.cell)
            if d == 0 or math.isinf(d):  # d = 0 only for the cell just processed: no re-arrival
                continue
            nxt = (node.cell, have | {node.name})
            if cost + d < best.get(nxt, math.inf):
                best[nxt] = cost + d
                heapq.heappush(heap, (cost + d, tie, node.cell, nxt[1]))
                tie += 1
    return math.inf


def trace(task: Task, episode: Mapping[str, Any]) -> Trace:
    opts = dict(episode.get("env_options") or {})
    env = GridMapEnv(**{k: v for k, v in opts.items()
                        if k in ("step_counter", "invalid_policy", "max_retries", "pits")})
    env.reset(task)
    inst = env.instance
    full = exploit_cost(inst, inst.cells, (), inst.start)
    rmax = 1.0 if full <= inst.budget else 0.0
    exploitable_at = NAN
    steps = record_steps(task, episode)
    replay = Replay(env, steps)
    known = set(env.state.observed)  # cells visited at any time (backtracks do not forget)

    def check(t: int) -> None:
        nonlocal exploitable_at
        if not math.isnan(exploitable_at):
            return  # R^exploit is a max over t; binary returns: the first hit settles it
        o = env.oracle()
        achieved = {u for u, s in o.status.items() if s == ACHIEVED}
        if exploit_cost(inst, known, achieved, o.position) <= inst.budget - o.steps:
            exploitable_at = float(t)

    check(0)
    moves = revisits = 0
    for t, record_step in enumerate(steps, 1):
        if env.done:
            break
        step = replay.step(record_step)
        if step.valid:  # a forward move, or an accepted backtrack (always a revisit)
            moves += 1
            revisits += env.state.pos in known
        known |= env.state.observed
        check(t)
    agent = 1.0 if env.state.success else 0.0
    return Trace(
        coverage=len(known) / len(inst.cells),
        redundancy=ratio(revisits, moves), repeats=revisits, steps=moves,
        rmax=max(rmax, agent), agent=agent,
        exploit=0.0 if math.isnan(exploitable_at) else 1.0, exploitable_at=exploitable_at,
    )
