"""One grid-map + task-DAG instance: the map, the DAG, the budget (docs/methods/envs.md#grid-map-with-task-dag).

An :class:`Instance` is plain, frozen data. It converts to and from the ``params`` dict of a
:class:`~clew.envs.base.Task` (``to_params`` / ``from_params``), so a task file carries the whole
generated instance and never depends on re-running the generator.

Conventions (docs/methods/envs.md#grid-map-with-task-dag): cells are integer pairs ``(x, y)``; ``up = y+1``, ``down = y-1``,
``left = x-1``, ``right = x+1`` (y grows upward). ``cells`` is the traversable set M; box cells
outside M are obstacles. Preconditions are DNF: ``options`` is a tuple of option sets, each
a tuple of parent names; ``()`` means primitive. The DAG rules shared by the env and the metric
(``prec``) live here so both read them from one place.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from clew.envs.measures import distances

Cell = tuple[int, int]

#: Moves in their fixed listing order (observations, legal_actions, tie-breaking).
DIRECTIONS: dict[str, Cell] = {"up": (0, 1), "down": (0, -1), "left": (-1, 0), "right": (1, 0)}
INSTANCE_FORMAT = "gridmap-instance"
INSTANCE_VERSION = 1

UNDISCOVERED, DISCOVERED, ACHIEVED = "undiscovered", "discovered", "achieved"


def step_cell(cell: Cell, direction: str) -> Cell:
    dx, dy = DIRECTIONS[direction]
    return (cell[0] + dx, cell[1] + dy)


@dataclass(frozen=True)
class Node:
    """A task node: its symbolic name, its cell, its DNF prerequisites and its children."""

    name: str
    cell: Cell
    options: tuple[tuple[str, ...], ...] = ()
    children: tuple[str, ...] = ()

    @property
    def primitive(self) -> bool:
        return not self.options


def prec(node: Node, achieved: Mapping[str, Any] | set[str]) -> bool:
    """Eq. 4 in DNF form: primitive, or some option set fully achieved (docs/methods/envs.md#grid-map-with-task-dag).

    ``achieved`` is anything supporting ``in`` over achieved node names.
    """
    if not node.options:
        return True
    return any(all(p in achieved for p in option) for option in node.options)


class Distances:
    """True-map BFS geodesics d(a, b) inside M (docs/methods/envs.md#grid-map-with-task-dag), one table per source, lazily."""

    def __init__(self, cells: frozenset[Cell]):
        self.cells = cells
        self._tables: dict[Cell, dict[Cell, int]] = {}

    def table(self, src: Cell) -> dict[Cell, int]:
        tab = self._tables.get(src)
        if tab is None:
            tab = self._tables[src] = bfs(self.cells, src)
        return tab

    def __call__(self, a: Cell, b: Cell) -> int:
        return self.table(a)[b]


def bfs(cells: frozenset[Cell] | set[Cell], src: Cell) -> dict[Cell, int]:
    """Shortest 4-neighbour path lengths from ``src`` to every cell of ``cells`` it reaches."""
    return distances(src, lambda c: [n for dx, dy in DIRECTIONS.values()
                                     if (n := (c[0] + dx, c[1] + dy)) in cells])


@dataclass(frozen=True)
class Instance:
    """The full ground truth of one episode (docs/methods/metric-explore-exploit-error.md#per-step-labels "Instance JSON")."""

    width: int
    height: int
    cells: frozenset[Cell]
    start: Cell
    nodes: tuple[Node, ...]
    goal: str
    budget: int
    alpha: int = 3
    seed: int = 0
    presets: Mapping[str, Any] = field(default_factory=dict)
    generator_version: int = 1

    def __post_init__(self) -> None:
        validate(self)

    # --- derived views (cached; the instance is immutable) -----------------------------
    @cached_property
    def node_by_name(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}

    @cached_property
    def node_at(self) -> dict[Cell, str]:
        return {n.cell: n.name for n in self.nodes}

    @cached_property
    def adj(self) -> dict[Cell, tuple[Cell, ...]]:
        """adj(c): neighbours in M, in the fixed direction order."""
        return {c: tuple(n for d in DIRECTIONS if (n := step_cell(c, d)) in self.cells)
                for c in self.cells}

    @cached_property
    def moves(self) -> dict[Cell, tuple[str, ...]]:
        """Admissible moves at each cell, in the fixed direction order."""
        return {c: tuple(d for d in DIRECTIONS if step_cell(c, d) in self.cells)
                for c in self.cells}

    @cached_property
    def distances(self) -> Distances:
        return Distances(self.cells)

    @property
    def goal_node(self) -> Node:
        return self.node_by_name[self.goal]

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def parents(self, name: str) -> set[str]:
        return {p for option in self.node_by_name[name].options for p in option}

    @cached_property
    def _moves_to_goal(self) -> dict[tuple[Cell, frozenset[str]], float]:
        return {}  # memo of moves_to_goal: search asks again for the states it revisits

    def moves_to_goal(self, pos: Cell, achieved: frozenset[str]) -> float:
        """Fewest moves to achieve the goal from ``pos`` with ``achieved`` done and the whole
        map known (inf when impossible): Dijkstra over (cell, achieved set), walking shortest
        paths between node cells and assuming the cells passed on the way achieve nothing, so
        the result is an upper bound. Ground truth for ``GridMapEnv.progress``."""
        if self.goal in achieved:
            return 0.0
        key = (pos, achieved)
        if key in self._moves_to_goal:
            return self._moves_to_goal[key]
        best = math.inf
        heap = [(0, 0, pos, achieved)]
        seen: dict[tuple, int] = {}
        counter = 0  # heap tie-breaker: cells and frozensets do not compare
        while heap:
            d, _, cell, got = heapq.heappop(heap)
            if self.goal in got:
                best = d
                break
            if seen.get((cell, got), math.inf) <= d:
                continue
            seen[(cell, got)] = d
            for node in self.nodes:
                if node.name in got or not prec(node, got):
                    continue
                counter += 1
                heapq.heappush(heap, (d + self.distances(cell, node.cell), counter, node.cell,
                                      got | {node.name}))
        self._moves_to_goal[key] = best
        return best

    # --- (de)serialisation ---------------------------------------------------------------
    def to_params(self) -> dict[str, Any]:
        """The JSON-able ``Task.params`` dict (round-trips through ``from_params``)."""
        return {
            "format": INSTANCE_FORMAT,
            "version": INSTANCE_VERSION,
            "width": self.width,
            "height": self.height,
            "cells": [list(c) for c in sorted(self.cells)],
            "start": list(self.start),
            "nodes": [
                {"name": n.name, "cell": list(n.cell),
                 "options": [list(o) for o in n.options], "children": list(n.children)}
                for n in self.nodes
            ],
            "goal": self.goal,
            "budget": self.budget,
            "alpha": self.alpha,
            "seed": self.seed,
            "presets": _jsonable(self.presets),
            "generator_version": self.generator_version,
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Instance:
        """Rebuild an instance from ``Task.params``; a bad field raises ValueError naming it."""
        if not isinstance(params, Mapping):
            got = type(params).__name__
            raise ValueError(f"gridmap params must be an object, got {got}")  # noqa: TRY004
        if params.get("format", INSTANCE_FORMAT) != INSTANCE_FORMAT:
            raise ValueError(f"gridmap params: format {params.get('format')!r} is not "
                             f"{INSTANCE_FORMAT!r}")
        missing = [k for k in ("width", "height", "cells", "start", "nodes", "goal", "budget")
                   if k not in params]
        if missing:
            raise ValueError(f"gridmap params: missing field(s) {', '.join(missing)} "
                             "(generate tasks with clew.envs.gridmap.generator.generate_task)")
        try:
            nodes = tuple(
                Node(name=str(n["name"]), cell=_cell(n["cell"], f"nodes[{i}].cell"),
                     options=tuple(tuple(str(p) for p in o) for o in n.get("options", [])),
                     children=tuple(str(c) for c in n.get("children", [])))
                for i, n in enumerate(params["nodes"])
            )
            return cls(
                width=int(params["width"]), height=int(params["height"]),
                cells=frozenset(_cell(c, f"cells[{i}]") for i, c in enumerate(params["cells"])),
                start=_cell(params["start"], "start"), nodes=nodes, goal=str(params["goal"]),
                budget=int(params["budget"]), alpha=int(params.get("alpha", 3)),
                seed=int(params.get("seed", 0)), presets=dict(params.get("presets", {})),
                generator_version=int(params.get("generator_version", 1)),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"gridmap params: malformed field ({exc!r})") from None

    # --- display -------------------------------------------------------------------------
    def render(self, marks: Mapping[Cell, str] | None = None) -> str:
        """ASCII picture, top row = highest y: '#' obstacle, '.' open, 'S' start, node initials."""
        marks = dict(marks or {})
        rows = []
        for y in range(self.height - 1, -1, -1):
            row = []
            for x in range(self.width):
                c = (x, y)
                if c in marks:
                    row.append(marks[c])
                elif c not in self.cells:
                    row.append("#")
                elif c == self.start:
                    row.append("S")
                elif c in self.node_at:
                    row.append("G" if self.node_at[c] == self.goal else "o")
                else:
                    row.append(".")
            rows.append("".join(row))
        return "\n".join(rows)


def _cell(value: Any, where: str) -> Cell:
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise ValueError(f"gridmap params: {where} must be a pair of integers [x, y], got {value!r}")
    return (value[0], value[1])


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def validate(inst: Instance) -> None:
    """Check every structural promise of docs/methods/envs.md#grid-map-with-task-dag; raise ValueError naming the field."""
    where = "gridmap instance"
    if inst.width < 1 or inst.height < 1:
        raise ValueError(f"{where}: width and height must be positive")
    for c in inst.cells:
        if not (0 <= c[0] < inst.width and 0 <= c[1] < inst.height):
            raise ValueError(f"{where}: cell {list(c)} is outside the {inst.width}x{inst.height} box")
    if inst.start not in inst.cells:
        raise ValueError(f"{where}: start {list(inst.start)} is not a traversable cell")
    names = [n.name for n in inst.nodes]
    if len(set(names)) != len(names) or not all(names):
        raise ValueError(f"{where}: node names must be non-empty and unique, got {names}")
    cells = [n.cell for n in inst.nodes]
    if len(set(cells)) != len(cells):
        raise ValueError(f"{where}: two nodes share a cell")
    for n in inst.nodes:
        if n.cell not in inst.cells:
            raise ValueError(f"{where}: node {n.name} sits on non-traversable cell {list(n.cell)}")
        if n.cell == inst.start:
            raise ValueError(f"{where}: node {n.name} sits on the start cell")
        for option in n.options:
            if not option:
                raise ValueError(f"{where}: node {n.name} has an empty option set")
            for p in option:
                if p not in names:
                    raise ValueError(f"{where}: node {n.name} needs unknown node {p!r}")
    if inst.goal not in names:
        raise ValueError(f"{where}: goal {inst.goal!r} is not a node")
    # children must be exactly the union of the nodes that list this one as a parent
    expected = {name: set() for name in names}
    for n in inst.nodes:
        for option in n.options:
            for p in option:
                expected[p].add(n.name)
    for n in inst.nodes:
        if set(n.children) != expected[n.name]:
            raise ValueError(f"{where}: node {n.name} lists children {sorted(n.children)} but "
                             f"its dependants are {sorted(expected[n.name])}")
    sinks = [name for name in names if not expected[name]]
    if sinks != [inst.goal]:
        raise ValueError(f"{where}: the goal must be the unique sink, sinks are {sinks}")
    _check_acyclic(inst.nodes, where)
    if bfs(inst.cells, inst.start).keys() != inst.cells:
        raise ValueError(f"{where}: the traversable cells are not connected")
    if inst.budget < 1:
        raise ValueError(f"{where}: budget must be positive")


def pit_cells(inst: Instance, count: int, key: str) -> frozenset[Cell]:
    """``count`` pits for the map of ``inst`` (docs/methods/envs.md#pits): blocked cells of its
    box, or of the row above and the column right of it, that touch exactly one traversable
    cell (a full box has few), drawn with a generator seeded by ``key`` (the
    task), so every run of a task has the same pits. No two pits touch: each is a leaf, no way
    between two cells of the map passes through one, and distances on the map stay as they were."""
    candidates = sorted(
        (x, y) for x in range(inst.width + 1) for y in range(inst.height + 1)
        if (x, y) not in inst.cells
        and sum(step_cell((x, y), d) in inst.cells for d in DIRECTIONS) == 1)
    random.Random(f"pits:{key}").shuffle(candidates)
    pits: set[Cell] = set()
    for cell in candidates:
        if len(pits) >= count:
            break
        if not any(step_cell(cell, d) in pits for d in DIRECTIONS):
            pits.add(cell)
    return frozenset(pits)


def _check_acyclic(nodes: Iterable[Node], where: str) -> None:
    parents = {n.name: {p for o in n.options for p in o} for n in nodes}
    done: set[str] = set()
    while len(done) < len(parents):
        ready = [u for u, ps in parents.items() if u not in done and ps <= done]
        if not ready:
            raise ValueError(f"{where}: the prerequisite graph has a cycle among "
                             f"{sorted(set(parents) - done)}")
        done.update(ready)


def parse_ascii(rows: list[str]) -> tuple[int, int, frozenset[Cell], dict[str, Cell]]:
    """Read a hand-drawn map: first row = top (highest y); '#' blocks, any other char is open.

    Returns (W, H, cells, marks) where ``marks`` maps every character other than '.' and '#' to
    its cell (each such character must appear once). Used by the semantic maps and tests.
    """
    height = len(rows)
    width = max((len(r) for r in rows), default=0)
    if height == 0 or any(len(r) != width for r in rows):
        raise ValueError("ascii map: rows must be non-empty and of equal length")
    cells: set[Cell] = set()
    marks: dict[str, Cell] = {}
    for i, row in enumerate(rows):
        y = height - 1 - i
        for x, ch in enumerate(row):
            if ch == "#":
                continue
            cells.add((x, y))
            if ch != ".":
                if ch in marks:
                    raise ValueError(f"ascii map: mark {ch!r} appears twice")
                marks[ch] = (x, y)
    return width, height, frozenset(cells), marks


def build_instance(width: int, height: int, cells: Iterable[Cell], start: Cell,
                   dag: Mapping[str, list[list[str]]], loc: Mapping[str, Cell], goal: str,
                   alpha: int = 3, seed: int = 0, presets: Mapping[str, Any] | None = None,
                   generator_version: int = 1) -> Instance:
    """Assemble an instance from a DNF prerequisite map; children and B = alpha·|M| derived."""
    cells = frozenset(cells)
    children: dict[str, list[str]] = {u: [] for u in dag}
    for u, options in dag.items():
        for p in sorted({p for o in options for p in o}):
            if p not in children:
                raise ValueError(f"gridmap instance: node {u} needs unknown node {p!r}")
            children[p].append(u)
    nodes = tuple(
        Node(name=u, cell=loc[u], options=tuple(tuple(o) for o in dag[u]),
             children=tuple(children[u]))
        for u in dag
    )
    return Instance(width=width, height=height, cells=cells, start=start, nodes=nodes, goal=goal,
                    budget=alpha * len(cells), alpha=alpha, seed=seed,
                    presets=dict(presets or {}), generator_version=generator_version)
