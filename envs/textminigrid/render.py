"""The 7×7 partial view and its three text renderings (docs/methods/envs.md#textminigrid).

All renderers start from MiniGrid's egocentric view ``gen_obs_grid()`` → ``(grid, vis_mask)``,
indexed ``(vx, vy)``: vx = 0..6 from the agent's left to its right, vy = 0..6 from far to near,
the agent at (3, 6). :func:`egocentric_view` turns it into a 7×7 table of :class:`Cell` rows
``P[vy][vx]``; then

* Symbolic Cell (docs/methods/envs.md#textminigrid) and Hybrid (docs/methods/envs.md#textminigrid) rotate ``P`` north-up (allocentric) and print one
  token per cell, each followed by ``;``;
* Scene Description (docs/methods/envs.md#textminigrid) keeps egocentric positions: f = 6 − vy steps forward, l = vx − 3
  (negative = left).

The carried object, which MiniGrid puts on the agent's cell, is ignored: the agent's cell is
always the agent. Decisions: open door ``__``, the Hybrid vocabulary of docs/methods/envs.md#textminigrid, the
SD wall sentences, order and separators of the method page, ``an open <color> door`` (fixing the original's
"a open"), and ``You see no walls or objects.`` for an empty view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from minigrid.minigrid_env import MiniGridEnv

REPRESENTATIONS = ("sc", "sd", "hybrid")
DIRECTIONS = ("East", "South", "West", "North")  # MiniGrid agent_dir 0..3 (docs/methods/envs.md#textminigrid)
COLOR_LETTER = {"red": "R", "green": "G", "blue": "B", "purple": "P", "yellow": "Y", "grey": "E"}
TYPE_LETTER = {"key": "K", "ball": "A", "box": "B"}

Kind = Literal["unseen", "empty", "wall", "door", "key", "ball", "box", "agent"]


@dataclass(frozen=True)
class Cell:
    """One cell of the view; ``state`` is open/closed/locked for doors, "" otherwise."""

    kind: Kind
    color: str = ""
    state: str = ""


UNSEEN, EMPTY, WALL, AGENT = Cell("unseen"), Cell("empty"), Cell("wall"), Cell("agent")
View = list[list[Cell]]  # P[vy][vx], egocentric


def direction_name(agent_dir: int) -> str:
    """North/East/South/West for MiniGrid's ``agent_dir`` (docs/methods/envs.md#textminigrid)."""
    return DIRECTIONS[agent_dir % 4]


def inventory_text(carrying) -> str:
    """``nothing`` or ``a <color> <type>`` (docs/methods/envs.md#textminigrid)."""
    return "nothing" if carrying is None else f"a {carrying.color} {carrying.type}"


def cell_of(obj) -> Cell:
    if obj is None:
        return EMPTY
    if obj.type == "wall":
        return WALL
    if obj.type == "door":
        state = "open" if obj.is_open else "locked" if obj.is_locked else "closed"
        return Cell("door", obj.color, state)
    if obj.type in TYPE_LETTER:
        return Cell(obj.type, obj.color)
    raise ValueError(f"textminigrid: cannot render MiniGrid object type {obj.type!r}")


def egocentric_view(level: MiniGridEnv) -> View:
    """``P[vy][vx]`` from MiniGrid's own view and visibility mask (docs/methods/envs.md#textminigrid)."""
    return view_from(*level.gen_obs_grid())


def view_from(grid, vis) -> View:
    """``P[vy][vx]`` from the ``(grid, vis_mask)`` pair of ``gen_obs_grid()``."""
    size = grid.width
    view = [[cell_of(grid.get(vx, vy)) if vis[vx, vy] else UNSEEN for vx in range(size)]
            for vy in range(size)]
    view[size - 1][size // 2] = AGENT
    return view


def view_to_world(level: MiniGridEnv, vx: int, vy: int) -> tuple[int, int]:
    """World cell of view cell (vx, vy): f = 6 − vy cells ahead, l = vx − 3 cells to the right."""
    n = level.agent_view_size
    f, l = n - 1 - vy, vx - n // 2
    (dx, dy), (rx, ry) = level.dir_vec, level.right_vec
    ax, ay = (int(v) for v in level.agent_pos)
    return ax + f * int(dx) + l * int(rx), ay + f * int(dy) + l * int(ry)


def visible_world_cells(level: MiniGridEnv, vis) -> set[tuple[int, int]]:
    """World cells inside the visibility mask (those off the grid left out)."""
    n = level.agent_view_size
    cells = set()
    for vy in range(n):
        for vx in range(n):
            if vis[vx, vy]:
                x, y = view_to_world(level, vx, vy)
                if 0 <= x < level.grid.width and 0 <= y < level.grid.height:
                    cells.add((x, y))
    return cells


def north_up(view: View, agent_dir: int) -> View:
    """Rotate ``P[vy][vx]`` so North is at the top (docs/methods/envs.md#textminigrid mapping table).

    facing North: (row, col) = (vy, vx); East: (vx, 6 − vy); South: (6 − vy, 6 − vx);
    West: (6 − vx, vy).
    """
    n = len(view)
    out = [[UNSEEN] * n for _ in range(n)]
    facing = direction_name(agent_dir)
    for vy in range(n):
        for vx in range(n):
            if facing == "North":
                r, c = vy, vx
            elif facing == "East":
                r, c = vx, n - 1 - vy
            elif facing == "South":
                r, c = n - 1 - vy, n - 1 - vx
            else:
                r, c = n - 1 - vx, vy
            out[r][c] = view[vy][vx]
    return out


# --------------------------------------------------------------------------------------------
# Symbolic Cell and Hybrid (docs/methods/envs.md#textminigrid, docs/methods/envs.md#textminigrid)
# --------------------------------------------------------------------------------------------
def sc_token(cell: Cell) -> str:
    if cell.kind == "door":
        if cell.state == "open":
            return "__"
        return COLOR_LETTER[cell.color] + ("L" if cell.state == "locked" else "D")
    if cell.kind in TYPE_LETTER:
        return COLOR_LETTER[cell.color] + TYPE_LETTER[cell.kind]
    return {"unseen": "XX", "empty": "EM", "wall": "WW", "agent": "II"}[cell.kind]


def hybrid_token(cell: Cell) -> str:
    if cell.kind == "door":
        if cell.state == "open":
            return "Open_Door"
        return f"{cell.color.capitalize()}_{'Locked' if cell.state == 'locked' else 'Closed'}_Door"
    if cell.kind in TYPE_LETTER:
        return f"{cell.color.capitalize()}_{cell.kind.capitalize()}"
    return {"unseen": "Unseen", "empty": "Empty", "wall": "Wall", "agent": "Agent"}[cell.kind]


def grid_text(rows: View, token=sc_token) -> str:
    """7 lines, each token followed by ``;``, no spaces (docs/methods/envs.md#textminigrid serialisation)."""
    return "\n".join("".join(token(c) + ";" for c in row) for row in rows)


def render_sc(view: View, agent_dir: int) -> str:
    return grid_text(north_up(view, agent_dir), sc_token)


def render_hybrid(view: View, agent_dir: int) -> str:
    return grid_text(north_up(view, agent_dir), hybrid_token)


# --------------------------------------------------------------------------------------------
# Scene Description (docs/methods/envs.md#textminigrid)
# --------------------------------------------------------------------------------------------
def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def position_text(f: int, l: int) -> str:
    """BabyAI-Text position grammar: lateral part first, then forward."""
    side = "left" if l < 0 else "right"
    if l == 0:
        return f"{_steps(f)} forward"
    if f == 0:
        return f"{_steps(abs(l))} {side}"
    return f"{_steps(abs(l))} {side} and {_steps(f)} forward"


def thing_text(cell: Cell) -> str:
    if cell.kind == "wall":
        return "a wall"
    if cell.kind == "door":
        article = "an" if cell.state == "open" else "a"
        return f"{article} {cell.state} {cell.color} door"
    return f"a {cell.color} {cell.kind}"


def render_sd(view: View) -> str:
    """One sentence per visible wall, door or object; walls first; each group by (f, l)."""
    n = len(view)
    walls, things = [], []
    for vy in range(n):
        for vx in range(n):
            cell = view[vy][vx]
            if cell.kind in ("unseen", "empty", "agent"):
                continue
            f, l = n - 1 - vy, vx - n // 2
            (walls if cell.kind == "wall" else things).append((f, l, cell))
    lines = [f"You see {thing_text(c)} {position_text(f, l)}."
             for f, l, c in sorted(walls, key=lambda t: t[:2]) + sorted(things, key=lambda t: t[:2])]
    return "\n".join(lines) if lines else "You see no walls or objects."


def render(view: View, agent_dir: int, representation: str) -> str:
    """The view in one of the three formats: ``sc``, ``sd`` or ``hybrid``."""
    if representation == "sc":
        return render_sc(view, agent_dir)
    if representation == "hybrid":
        return render_hybrid(view, agent_dir)
    if representation == "sd":
        return render_sd(view)
    raise ValueError(
        f"textminigrid: unknown representation {representation!r}; "
        f"choose one of {', '.join(REPRESENTATIONS)}")


def render_level(level: MiniGridEnv, representation: str) -> str:
    return render(egocentric_view(level), level.agent_dir, representation)


def full_grid_sc(level: MiniGridEnv) -> str:
    """The whole level in SC tokens, north up, agent as ``II`` (for oracles and debugging)."""
    ax, ay = (int(v) for v in level.agent_pos)
    rows = [[AGENT if (x, y) == (ax, ay) else cell_of(level.grid.get(x, y))
             for x in range(level.grid.width)] for y in range(level.grid.height)]
    return grid_text(rows, sc_token)
