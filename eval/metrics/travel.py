"""Metrics that travel: coverage, redundancy and the optimal-exploitation gap for every family.

Issue 3 item 4. spec_001 (§1.3, §4.1) defines state-space coverage, memory redundancy and the
gap decomposition for Dark Treasure Rooms; this module gives them a definition on every other
environment whose ground truth supports them, with the same key names, so a report can set the
families side by side. Rooms itself keeps its own functions
(:mod:`clew.eval.metrics.optimal_exploitation`), which already produce these keys.

Common shape (every family). Each registered function replays the episode record from its
actions, like the other metrics, so ``clew score`` works on trajectories produced anywhere:

* ``coverage`` in [0, 1]: the fraction of a finite state or query space the agent reached;
* ``redundancy`` in [0, 1]: the share of the agent's steps that led back to something it had
  already reached (NaN when it took no step);
* the gap decomposition of spec_001 §1.3 for one episode: ``rmax`` (R^max, best return with full
  knowledge), ``agent_return`` (R^agent), ``exploit_return`` (R^exploit, the best return a
  perfect exploiter could get from what the agent had found), ``gap_total = (R^max −
  R^agent) / R^max`` = ``gap_exploration`` (R^max − R^exploit) / R^max + ``gap_exploitation``
  (R^exploit − R^agent) / R^max, and ``share_exploration`` / ``share_exploitation`` (NaN when
  the total gap is 0). Gaps are NaN when R^max = 0 (nothing to gain).

Single-episode families [D]. In rooms the exploiter starts a fresh episode with the whole
history; the families below have one episode, so the exploiter is asked at every moment of it:
R^exploit = max over decision points t of V_t, where V_t is the best return reachable from the
agent's state at t, *within the budget left at t*, moving only through what was known at t.
A gap is then exploitation error exactly when at some moment the agent knew enough to finish in
time and did not; ``exploitable_at`` says when that first happened (NaN if never), counted in
actions taken (gridmap: actions, invalid ones included; textminigrid: atomic actions). The state
just before a successful last action always qualifies, so R^exploit >= R^agent by construction.
Oracle-search tasks have no such moment (their gap is all exploration): NaN there.

Per family:

* **gridmap** (spec_000). ``coverage`` = visited cells / |M| (observed = visited: the map shows
  only the cell the agent stands on). ``redundancy`` = revisits / valid moves, a revisit being a
  move into an already visited cell (invalid actions are not moves; spec_000's metric counts
  them). Gap: binary returns (goal achieved or not). V_t = 1 when the goal can be achieved from
  the agent's cell, with the nodes achieved so far, within B − steps_t moves, walking only on
  visited cells and using only discovered nodes (their cells and prerequisites are what a
  visit reveals): a shortest-path search over (node, achieved set) with BFS distances inside the
  visited cells (:func:`gridmap_exploit_cost`; tests check it against the generic solver
  :func:`~clew.eval.metrics.optimal_exploitation.optimal_exploitation`). R^max = the same with
  the whole map and DAG known, from the start (1 on every generated instance we have seen).
* **textminigrid** (spec_004). ``coverage`` = non-wall cells ever inside the 7×7 visibility
  mask / non-wall cells (the cells the agent stands on are always in view; with
  ``connect_all`` every non-wall cell is reachable in principle; equal to spec_004 §4.3's
  ``ext_coverage``). ``redundancy`` = share of atomic actions after which the agent is in a
  state it has been in before, the state being (cell, direction, carried object, what lies in
  the cell in front): blocked actions and turning in circles count, a productive pickup, drop
  or toggle never does. Gap (PickUp missions): V_t = 1 when, with the cells seen so far as they
  are now, the agent can face a seen target and pick it up within the atomic steps left
  (:func:`textminigrid_exploit_cost`: a shortest path over (cell, direction, hands full) where
  known floor and open doors are free to enter, a known closed door costs a toggle, a locked
  one needs the matching key in hand, objects block, and a carried object must first be
  dropped on a known empty cell [D: the dropped object is not tracked afterwards, so the
  planner is slightly optimistic when the agent starts with full hands]). R^max = 1 when the
  BabyAI bot solved the task within the step limit (``oracle_length``), else when this planner
  solves it with the whole level known. Non-PickUp missions get NaN gaps.
* **hillsearch / treesearch / maxsatsearch** (spec_003). ``coverage`` = the queried share of a
  finite query space: TreeSearch, distinct queried nodes / (|V| − 1) (the root's value is
  given, it is not a query); MaxSatSearch, distinct assignments / 2^n (tiny by design);
  HillSearch's query space [0, 10] is continuous [D]: coverage = the share of the 100 intervals
  of width 0.1 (about one standard deviation of the instance's hills) holding a valid query.
  ``redundancy`` = repeated queries / well-formed query attempts, a repeat being a query whose
  answer was already known (TreeSearch: a queried node or the root, which the env refuses
  without charge; HillSearch and MaxSatSearch: the same x or bitstring again, which costs
  budget). Gap: R^max = OPT, R^agent = the best value found (the score of spec_003 §1.2), and
  R^exploit = the best value observed: the episode's return *is* the best observed value, so
  whatever was observed has been exploited. The exploitation gap is 0 by definition and the
  whole gap is exploration (``gap_exploration = 1 − normalised reward``).

Each registered function returns only its own keys; the replay behind them is shared through a
one-entry cache, so scoring one episode replays it once.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from clew.envs.base import Task
from clew.eval.metrics.optimal_exploitation import gap_decomposition

NAN = math.nan
ORACLE_SEARCH_ENVS = ("hillsearch", "treesearch", "maxsatsearch")
ENVS = ("gridmap", "textminigrid", *ORACLE_SEARCH_ENVS)
HILL_BINS = 100  # intervals of width 0.1 over [0, 10]
#: the keys taken from gap_decomposition (its *_mean and normalized_reward keys are left out:
#: one episode, and the families' own metrics report their reward)
GAP_KEYS = ("gap_total", "gap_exploration", "gap_exploitation", "share_exploration",
            "share_exploitation")


@dataclass
class Trace:
    """What the three measures need from one replayed episode."""

    coverage: float
    redundancy: float
    repeats: int  # revisits / repeated queries (the numerator of redundancy)
    steps: int  # its denominator
    rmax: float
    agent: float
    exploit: float
    exploitable_at: float = NAN  # first decision point with V_t = R^exploit > 0; NaN if never


# =========================== registered functions ==========================================


def coverage_metrics(task: Task, episode: Mapping[str, Any]) -> dict[str, Any]:
    """``coverage`` (see the module docstring for each family's definition)."""
    return {"coverage": trace(task, episode).coverage}


def redundancy_metrics(task: Task, episode: Mapping[str, Any]) -> dict[str, Any]:
    """``redundancy``, with its numerator and denominator."""
    t = trace(task, episode)
    return {"redundancy": t.redundancy, "redundant_steps": t.repeats, "counted_steps": t.steps}


def gap_metrics(task: Task, episode: Mapping[str, Any]) -> dict[str, Any]:
    """The one-episode gap decomposition (spec_001 §1.3) with R^exploit as defined above."""
    t = trace(task, episode)
    gaps = gap_decomposition(t.rmax, [t.agent], [t.exploit])
    out: dict[str, Any] = {"rmax": t.rmax, "agent_return": t.agent, "exploit_return": t.exploit,
                           "exploitable_at": t.exploitable_at}
    out.update({key: gaps[key] for key in GAP_KEYS})
    return out


_cache: dict[str, Trace] = {}


def trace(task: Task, episode: Mapping[str, Any]) -> Trace:
    """Replay ``episode`` on ``task`` (cached for the last episode asked for)."""
    if not isinstance(episode, Mapping):
        raise TypeError(f"travel metrics: the episode of task {task.id!r} must be a record "
                         f"(a dict), got {type(episode).__name__}")
    key = _cache_key(task, episode)
    if key not in _cache:
        if task.env == "gridmap":
            result = gridmap_trace(task, episode)
        elif task.env == "textminigrid":
            result = textminigrid_trace(task, episode)
        elif task.env in ORACLE_SEARCH_ENVS:
            result = oracle_search_trace(task, episode)
        else:
            raise ValueError(f"travel metrics: no definition for environment {task.env!r} "
                             f"(defined for {', '.join(ENVS)})")
        _cache.clear()
        _cache[key] = result
    return _cache[key]


def _cache_key(task: Task, episode: Mapping[str, Any]) -> str:
    steps = episode.get("steps")
    executed = ([s.get("info", {}).get("executed") if isinstance(s, dict) else None
                 for s in steps] if isinstance(steps, list) else None)
    return json.dumps([task.to_dict(), episode.get("actions"), episode.get("env_options"),
                       executed], sort_keys=True, default=str)


def record_actions(task: Task, episode: Mapping[str, Any]) -> list[str]:
    actions = episode.get("actions")
    if actions is None and isinstance(episode.get("steps"), list):
        actions = [s.get("action") for s in episode["steps"]]
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise ValueError(f"travel metrics: the episode of task {task.id!r} needs 'actions', "
                         "a list of strings")
    return actions


def _ratio(num: int, den: int) -> float:
    return num / den if den else NAN


# =========================== gridmap =======================================================


def gridmap_exploit_cost(instance: Any, known: Iterable[tuple[int, int]],
                         achieved: Iterable[str], position: tuple[int, int]) -> float:
    """Fewest moves that achieve the goal from ``position`` walking only on ``known`` cells and
    using only the nodes on them (inf when impossible; 0 when the goal is achieved).

    Any walk that achieves the goal achieves nodes v1, ..., vk = goal in some order, each
    with its prerequisites among the earlier ones, and costs at least the sum of the known-map
    distances between consecutive ones; walking those shortest paths achieves them (passing
    other nodes only achieves more, and prerequisites are monotone). So the optimum is a
    shortest path over (last node reached, achieved set), which Dijkstra finds.
    """
    from clew.envs.gridmap.instance import bfs, prec

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


def gridmap_trace(task: Task, episode: Mapping[str, Any]) -> Trace:
    from clew.envs.gridmap.env import GridMapEnv
    from clew.envs.gridmap.instance import ACHIEVED

    opts = dict(episode.get("env_options") or {})
    env = GridMapEnv(**{k: v for k, v in opts.items()
                        if k in ("step_counter", "invalid_policy", "max_retries")})
    env.reset(task)
    inst = env.instance
    full = gridmap_exploit_cost(inst, inst.cells, (), inst.start)
    rmax = 1.0 if full <= inst.budget else 0.0
    exploitable_at = NAN

    def check(t: int) -> None:
        nonlocal exploitable_at
        if not math.isnan(exploitable_at):
            return  # R^exploit is a max over t; binary returns: the first hit settles it
        o = env.oracle()
        achieved = {u for u, s in o.status.items() if s == ACHIEVED}
        if gridmap_exploit_cost(inst, o.observed, achieved, o.position) <= inst.budget - o.steps:
            exploitable_at = float(t)

    check(0)
    moves = revisits = 0
    for t, action in enumerate(record_actions(task, episode), 1):
        if env.done:
            break
        seen_before = set(env.state.observed)
        step = env.step(action)
        if step.valid:
            moves += 1
            revisits += env.state.pos in seen_before
        check(t)
    agent = 1.0 if env.state.success else 0.0
    return Trace(
        coverage=len(env.state.observed) / len(inst.cells),
        redundancy=_ratio(revisits, moves), repeats=revisits, steps=moves,
        rmax=max(rmax, agent), agent=agent,
        exploit=0.0 if math.isnan(exploitable_at) else 1.0, exploitable_at=exploitable_at,
    )


# =========================== textminigrid ==================================================

DIRS = ((1, 0), (0, 1), (-1, 0), (0, -1))  # MiniGrid's DIR_TO_VEC: 0 E, 1 S, 2 W, 3 N


def _describe(obj: Any) -> tuple | None:
    if obj is None:
        return None
    if obj.type == "door":
        return (obj.type, obj.color, bool(obj.is_open), bool(obj.is_locked))
    return (obj.type, obj.color)


def textminigrid_exploit_cost(level: Any, known: set[tuple[int, int]], targets: list[Any],
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


def textminigrid_trace(task: Task, episode: Mapping[str, Any]) -> Trace:
    """Replay atomic action by atomic action (the decisions' executed actions, as the
    spec_004 metric reads them) and evaluate the known-map planner before each one."""
    from clew.envs.textminigrid.env import TextMiniGridEnv
    from clew.envs.textminigrid.layout import MAX_STEPS
    from clew.eval.metrics.textminigrid import _executed_from_steps, _replay

    # the atomic actions each decision executed, read as the spec_004 metric reads them
    executed = _executed_from_steps(dict(episode))
    if executed is None:
        executed = [info.get("executed", []) for info in _replay(task, dict(episode))[1]]
    atomic = [name for names in executed for name in names]
    max_steps = int((episode.get("env_options") or {}).get("max_steps", MAX_STEPS))
    env = TextMiniGridEnv(max_actions=10**6, requeries=0, trace=True, max_steps=max_steps)
    env.reset(task)
    level, st = env.level, env.state
    mission = env.layout.mission
    pickup = mission.kind == "pickup"
    targets = _mission_targets(level, mission) if pickup else []
    exploitable_at = NAN

    def check(t: int) -> None:
        nonlocal exploitable_at
        if pickup and math.isnan(exploitable_at):
            left = max_steps - st.steps
            if textminigrid_exploit_cost(level, st.seen, targets, left) <= left:
                exploitable_at = float(t)

    def state_key() -> tuple:
        fx, fy = (int(v) for v in level.front_pos)
        front = level.grid.get(fx, fy) if 0 <= fx < level.width and 0 <= fy < level.height else None
        ax, ay = (int(v) for v in level.agent_pos)
        return (ax, ay, int(level.agent_dir), _describe(level.carrying), _describe(front))

    visited = {state_key()}
    check(0)
    repeats = taken = 0
    for name in atomic:
        if env.done:
            break
        env.step(name)  # one atomic action; the no-op label is unparsable: the inert action
        taken += 1
        key = state_key()
        repeats += key in visited
        visited.add(key)
        check(st.steps)
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
            cost = textminigrid_exploit_cost(fresh.level, known_all,
                                             _mission_targets(fresh.level, mission), max_steps)
            rmax = 1.0 if cost <= max_steps else 0.0
            if rmax == 0.0 and "oracle_length" not in task.params:
                solved = fresh.oracle().solution_length
                rmax = 1.0 if solved is not None and solved <= max_steps else 0.0
        rmax = max(rmax, agent)
        exploit = 0.0 if math.isnan(exploitable_at) else 1.0
    return Trace(
        coverage=len(st.seen & free) / len(free),
        redundancy=_ratio(repeats, taken), repeats=repeats, steps=taken,
        rmax=rmax, agent=agent, exploit=exploit, exploitable_at=exploitable_at,
    )


# =========================== hill / tree / maxsat ==========================================


def oracle_search_trace(task: Task, episode: Mapping[str, Any]) -> Trace:
    from clew.envs.registry import make_for

    env = make_for(task)
    env.reset(task)
    family = env.family
    asked: set[str] = {f"node={env.root}"} if family == "tree" else set()
    attempts = repeats = 0
    for action in record_actions(task, episode):
        if env.done:
            break
        canon = env.parse_action(action)
        query = canon is not None and not env.is_stop(canon)
        if query:
            attempts += 1
            repeats += canon in asked
        step = env.step(action)
        if query and step.valid:
            asked.add(canon)
    queries = [q for q, _ in env.state.history]
    if family == "tree":
        coverage = len(set(queries)) / (len(env.parent) - 1)
    elif family == "maxsat":
        coverage = len(set(queries)) / 2 ** env.n
    else:  # hill: share of the 100 width-0.1 intervals of [0, 10] holding a query
        coverage = len({min(HILL_BINS - 1, int(x * HILL_BINS / 10)) for x in queries}) / HILL_BINS
    best = float(env.best_value)
    return Trace(coverage=coverage, redundancy=_ratio(repeats, attempts), repeats=repeats,
                 steps=attempts, rmax=float(env.optimum), agent=best, exploit=best)
