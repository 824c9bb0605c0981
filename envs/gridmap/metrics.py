"""Exploration and exploitation errors of a grid-map trajectory (docs/methods/metric-explore-exploit-error.md).

Policy-agnostic: the score depends only on the task (the ground-truth instance) and the list of
executed actions. The module replays the actions with its own incremental bookkeeping (it does
not call the env), so a trajectory produced by any framework can be scored, and tests can check
that the replayed statuses equal the ones the online env reported.

Per step t (action p(t) → p(t+1)), with P(t), U(t), the case and T(t) of Table 1 taken after
arrival processing at p(t):

* progress = enters an unobserved cell, or achieves a pending node;
* Gain = p(t+1) ∈ T(t), or some z ∈ T(t) has d(p(t+1), z) < d(p(t), z) (existential form);
* err: 0 on progress; else 1 without Gain; else 0 when |T| = 1; else 1 iff the stale score of the
  no-progress segment rises when p(t+1) is appended (first match wins);
* attribution: case 1 → exploration; cases 2, 3 → exploitation; case 4 → both;
* exploration_error = errors in cases 1, 4 / steps in cases 1, 4; exploitation_error = errors in
  cases 2, 3, 4 / steps in cases 2, 3, 4; NaN when a denominator is 0.

Linear time: U(t), P(t) and the stale score's vertex/edge counters are updated in O(1) per step;
the case and T(t) are recomputed only when arrival processing changed something, which happens
only on progress events (invariant 3 of docs/methods/metric-explore-exploit-error.md#target-set-and-cases); distance tables are BFS'd once per target cell.

Decisions taken (docs/methods/metric-explore-exploit-error.md#decisions):

* the error of a move is decided by comparing the segment's stale score with and without
  p(t+1) appended. A segment starts at p(0) or at the cell entered by a progress move, and that
  cell counts as one visit.
* ``case2_strict=True`` also flags Case-2 progress steps with Gain = 0 (default off).
* ``distance_mode="true"`` (default) uses BFS on the true map; ``"known"`` uses BFS over the
  observed ∪ frontier cells at the time of the step.
* an invalid action (unparsable text, unknown word, or a blocked direction) leaves the agent
  in place: progress 0, Gain 0, err 1 attributed by the current case (``score_noop="error"``),
  or left out of every count (``score_noop="exclude"``); it adds nothing to the stale walk. The
  budget clock follows the env's ``invalid_policy``; with ``truncate_at_budget`` the actions
  after the budget is used (or after the goal is achieved) are ignored and counted.
* aggregation: per-episode ratios, mean over episodes ignoring NaN; pooled ratios and raw
  counts are reported too. "steps" is the mean over successful episodes, with the
  all-episode mean alongside.
* the exploration fraction per normalised-time bin counts steps that enter an unobserved cell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from clew.envs.base import Task
from clew.envs.gridmap.actions import parse_direction
from clew.envs.gridmap.env import INVALID_POLICIES
from clew.envs.gridmap.instance import (
    ACHIEVED,
    DISCOVERED,
    UNDISCOVERED,
    Cell,
    Instance,
    bfs,
    prec,
    step_cell,
)
from clew.envs.measures import mean_and_stderr
from clew.envs.trace import RecordStep, StatePath, classify, step_infos

DISTANCE_MODES = ("true", "known")
NOOP_SCORING = ("error", "exclude")
EXPLORE_CASES = (1, 4)
EXPLOIT_CASES = (2, 3, 4)


class StaleWalk:
    """The stale score S = c + e + n of one no-progress segment, kept incrementally (docs/methods/metric-explore-exploit-error.md).

    c = |E| − |V| + 1 (cyclomatic number of the walk's graph), e = Σ max(m(edge) − 2, 0) over
    undirected edges, n = Σ max(m(vertex) − 2, 0); the first cell counts as one visit.
    """

    __slots__ = ("e", "edges", "last", "n", "vertices")

    def __init__(self, start: Cell):
        self.reset(start)

    def reset(self, start: Cell) -> None:
        self.vertices: dict[Cell, int] = {start: 1}
        self.edges: dict[tuple[Cell, Cell], int] = {}
        self.e = 0
        self.n = 0
        self.last = start

    @property
    def c(self) -> int:
        return len(self.edges) - len(self.vertices) + 1

    @property
    def parts(self) -> tuple[int, int, int]:
        return self.c, self.e, self.n

    @property
    def score(self) -> int:
        return self.c + self.e + self.n

    def preview(self, q: Cell) -> tuple[int, int, int]:
        """(c, e, n) of the walk with ``q`` appended, without changing it."""
        p = self.last
        key = (p, q) if p <= q else (q, p)
        mv = self.vertices.get(q, 0)
        me = self.edges.get(key, 0)
        c = len(self.edges) + (me == 0) - len(self.vertices) - (mv == 0) + 1
        return c, self.e + (me >= 2), self.n + (mv >= 2)

    def append(self, q: Cell) -> None:
        p = self.last
        key = (p, q) if p <= q else (q, p)
        mv = self.vertices.get(q, 0) + 1
        me = self.edges.get(key, 0) + 1
        self.vertices[q] = mv
        self.edges[key] = me
        self.e += me > 2
        self.n += mv > 2
        self.last = q


def stale_parts(walk: Sequence[Cell]) -> tuple[int, int, int]:
    """(c, e, n) of a whole walk (first cell counts as a visit)."""
    sw = StaleWalk(walk[0])
    for q in walk[1:]:
        sw.append(q)
    return sw.parts


@dataclass(slots=True)
class StepLabel:
    """The docs/methods/metric-explore-exploit-error.md#per-step-labels per-step record of the metric."""

    t: int
    p: Cell
    q: Cell
    action: str | None
    invalid: bool
    case: int
    n_targets: int
    pending: tuple[str, ...]
    n_unobserved: int
    progress: bool
    new_cell: bool
    gain: bool
    c: int
    e: int
    n: int
    S_before: int
    S_after: int
    err: int | None
    err_explore: int
    err_exploit: int
    backtrack: int | None = None  # the state id an accepted backtrack returned to

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["p"], d["q"], d["pending"] = list(self.p), list(self.q), list(self.pending)
        return d


@dataclass
class TrajectoryScore:
    """Per-step labels and the episode summary of docs/methods/metric-explore-exploit-error.md#per-step-labels."""

    labels: list[StepLabel]
    success: bool
    steps: int
    exploration_error: float
    exploitation_error: float
    explore_steps: int
    explore_errors: int
    exploit_steps: int
    exploit_errors: int
    case_counts: dict[int, int] = field(default_factory=dict)
    err_counts: dict[int, int] = field(default_factory=dict)
    invalid_count: int = 0
    ignored_actions: int = 0
    final_position: Cell = (0, 0)
    status: dict[str, str] = field(default_factory=dict)

    @property
    def invalid_rate(self) -> float:
        return self.invalid_count / self.steps if self.steps else math.nan

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "success": self.success,
            "steps": self.steps,
            "exploration_error": self.exploration_error,
            "exploitation_error": self.exploitation_error,
            "explore_steps": self.explore_steps,
            "explore_errors": self.explore_errors,
            "exploit_steps": self.exploit_steps,
            "exploit_errors": self.exploit_errors,
            "invalid_count": self.invalid_count,
            "invalid_rate": self.invalid_rate,
            "ignored_actions": self.ignored_actions,
            "new_cell_steps": sum(1 for lab in self.labels if lab.new_cell),
        }
        for case in (1, 2, 3, 4):
            out[f"case{case}_steps"] = self.case_counts.get(case, 0)
            out[f"case{case}_errors"] = self.err_counts.get(case, 0)
        return out


def as_instance(task: Task | Instance) -> Instance:
    if isinstance(task, Instance):
        return task
    if task.env != "gridmap":
        raise ValueError(f"explore_exploit metric: task {task.id!r} is of env {task.env!r}, "
                         "not gridmap")
    return Instance.from_params(task.params)


def score_trajectory(task: Task | Instance, actions: Sequence[str], *, case2_strict: bool = False,
                     distance_mode: str = "true", score_noop: str = "error",
                     invalid_policy: str = "stay_and_count", max_retries: int = 3,
                     truncate_at_budget: bool = True,
                     infos: Sequence[Any] | None = None) -> TrajectoryScore:
    """Score the executed ``actions`` of one episode of ``task`` (docs/methods/metric-explore-exploit-error.md).

    ``infos``: each step's recorded info, when known; it says which steps were runner steps
    (backtracks, replies without an action), else ``backtrack S<k>`` strings are backtracks
    (docs/methods/metric-explore-exploit-error.md#backtracks)."""
    if distance_mode not in DISTANCE_MODES:
        raise ValueError(f"explore_exploit: distance_mode {distance_mode!r} is not one of "
                         f"{', '.join(DISTANCE_MODES)}")
    if score_noop not in NOOP_SCORING:
        raise ValueError(f"explore_exploit: score_noop {score_noop!r} is not one of "
                         f"{', '.join(NOOP_SCORING)}")
    if invalid_policy not in INVALID_POLICIES:
        raise ValueError(f"explore_exploit: invalid_policy {invalid_policy!r} is not one of "
                         f"{', '.join(INVALID_POLICIES)}")
    inst = as_instance(task)
    adj, moves, node_at, nodes = inst.adj, inst.moves, inst.node_at, inst.node_by_name
    goal, goal_cell = inst.goal, inst.goal_node.cell
    true_dist = inst.distances

    status = {u: UNDISCOVERED for u in nodes}
    achieved: set[str] = set()
    pending: set[str] = set()
    observed: set[Cell] = set()
    frontier: set[Cell] = set()

    def achieve(u: str) -> None:
        status[u] = ACHIEVED
        achieved.add(u)
        pending.discard(u)
        for child in nodes[u].children:  # only a parent's achievement can make a child ready
            if status[child] == DISCOVERED and prec(nodes[child], achieved):
                pending.add(child)

    def arrive(c: Cell) -> bool:
        """docs/methods/envs.md#grid-map-with-task-dag arrival processing; True when anything changed (only on progress events)."""
        changed = False
        if c not in observed:
            observed.add(c)
            frontier.discard(c)
            frontier.update(n for n in adj[c] if n not in observed)
            changed = True
        u = node_at.get(c)
        if u is not None:
            if status[u] == UNDISCOVERED:
                status[u] = DISCOVERED
                changed = True
            if status[u] == DISCOVERED and prec(nodes[u], achieved):
                achieve(u)
                changed = True
        return changed

    pos = inst.start
    arrive(pos)
    steps: list[RecordStep] = classify(actions, infos)
    ids = StatePath()
    states = {0: (pos, frozenset(achieved))}  # per state id: the cell and the achieved nodes
    seg = StaleWalk(pos)
    dirty = True
    case, targets, tables = 1, frozenset(), []
    pending_cells: frozenset[Cell] = frozenset()
    pending_names: tuple[str, ...] = ()
    n_unobserved = 0
    gain_cache: dict[tuple[Cell, Cell], bool] = {}

    labels: list[StepLabel] = []
    case_counts = {1: 0, 2: 0, 3: 0, 4: 0}
    err_counts = {1: 0, 2: 0, 3: 0, 4: 0}
    clock = consecutive_invalid = invalid_count = 0
    done = success = False
    processed = 0

    for t, record_step in enumerate(steps):
        action = record_step.action
        if done:
            break
        processed += 1
        if dirty:  # new segment: P, U, case and T are fixed until the next progress event
            pending_cells = frozenset(nodes[u].cell for u in pending)
            pending_names = tuple(sorted(pending))
            n_unobserved = len(frontier)
            if not pending:
                case, targets = 1, frozenset(frontier)
            elif goal in pending:
                case, targets = 2, frozenset([goal_cell])
            elif not frontier:
                case, targets = 3, pending_cells
            else:
                case, targets = 4, frozenset(frontier) | pending_cells
            assert targets, "invariant 2 of docs/methods/metric-explore-exploit-error.md#target-set-and-cases broken: no target before the goal"
            if distance_mode == "true":
                tables = [true_dist.table(z) for z in targets]
            else:
                known = observed | frontier
                tables = [bfs(known, z) for z in targets]
            gain_cache = {}
            dirty = False

        p = pos
        direction = parse_direction(action) if record_step.kind == "env" else None
        s_before = seg.score
        back = (ids.resolve(record_step, True) if record_step.kind == "backtrack" else None)
        if back is not None:
            # An accepted backtrack: one step to the cell of S<k>, a visited cell, so never
            # progress; Gain and the stale score as for a move, the jump being one traversal of
            # the (possibly virtual) edge between the two cells; then the world of S<k>.
            q, kept = states[back]
            new_cell = progress = False
            gain = q in targets or any(tab[q] < tab[p] for tab in tables)
            if q == p:
                c, e, n = seg.parts
                s_after = s_before
            else:
                c, e, n = seg.preview(q)
                s_after = c + e + n
            if not gain:
                err = 1
            elif len(targets) == 1:
                err = 0
            else:
                err = int(s_after > s_before)
            if q != p:
                seg.append(q)
            pos = q
            ids.cut(back)
            if kept != achieved:  # the world of S<k>: its achievements, what was seen stays known
                achieved.clear()
                achieved.update(kept)
                for u in nodes:
                    if status[u] != UNDISCOVERED:
                        status[u] = ACHIEVED if u in achieved else DISCOVERED
                pending.clear()
                pending.update(u for u in nodes if status[u] == DISCOVERED
                               and prec(nodes[u], achieved))
                dirty = True
            consecutive_invalid = 0  # as in the snapshot, taken after a valid move
            clock += 1
            invalid = False
            direction = action
        elif record_step.kind == "env" and direction is not None and direction in moves[p]:
            q = step_cell(p, direction)
            new_cell = q not in observed
            progress = new_cell or q in pending_cells
            gain = gain_cache.get((p, q))
            if gain is None:
                gain = gain_cache[(p, q)] = (q in targets
                                             or any(tab[q] < tab[p] for tab in tables))
            c, e, n = seg.preview(q)
            s_after = c + e + n
            if progress:
                err: int | None = int(case2_strict and case == 2 and not gain)
            elif not gain:
                err = 1
            elif len(targets) == 1:
                err = 0
            else:
                err = int(s_after > s_before)
            if progress:
                seg.reset(q)
            else:
                seg.append(q)
            pos = q
            dirty = arrive(q)
            assert progress or not dirty, "invariant 3 of docs/methods/metric-explore-exploit-error.md#target-set-and-cases broken: change without progress"
            states[ids.forward()] = (q, frozenset(achieved))
            consecutive_invalid = 0
            clock += 1
            invalid = False
        else:  # no move: an invalid action, a refused backtrack or a reply without an action
            q, new_cell, progress, gain = p, False, False, False
            c, e, n = seg.parts
            s_after = s_before
            err = 1 if score_noop == "error" else None
            invalid = True
            invalid_count += 1
            if record_step.kind != "env":  # a runner step, always charged
                clock += 1
                direction = action if record_step.kind == "backtrack" else None
            else:
                consecutive_invalid += 1
                if not (invalid_policy == "retry_without_step"
                        and consecutive_invalid <= max_retries):
                    clock += 1
                    consecutive_invalid = 0  # a charged step starts a fresh round of retries

        if err is not None:
            case_counts[case] += 1
            err_counts[case] += err
        labels.append(StepLabel(
            t=t, p=p, q=q, action=direction, invalid=invalid, case=case,
            n_targets=len(targets), pending=pending_names, n_unobserved=n_unobserved,
            progress=progress, new_cell=new_cell, gain=gain, c=c, e=e, n=n,
            S_before=s_before, S_after=s_after, err=err,
            err_explore=(err or 0) if case in EXPLORE_CASES else 0,
            err_exploit=(err or 0) if case in EXPLOIT_CASES else 0, backtrack=back,
        ))
        if status[goal] == ACHIEVED:
            done = success = True
        elif truncate_at_budget and clock >= inst.budget:
            done = True

    explore_steps = sum(case_counts[k] for k in EXPLORE_CASES)
    explore_errors = sum(err_counts[k] for k in EXPLORE_CASES)
    exploit_steps = sum(case_counts[k] for k in EXPLOIT_CASES)
    exploit_errors = sum(err_counts[k] for k in EXPLOIT_CASES)
    return TrajectoryScore(
        labels=labels, success=success, steps=processed,
        exploration_error=explore_errors / explore_steps if explore_steps else math.nan,
        exploitation_error=exploit_errors / exploit_steps if exploit_steps else math.nan,
        explore_steps=explore_steps, explore_errors=explore_errors,
        exploit_steps=exploit_steps, exploit_errors=exploit_errors,
        case_counts=case_counts, err_counts=err_counts, invalid_count=invalid_count,
        ignored_actions=len(actions) - processed, final_position=pos, status=dict(status),
    )


def episode_metrics(task: Task, episode: dict[str, Any]) -> dict[str, Any]:
    """The registered metric: summary numbers plus the per-step ``labels`` list; nothing for an
    episode on a map with pits (docs/methods/envs.md#pits), whose moves its replay cannot follow
    (the record's own outcome stands)."""
    if isinstance(episode, dict) and (episode.get("env_options") or {}).get("pits"):
        return {}
    actions = episode.get("actions") if isinstance(episode, dict) else None
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise ValueError(f"explore_exploit metric: episode of task {task.id!r} needs "
                         "'actions', a list of strings")
    score = score_trajectory(task, actions, infos=step_infos(episode, len(actions)))
    out = score.summary()
    out["labels"] = [lab.to_dict() for lab in score.labels]
    return out


def aggregate(per_episode: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """docs/methods/metric-explore-exploit-error.md#aggregation across episodes (each item an ``episode_metrics`` dict or a summary)."""
    out: dict[str, Any] = {"episodes": len(per_episode)}
    if not per_episode:
        return out
    out["success_rate"] = sum(bool(m["success"]) for m in per_episode) / len(per_episode)
    for key in ("exploration_error", "exploitation_error"):
        mean, stderr, n = mean_and_stderr([m[key] for m in per_episode])
        out[key], out[f"{key}_stderr"], out[f"{key}_n"] = mean, stderr, n
    for key, num, den in (("exploration_error_pooled", "explore_errors", "explore_steps"),
                          ("exploitation_error_pooled", "exploit_errors", "exploit_steps"),
                          ("invalid_rate_pooled", "invalid_count", "steps")):
        total = sum(m[den] for m in per_episode)
        out[key] = sum(m[num] for m in per_episode) / total if total else math.nan
    for key in ("explore_steps", "explore_errors", "exploit_steps", "exploit_errors",
                "invalid_count"):
        out[f"{key}_total"] = sum(m[key] for m in per_episode)
    wins = [m["steps"] for m in per_episode if m["success"]]
    out["steps_success_mean"] = sum(wins) / len(wins) if wins else math.nan
    out["steps_mean"] = sum(m["steps"] for m in per_episode) / len(per_episode)
    return out


def exploration_fraction_bins(labels: Sequence[StepLabel | dict[str, Any]],
                              bins: int = 10) -> list[float]:
    """The fraction of steps entering an unobserved cell in each bin of t/T (NaN if empty)."""
    total = len(labels)
    hits, counts = [0] * bins, [0] * bins
    for i, lab in enumerate(labels):
        new = lab["new_cell"] if isinstance(lab, dict) else lab.new_cell
        b = min(bins - 1, i * bins // total)
        counts[b] += 1
        hits[b] += bool(new)
    return [h / c if c else math.nan for h, c in zip(hits, counts)]
