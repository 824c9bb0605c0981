"""Dark Treasure Rooms layouts: the data and the seeded raw generator (docs/methods/envs.md#dark-treasure-rooms).

A layout is an n×n grid of rooms. Room ``r*n + c`` is the cell in row ``r`` (0 = north) and
column ``c`` (0 = west). A door joins two side-by-side rooms and is one object with one name,
seen from both rooms. Balls lie in rooms and give their reward when picked up. The start room,
the door budget C and the pickup limit K belong to the layout.

Frozen layouts (the suites' instances) live in ``layouts.json`` (generator version 1) and
``layouts_v2.json`` (version 2) next to this module and are never regenerated during
experiments (docs/methods/metric-optimal-exploitation-gap.md#decisions #1); :func:`frozen_layout` loads them.
``python -m clew.envs.rooms.generator [--version N]`` rebuilds a file from the fixed seeds.

Decisions (docs/methods/metric-optimal-exploitation-gap.md#decisions):

* Connectivity ``minigrid_connect_all`` [#1]: repeatedly pick a random room and a random wall
  that has a neighbour, add a door there if there is none, until every room is reachable from
  the start. ``tree`` (randomised DFS spanning tree) and ``ust`` (a uniformly random spanning
  tree, Wilson's algorithm: loop-erased random walks) are the tree-like alternatives;
  ``extra_door_prob`` adds doors between further adjacent pairs.
* Start room ``random`` (uniform), ``corner`` (room 0) or ``centre``: uniform among the rooms
  whose eccentricity in the door graph is at most the least one (the radius) plus
  ``centre_slack`` (drawn after the doors; the generator's version 2).
* 5 balls per layout by default [#2], never in the start room, two may share a room
  (``distinct_ball_rooms``: each ball in a room of its own, the generator's version 3);
  rewards are integers 1..10 [#3]; C = eccentricity e of the start room plus
  ``door_budget_slack`` [#4], or ⌈``door_budget_factor`` · e⌉ plus the slack (version 3).
* Names: distinct colour names from :mod:`.colours`, one per door and per ball.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
from dataclasses import dataclass, field
from functools import cached_property
from math import comb
from pathlib import Path
from typing import Any, ClassVar

from clew.envs.rooms.colours import COLOURS
from clew.envs.rooms.solver import bfs, layout_best_route

LAYOUTS_FILE = Path(__file__).with_name("layouts.json")  # generator version 1
LAYOUTS_FILES = {1: LAYOUTS_FILE, 2: Path(__file__).with_name("layouts_v2.json"),
                 3: Path(__file__).with_name("layouts_v3.json")}
NAME_RE = re.compile(r"^[a-z0-9]+(_[a-z0-9]+)*$")
CONNECTIVITY = ("minigrid_connect_all", "tree", "ust")
STARTS = ("random", "corner", "centre")
WALLS = ("north", "east", "south", "west")  # canonical door order in a room (docs/methods/envs.md#dark-treasure-rooms)


@dataclass(frozen=True)
class Thing:
    """A door or a ball, named by its colour; ``text`` is how observations and actions name it."""

    name: str
    kind: ClassVar[str] = ""

    @property
    def text(self) -> str:
        return f"{self.name} {self.kind}"


@dataclass(frozen=True)
class Door(Thing):
    rooms: tuple[int, int]  # the two rooms it joins, smaller index first
    kind: ClassVar[str] = "door"


@dataclass(frozen=True)
class Ball(Thing):
    room: int
    reward: int
    kind: ClassVar[str] = "ball"


@dataclass(frozen=True)
class Layout:
    """One fixed world: rooms, doors, balls, start room, door budget C and pickup limit K."""

    size: int
    start: int
    doors: tuple[Door, ...]
    balls: tuple[Ball, ...]
    door_budget: int
    max_pickups: int = 3
    id: str = ""
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    # --- geometry -------------------------------------------------------------------------
    @property
    def n_rooms(self) -> int:
        return self.size * self.size

    def wall(self, room: int, other: int) -> str:
        """The wall of ``room`` that a door to the adjacent ``other`` sits in."""
        return {-self.size: "north", 1: "east", self.size: "south", -1: "west"}[other - room]

    @cached_property
    def doors_of(self) -> dict[int, list[tuple[Door, int]]]:
        """room -> [(door, room behind it)] in wall order N, E, S, W."""
        out: dict[int, list[tuple[Door, int]]] = {r: [] for r in range(self.n_rooms)}
        for door in self.doors:
            a, b = door.rooms
            out[a].append((door, b))
            out[b].append((door, a))
        for room, lst in out.items():
            lst.sort(key=lambda pair: WALLS.index(self.wall(room, pair[1])))
        return out

    @cached_property
    def balls_of(self) -> dict[int, list[Ball]]:
        out: dict[int, list[Ball]] = {r: [] for r in range(self.n_rooms)}
        for ball in sorted(self.balls, key=lambda b: b.name):
            out[ball.room].append(ball)
        return out

    @cached_property
    def objects(self) -> dict[str, Door | Ball]:
        """Object text (``"teal door"``) -> the door or ball."""
        return {o.text: o for o in (*self.doors, *self.balls)}

    @cached_property
    def adjacency(self) -> dict[int, set[int]]:
        return {r: {other for _, other in lst} for r, lst in self.doors_of.items()}

    def distances(self, source: int | None = None) -> dict[int, int]:
        """Door distances from ``source`` (default: the start) to every reachable room."""
        return bfs(self.adjacency, self.start if source is None else source)

    @property
    def eccentricity(self) -> int:
        return max(self.distances().values())

    # --- what can be reached within one episode -------------------------------------------
    @cached_property
    def rooms_in_budget(self) -> set[int]:
        return {r for r, d in self.distances().items() if d <= self.door_budget}

    @cached_property
    def n_observation_states(self) -> int:
        """Distinct observation sets reachable in an episode (coverage denominator, docs/methods/metric-optimal-exploitation-gap.md#rooms-exploration-statistics).

        A room with b balls shows every subset left after removing up to K of them:
        sum_{k <= min(K, b)} C(b, k), which is 2^b for b <= 3 (the method page's formula).
        """
        return sum(
            sum(comb(len(self.balls_of[r]), k)
                for k in range(min(self.max_pickups, len(self.balls_of[r])) + 1))
            for r in self.rooms_in_budget
        )

    @cached_property
    def n_objects_in_budget(self) -> int:
        """Doors that can be traversed plus balls that can be picked up within the budget."""
        dist = self.distances()
        doors = sum(
            1 for d in self.doors
            if min(dist.get(d.rooms[0], 10**9), dist.get(d.rooms[1], 10**9)) < self.door_budget
        )
        return doors + sum(1 for b in self.balls if b.room in self.rooms_in_budget)

    # --- (de)serialisation ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "size": self.size,
            "start": self.start,
            "door_budget": self.door_budget,
            "max_pickups": self.max_pickups,
            "doors": [{"name": d.name, "rooms": list(d.rooms)} for d in self.doors],
            "balls": [{"name": b.name, "room": b.room, "reward": b.reward} for b in self.balls],
            "rmax": layout_best_route(self).value,
            "n_observation_states": self.n_observation_states,
            "n_objects": self.n_objects_in_budget,
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "layout") -> Layout:
        """Parse and validate; every problem names ``where`` and the offending field."""
        if not isinstance(data, dict):
            kind = type(data).__name__
            raise ValueError(f"{where}: must be a JSON object, got {kind}")  # noqa: TRY004

        def need_int(key: str, lo: int, default: Any = None) -> int:
            value = data.get(key, default)
            if not isinstance(value, int) or isinstance(value, bool) or value < lo:
                raise ValueError(f"{where}: field {key!r} must be an integer >= {lo}, "
                                 f"got {value!r}")
            return value

        size = need_int("size", 1)
        n_rooms = size * size
        start = need_int("start", 0)
        if start >= n_rooms:
            raise ValueError(f"{where}: start room {start} is outside the {size}x{size} grid")
        budget = need_int("door_budget", 1)
        pickups = need_int("max_pickups", 1, 3)
        names: set[str] = set()

        def check_name(name: Any, what: str) -> str:
            if not isinstance(name, str) or not NAME_RE.match(name):
                raise ValueError(f"{where}: {what} name {name!r} is not a snake_case name")
            if name in names:
                raise ValueError(f"{where}: name {name!r} is used twice")
            names.add(name)
            return name

        doors = []
        for i, d in enumerate(data.get("doors") or []):
            try:
                a, b = sorted(int(x) for x in d["rooms"])
                name = d["name"]
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"{where}: doors[{i}] needs 'name' and two 'rooms'") from None
            check_name(name, f"doors[{i}]")
            if not (0 <= a < n_rooms and 0 <= b < n_rooms) or not adjacent(a, b, size):
                raise ValueError(f"{where}: door {name!r} joins rooms {a} and {b}, "
                                 f"which are not side by side in a {size}x{size} grid")
            doors.append(Door(name, (a, b)))
        pairs = [d.rooms for d in doors]
        if len(set(pairs)) != len(pairs):
            raise ValueError(f"{where}: two doors join the same pair of rooms")
        balls = []
        for i, b in enumerate(data.get("balls") or []):
            try:
                name, room, reward = b["name"], b["room"], b["reward"]
            except (KeyError, TypeError):
                raise ValueError(f"{where}: balls[{i}] needs 'name', 'room' and 'reward'") from None
            check_name(name, f"balls[{i}]")
            if not isinstance(room, int) or not 0 <= room < n_rooms:
                raise ValueError(f"{where}: ball {name!r} lies in unknown room {room!r}")
            if not isinstance(reward, int) or isinstance(reward, bool) or reward < 0:
                raise ValueError(f"{where}: ball {name!r} has reward {reward!r}; "
                                 "rewards are integers >= 0")
            balls.append(Ball(name, room, reward))
        layout = cls(size, start, tuple(doors), tuple(balls), budget, pickups,
                     str(data.get("id", "")), dict(data.get("meta") or {}))
        if "rmax" in data:
            computed = layout_best_route(layout).value
            if computed != data["rmax"]:
                raise ValueError(f"{where}: stored rmax {data['rmax']!r} differs from the "
                                 f"solver's {computed} (layout data or solver changed)")
        return layout


def adjacent(a: int, b: int, size: int) -> bool:
    (ra, ca), (rb, cb) = divmod(a, size), divmod(b, size)
    return abs(ra - rb) + abs(ca - cb) == 1


def neighbours(room: int, size: int) -> list[int]:
    """Adjacent cells in wall order N, E, S, W."""
    r, c = divmod(room, size)
    out = []
    for dr, dc in ((-1, 0), (0, 1), (1, 0), (0, -1)):
        if 0 <= r + dr < size and 0 <= c + dc < size:
            out.append((r + dr) * size + c + dc)
    return out


# --- raw generation (docs/methods/envs.md#dark-treasure-rooms make_layout, without the explorability check) ---------------
def random_layout(
    size: int,
    rng: random.Random,
    *,
    n_balls: int = 5,
    connectivity: str = "minigrid_connect_all",
    start: str = "random",
    extra_door_prob: float = 0.0,
    door_budget_slack: int = 0,
    centre_slack: int = 0,
    max_pickups: int = 3,
    reward_range: tuple[int, int] = (1, 10),
    distinct_ball_rooms: bool = False,
    door_budget_factor: float = 1.0,
) -> Layout:
    """One random layout drawn from ``rng`` (the generator adds checks and retries)."""
    if size < 2:
        raise ValueError(f"rooms: grid size must be >= 2, got {size}")
    if connectivity not in CONNECTIVITY:
        raise ValueError(f"rooms: connectivity must be one of {CONNECTIVITY}, got {connectivity!r}")
    if start not in STARTS:
        raise ValueError(f"rooms: start must be one of {', '.join(STARTS)}, got {start!r}")
    n_rooms = size * size
    # "centre" picks its start once the doors exist; the walk is rooted at a random room then
    start_room = rng.randrange(n_rooms) if start in ("random", "centre") else 0
    pairs: set[tuple[int, int]] = set()
    if connectivity == "ust":
        pairs = wilson_tree(size, rng, start_room)
    elif connectivity == "tree":
        seen, stack = {start_room}, [start_room]
        while stack:  # randomised DFS
            u = stack[-1]
            fresh = [v for v in neighbours(u, size) if v not in seen]
            if not fresh:
                stack.pop()
                continue
            v = rng.choice(fresh)
            pairs.add((min(u, v), max(u, v)))
            seen.add(v)
            stack.append(v)
    else:
        adjacency: dict[int, set[int]] = {r: set() for r in range(n_rooms)}
        while len(bfs(adjacency, start_room)) < n_rooms:
            u = rng.randrange(n_rooms)
            v = rng.choice(neighbours(u, size))
            if (min(u, v), max(u, v)) not in pairs:
                pairs.add((min(u, v), max(u, v)))
                adjacency[u].add(v)
                adjacency[v].add(u)
    if extra_door_prob > 0:
        for u in range(n_rooms):
            for v in neighbours(u, size):
                if u < v and (u, v) not in pairs and rng.random() < extra_door_prob:
                    pairs.add((u, v))
    door_pairs = sorted(pairs)
    if start == "centre":
        start_room = rng.choice(centre_rooms(size, door_pairs, centre_slack))
    others = [r for r in range(n_rooms) if r != start_room]
    if distinct_ball_rooms:
        if n_balls > len(others):
            raise ValueError(f"rooms: {n_balls} balls in rooms of their own need more than the "
                             f"{len(others)} rooms besides the start")
        ball_rooms = rng.sample(others, n_balls)
    else:
        ball_rooms = [rng.choice(others) for _ in range(n_balls)]
    rewards = [rng.randint(*reward_range) for _ in range(n_balls)]
    if len(door_pairs) + n_balls > len(COLOURS):
        raise ValueError(f"rooms: {len(door_pairs) + n_balls} objects need more names than "
                         f"the {len(COLOURS)} colours available")
    names = rng.sample(COLOURS, len(door_pairs) + n_balls)
    doors = tuple(Door(names[i], p) for i, p in enumerate(door_pairs))
    balls = tuple(Ball(names[len(door_pairs) + i], ball_rooms[i], rewards[i])
                  for i in range(n_balls))
    provisional = Layout(size, start_room, doors, balls, 1, max_pickups)
    budget = math.ceil(door_budget_factor * provisional.eccentricity) + door_budget_slack
    return Layout(size, start_room, doors, balls, budget, max_pickups)


def wilson_tree(size: int, rng: random.Random, root: int) -> set[tuple[int, int]]:
    """A uniformly random spanning tree of the n×n room grid (Wilson's algorithm).

    From each room not yet in the tree (in index order), walk at random until the tree is hit,
    erasing loops as they close; the loop-free path joins the tree.
    """
    in_tree, pairs = {root}, set()
    for first in range(size * size):
        path, where = [first], {first: 0}
        while path[-1] not in in_tree:
            nxt = rng.choice(neighbours(path[-1], size))
            if nxt in where:  # a loop closed: erase it
                del path[where[nxt] + 1:]
                where = {room: i for i, room in enumerate(path)}
            else:
                where[nxt] = len(path)
                path.append(nxt)
        in_tree.update(path)
        pairs.update((min(a, b), max(a, b)) for a, b in itertools.pairwise(path))
    return pairs


def centre_rooms(size: int, door_pairs: list[tuple[int, int]], slack: int = 0) -> list[int]:
    """Rooms whose eccentricity is at most the least one plus ``slack``, in index order
    (``slack=0``: the door graph's centre)."""
    adjacency: dict[int, set[int]] = {r: set() for r in range(size * size)}
    for a, b in door_pairs:
        adjacency[a].add(b)
        adjacency[b].add(a)
    ecc = {r: max(bfs(adjacency, r).values()) for r in adjacency}
    least = min(ecc.values())
    return [r for r in sorted(ecc) if ecc[r] <= least + slack]


# --- frozen layouts -------------------------------------------------------------------------
_frozen: dict[str, dict[str, Any]] | None = None


def frozen_layouts() -> dict[str, dict[str, Any]]:
    """All frozen layouts of every generator version as JSON dicts, by id (read once).

    Version-1 ids are ``4x4-a`` ..; later versions' ids carry a ``v2-`` / ``v3-`` prefix, so ids
    never clash.
    """
    global _frozen
    if _frozen is None:
        found: dict[str, dict[str, Any]] = {}
        for path in LAYOUTS_FILES.values():
            try:
                data = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise ValueError(f"{path}: cannot read the frozen layouts: {exc}") from None
            for d in data["layouts"]:
                if d["id"] in found:
                    raise ValueError(f"{path}: layout id {d['id']!r} is also in another file")
                found[d["id"]] = d
        _frozen = found
    return _frozen


def frozen_layout(layout_id: str) -> Layout:
    layouts = frozen_layouts()
    if layout_id not in layouts:
        raise KeyError(f"rooms: no frozen layout {layout_id!r}; known: {', '.join(layouts)}")
    return Layout.from_dict(layouts[layout_id], where=f"frozen layout {layout_id}")
