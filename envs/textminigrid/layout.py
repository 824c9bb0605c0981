"""TextMiniGrid layouts: the seeded BabyAI generator and exact rebuilds from data (docs/methods/envs.md#textminigrid).

Two MiniGrid level classes live here:

* :class:`GeneratedLevel` is the recommended generator of docs/methods/envs.md#textminigrid, a ``RoomGridLevel`` subclass that
  follows BabyAI's ``LevelGen`` conventions: ``n × n`` rooms with a 4×4 interior
  (``room_size=6``), at most one locked door (probability 0.5 when n > 1, its key in another
  room), ``connect_all`` for the rest, exactly ``k`` objects per room (the key counts), the
  agent in a random room other than the locked one, and a PickUp mission whose target is unique
  by (color, type) over the whole level. Its randomness is MiniGrid's own ``np_random`` seeded by
  ``reset(seed=...)``, so a layout is a pure function of (params, seed).
* :class:`LayoutLevel` rebuilds a level from a :class:`Layout` (plain data, no RNG). Tasks carry
  the layout in their params, so a task file is self-contained and does not depend on future
  ``numpy``/``minigrid`` versions drawing the same random numbers.

Decisions (docs/methods/envs.md#textminigrid):

* 1, 4, 9 rooms (``rooms_per_side`` 1, 2, 3); grids 6×6, 11×11, 16×16.
* as above; ``locked_room_prob = 0.5``; the locked-door key counts toward its room's k.
* BabyAI's quirk is kept by default (objects are placed while ``agent_pos`` is still
  RoomGrid's dummy centre, so ``reject_next_to`` excludes a cross around it);
  ``uniform_placement=True`` moves the dummy off the grid first.
* Rooms are filled, and target candidates listed, in row-major order (``for j in rows: for i in
  cols``, i.e. the order of ``room_grid``). With this order seed 16 at 2×2 rooms, k = 3 gives
  exactly the docs/methods/envs.md#textminigrid worked example (checked by the tests); column-major order does not.
* The generator only draws PickUp missions (docs/methods/envs.md#textminigrid); :class:`LayoutLevel` also accepts GoTo, Open
  and PutNext missions because BabyAI's verifier provides them (docs/methods/envs.md#textminigrid [D]).
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import asdict, dataclass
from typing import Any

from minigrid.core.grid import Grid
from minigrid.core.roomgrid import Room
from minigrid.core.world_object import Ball, Box, Door, Key, WorldObj
from minigrid.envs.babyai.core.roomgrid_level import RejectSampling, RoomGridLevel
from minigrid.envs.babyai.core.verifier import (
    GoToInstr,
    ObjDesc,
    OpenInstr,
    PickupInstr,
    PutNextInstr,
)

ROOM_SIZE = 6  # 4×4 interior plus walls (docs/methods/envs.md#textminigrid [I])
VIEW_SIZE = 7  # MiniGrid default field of view (docs/methods/envs.md#textminigrid)
MAX_STEPS = 200  # atomic actions per episode (docs/methods/envs.md#textminigrid)
COLORS = ("red", "green", "blue", "purple", "yellow", "grey")
OBJECT_TYPES = ("key", "ball", "box")
ROOM_COUNTS = {1: 1, 4: 2, 9: 3}  # rooms -> rooms per side
DENSITIES = {"low": 1, "medium": 3, "high": 5}  # objects per room (Appendix A.1)
MISSION_KINDS = ("pickup", "goto", "open", "putnext")


# --------------------------------------------------------------------------------------------
# plain data
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Placed:
    """An object or a door at a world cell (x right, y down)."""

    x: int
    y: int
    type: str
    color: str
    locked: bool = False  # doors only
    open: bool = False  # doors only


@dataclass(frozen=True)
class Mission:
    """A BabyAI instruction: ``kind`` and the (type, color) of its object(s)."""

    kind: str = "pickup"
    type: str = "ball"
    color: str = "red"
    # second object, for putnext only ("put <type color> next to <fixed_type fixed_color>")
    fixed_type: str | None = None
    fixed_color: str | None = None


@dataclass(frozen=True)
class Layout:
    """Everything needed to rebuild a level exactly: rooms, doors, objects, agent, mission."""

    rooms_per_side: int
    doors: tuple[Placed, ...]
    objects: tuple[Placed, ...]
    agent: tuple[int, int, int]  # x, y, direction (0 E, 1 S, 2 W, 3 N)
    mission: Mission
    room_size: int = ROOM_SIZE

    @property
    def width(self) -> int:
        return (self.room_size - 1) * self.rooms_per_side + 1

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["doors"] = [asdict(d) for d in self.doors]
        data["objects"] = [asdict(o) for o in self.objects]
        data["agent"] = list(self.agent)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Layout:
        if not isinstance(data, dict):
            raise ValueError(f"textminigrid params.layout must be an object, got "  # noqa: TRY004
                             f"{type(data).__name__}")
        fields = {
            "rooms_per_side": lambda v: int(v),
            "doors": lambda v: tuple(Placed(**d) for d in v),
            "objects": lambda v: tuple(Placed(**o) for o in v),
            "agent": lambda v: tuple(int(x) for x in v),
            "mission": lambda v: Mission(**v),
            "room_size": lambda v: int(v),
        }
        values: dict[str, Any] = {}
        for name, read in fields.items():
            if name not in data:
                if name == "room_size":
                    continue
                raise ValueError(
                    f"textminigrid params.layout is malformed: missing field {name!r}")
            try:
                values[name] = read(data[name])
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"textminigrid params.layout.{name} is malformed "
                                 f"({type(exc).__name__}: {exc}), got {data[name]!r}") from None
        layout = cls(**values)
        layout.validate()
        return layout

    def validate(self) -> None:
        """Reject layouts that cannot be built; messages name the offending item."""
        w = self.width
        if self.mission.kind not in MISSION_KINDS:
            raise ValueError(f"textminigrid layout: unknown mission kind {self.mission.kind!r}")
        seen: set[tuple[int, int]] = set()
        for item in (*self.doors, *self.objects):
            if not (0 <= item.x < w and 0 <= item.y < w):
                raise ValueError(f"textminigrid layout: {item} lies outside the {w}×{w} grid")
            if item.color not in COLORS:
                raise ValueError(f"textminigrid layout: {item} has an unknown color")
            if (item.x, item.y) in seen:
                raise ValueError(f"textminigrid layout: two items at ({item.x}, {item.y})")
            seen.add((item.x, item.y))
        for d in self.doors:
            if d.type != "door" or not _on_inner_wall(d.x, d.y, self.room_size, w):
                raise ValueError(f"textminigrid layout: {d} is not a door in an inner wall")
        for o in self.objects:
            if o.type not in OBJECT_TYPES or _is_wall_cell(o.x, o.y, self.room_size):
                raise ValueError(f"textminigrid layout: {o} is not an object in a room interior")
        m = self.mission
        wanted = [(m.type, m.color)] + ([(m.fixed_type, m.fixed_color)] if m.kind == "putnext" else [])
        present = {(i.type, i.color) for i in (*self.doors, *self.objects)}
        for type_, color in wanted:
            if (type_, color) not in present:
                raise ValueError(f"textminigrid layout: the mission names a {color} {type_}, "
                                 "which is not in the layout")
        x, y, d = self.agent
        if (x, y) in seen or _is_wall_cell(x, y, self.room_size) or d not in range(4):
            raise ValueError(f"textminigrid layout: bad agent position/direction {self.agent}")


def _is_wall_cell(x: int, y: int, room_size: int) -> bool:
    return x % (room_size - 1) == 0 or y % (room_size - 1) == 0


def _on_inner_wall(x: int, y: int, room_size: int, width: int) -> bool:
    s = room_size - 1
    on_v = x % s == 0 and 0 < x < width - 1 and y % s != 0
    on_h = y % s == 0 and 0 < y < width - 1 and x % s != 0
    return on_v or on_h


# --------------------------------------------------------------------------------------------
# the seeded generator (docs/methods/envs.md#textminigrid "Recommended generator")
# --------------------------------------------------------------------------------------------
class GeneratedLevel(RoomGridLevel):
    """BabyAI room grid with k objects per room and a unique PickUp target (docs/methods/envs.md#textminigrid)."""

    def __init__(
        self,
        rooms_per_side: int,
        objs_per_room: int,
        locked_room_prob: float = 0.5,
        uniform_placement: bool = False,
    ):
        if rooms_per_side not in (1, 2, 3):
            raise ValueError(f"textminigrid: rooms_per_side must be 1, 2 or 3, got {rooms_per_side}")
        if not 1 <= objs_per_room <= 12:
            raise ValueError(f"textminigrid: objs_per_room must be in 1..12, got {objs_per_room}")
        self.objs_per_room = objs_per_room
        self.locked_room_prob = locked_room_prob
        self.uniform_placement = uniform_placement
        self.unblocking = True  # BabyAI's check: a target key must not open a locked door
        self.locked_room: Room | None = None
        super().__init__(
            room_size=ROOM_SIZE, num_rows=rooms_per_side, num_cols=rooms_per_side,
            max_steps=MAX_STEPS, agent_view_size=VIEW_SIZE,
        )

    def gen_mission(self) -> None:
        n = self.num_rows
        self.locked_room = None
        if n > 1 and self._rand_float(0, 1) < self.locked_room_prob:
            self._add_locked_room()
        self.connect_all()
        if self.uniform_placement:
            self.agent_pos = (-10, -10)  # no cross of excluded cells around the centre
        for j in range(self.num_rows):
            for i in range(self.num_cols):
                room = self.get_room(i, j)
                while len(room.objs) < self.objs_per_room:
                    self.add_object(i, j)
        while True:
            self.place_agent()
            if self.room_from_pos(*self.agent_pos) is not self.locked_room:
                break
        objs = [o for row in self.room_grid for room in row for o in room.objs]
        counts: dict[tuple[str, str], int] = {}
        for o in objs:
            counts[(o.type, o.color)] = counts.get((o.type, o.color), 0) + 1
        cands = [o for o in objs if counts[(o.type, o.color)] == 1]
        if not cands:
            raise RejectSampling("no object is unique by (type, color)")
        target = self._rand_elem(cands)
        self.instrs = PickupInstr(ObjDesc(target.type, target.color))

    def _add_locked_room(self) -> None:
        while True:
            i = self._rand_int(0, self.num_cols)
            j = self._rand_int(0, self.num_rows)
            side = self._rand_int(0, 4)
            room = self.get_room(i, j)
            if room.neighbors[side] is not None:
                break
        door, _ = self.add_door(i, j, side, locked=True)
        self.locked_room = room
        while True:
            ki = self._rand_int(0, self.num_cols)
            kj = self._rand_int(0, self.num_rows)
            if self.get_room(ki, kj) is not room:
                break
        self.add_object(ki, kj, "key", door.color)


def generate_layout(
    rooms_per_side: int,
    objs_per_room: int,
    seed: int,
    locked_room_prob: float = 0.5,
    uniform_placement: bool = False,
) -> Layout:
    """The layout the docs/methods/envs.md#textminigrid generator draws for ``reset(seed=seed)``; deterministic."""
    level = GeneratedLevel(rooms_per_side, objs_per_room, locked_room_prob, uniform_placement)
    with contextlib.redirect_stdout(io.StringIO()):  # BabyAI prints "Sampling rejected: ..."
        level.reset(seed=int(seed))
    return extract_layout(level)


def extract_layout(level: RoomGridLevel) -> Layout:
    """Read a built level back into plain data (doors, objects, agent, mission)."""
    doors, objects = [], []
    grid = level.grid
    for y in range(grid.height):
        for x in range(grid.width):
            cell = grid.get(x, y)
            if cell is None or cell.type == "wall":
                continue
            if cell.type == "door":
                doors.append(Placed(x, y, "door", cell.color, cell.is_locked, cell.is_open))
            else:
                objects.append(Placed(x, y, cell.type, cell.color))
    instr = level.instrs
    if isinstance(instr, PutNextInstr):
        mission = Mission("putnext", instr.desc_move.type, instr.desc_move.color,
                          instr.desc_fixed.type, instr.desc_fixed.color)
    else:
        kind = {PickupInstr: "pickup", GoToInstr: "goto", OpenInstr: "open"}[type(instr)]
        mission = Mission(kind, instr.desc.type, instr.desc.color)
    ax, ay = (int(v) for v in level.agent_pos)
    return Layout(level.num_rows, tuple(doors), tuple(objects), (ax, ay, int(level.agent_dir)),
                  mission, level.room_size)


# --------------------------------------------------------------------------------------------
# exact rebuild from data
# --------------------------------------------------------------------------------------------
def make_object(type_: str, color: str) -> WorldObj:
    return {"key": Key, "ball": Ball, "box": Box}[type_](color)


def make_instr(m: Mission):
    desc = ObjDesc(m.type, m.color)
    if m.kind == "pickup":
        return PickupInstr(desc)
    if m.kind == "goto":
        return GoToInstr(desc)
    if m.kind == "open":
        return OpenInstr(desc)
    return PutNextInstr(desc, ObjDesc(m.fixed_type, m.fixed_color))


class LayoutLevel(RoomGridLevel):
    """A BabyAI level rebuilt exactly from a :class:`Layout`; draws no random numbers."""

    def __init__(self, layout: Layout, max_steps: int = MAX_STEPS):
        self.layout = layout
        super().__init__(
            room_size=layout.room_size, num_rows=layout.rooms_per_side,
            num_cols=layout.rooms_per_side, max_steps=max_steps, agent_view_size=VIEW_SIZE,
        )

    def _gen_grid(self, width: int, height: int) -> None:
        # Our own room construction (RoomGrid's draws random door positions we would discard).
        lay, n, s = self.layout, self.layout.rooms_per_side, self.layout.room_size
        self.grid = Grid(width, height)
        self.room_grid = [[Room((i * (s - 1), j * (s - 1)), (s, s)) for i in range(n)]
                          for j in range(n)]
        for row in self.room_grid:
            for room in row:
                self.grid.wall_rect(*room.top, *room.size)
        for j in range(n):
            for i in range(n):
                room = self.room_grid[j][i]
                if i < n - 1:
                    room.neighbors[0] = self.room_grid[j][i + 1]
                    self.room_grid[j][i + 1].neighbors[2] = room
                if j < n - 1:
                    room.neighbors[1] = self.room_grid[j + 1][i]
                    self.room_grid[j + 1][i].neighbors[3] = room
        for d in lay.doors:
            door = Door(d.color, is_open=d.open, is_locked=d.locked)
            self.put_obj(door, d.x, d.y)
            if d.x % (s - 1) == 0:  # vertical wall: rooms left (side 0) and right (side 2)
                left = self.room_grid[d.y // (s - 1)][d.x // (s - 1) - 1]
                pairs = ((left, 0), (left.neighbors[0], 2))
            else:  # horizontal wall: rooms above (side 1) and below (side 3)
                above = self.room_grid[d.y // (s - 1) - 1][d.x // (s - 1)]
                pairs = ((above, 1), (above.neighbors[1], 3))
            for room, side in pairs:
                room.doors[side] = door
                room.door_pos[side] = (d.x, d.y)
                room.locked = room.locked or d.locked
        for o in lay.objects:
            obj = make_object(o.type, o.color)
            self.put_obj(obj, o.x, o.y)
            self.room_from_pos(o.x, o.y).objs.append(obj)
        x, y, direction = lay.agent
        self.agent_pos = (x, y)
        self.agent_dir = direction
        self.instrs = make_instr(lay.mission)
        self.surface = self.instrs.surface(self)
        self.mission = self.surface


def build_level(layout: Layout, max_steps: int = MAX_STEPS) -> LayoutLevel:
    """A fresh, reset level for ``layout`` (validated first: errors name the bad item)."""
    layout.validate()
    level = LayoutLevel(layout, max_steps=max_steps)
    level.reset(seed=0)
    return level


@dataclass(frozen=True)
class LayoutParams:
    """Generator parameters (docs/methods/envs.md#textminigrid): room count, object density, locked-room probability."""

    rooms: int = 4
    objs_per_room: int = 3
    locked_room_prob: float = 0.5
    uniform_placement: bool = False

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> LayoutParams:
        """Read ``rooms`` (1/4/9) and ``objs_per_room`` (1/3/5) or ``density`` (low/medium/high)."""
        rooms = params.get("rooms", 4)
        if rooms not in ROOM_COUNTS:
            raise ValueError(f"textminigrid params: 'rooms' must be 1, 4 or 9, got {rooms!r}")
        if "density" in params and "objs_per_room" not in params:
            density = params["density"]
            if density not in DENSITIES:
                raise ValueError(
                    f"textminigrid params: 'density' must be one of {', '.join(DENSITIES)}, "
                    f"got {density!r}")
            k = DENSITIES[density]
        else:
            k = params.get("objs_per_room", 3)
        if not isinstance(k, int) or not 1 <= k <= 12:
            raise ValueError(f"textminigrid params: 'objs_per_room' must be in 1..12, got {k!r}")
        p = params.get("locked_room_prob", 0.5)
        if not isinstance(p, (int, float)) or not 0 <= p <= 1:
            raise ValueError(f"textminigrid params: 'locked_room_prob' must be in [0, 1], got {p!r}")
        return cls(rooms, k, float(p), bool(params.get("uniform_placement", False)))

    @property
    def rooms_per_side(self) -> int:
        return ROOM_COUNTS[self.rooms]

    @property
    def density(self) -> str | None:
        return {v: k for k, v in DENSITIES.items()}.get(self.objs_per_room)
