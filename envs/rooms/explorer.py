"""A systematic frontier explorer for Dark Treasure Rooms (docs/methods/metric-optimal-exploitation-gap.md#decisions, extra recommendations).

Used to reject layouts that are too hard for their door budget (the generator keeps a layout
only if this explorer reaches exploration gap 0 within the run's episodes) and as a scripted
agent in tests.

It uses only what the run has shown so far: doors seen and traversed, balls seen and picked up.
Rooms are identified by the env's room ids, which is equivalent to what an agent can observe
because every room has a unique set of door names (docs/methods/envs.md#dark-treasure-rooms). Each step:

1. pick up a visible ball whose value is still unknown (if pickups are left);
2. otherwise walk (shortest known path) to the nearest *frontier* that the remaining budget can
   still reach: a door seen but never traversed (cost: distance + 1), or a room with a ball of
   unknown value (cost: distance); ties go to the smaller room id, then the first door;
3. with no reachable frontier, take the first visible object (the episode then runs out).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from clew.envs.rooms.env import RoomsEnv


def frontier_action(env: RoomsEnv) -> str:
    s, layout = env.state, env.layout
    doors_left = layout.door_budget - s.doors_used
    pickups_left = layout.max_pickups - len(s.collected)
    known_balls = {m.action for m in s.moves if m.kind == "ball"}
    traversed = {m.action for m in s.moves if m.kind == "door" and m.moved}
    via: dict[int, dict[int, str]] = {}  # room -> {neighbour: door}, known both ways
    seen_in: dict[int, set[str]] = {}
    for m in s.moves:
        seen_in.setdefault(m.room, set()).update(m.seen)
        seen_in.setdefault(m.next_room, set()).update(m.after)
        if m.kind == "door" and m.moved:
            via.setdefault(m.room, {})[m.next_room] = m.action
            via.setdefault(m.next_room, {})[m.room] = m.action
    visible = env.visible()
    seen_in.setdefault(s.room, set()).update(visible)

    if pickups_left > 0:
        for obj in visible:
            if obj.endswith(" ball") and obj not in known_balls:
                return obj

    # BFS over known doors from the current room, remembering the first door of each path.
    first: dict[int, str | None] = {s.room: None}
    dist = {s.room: 0}
    queue = deque([s.room])
    while queue:
        u = queue.popleft()
        for v in sorted(via.get(u, {})):
            if v not in dist:
                dist[v] = dist[u] + 1
                first[v] = first[u] or via[u][v]
                queue.append(v)

    best: tuple[int, int, str] | None = None  # (cost, room, action)
    for room, d in dist.items():
        objs = seen_in.get(room, set())
        fresh_doors = sorted(o for o in objs if o.endswith(" door") and o not in traversed)
        if fresh_doors and d + 1 <= doors_left:
            action = fresh_doors[0] if d == 0 else first[room]
            if d == 0:  # prefer the canonical order of what is visible
                action = next(o for o in visible if o in fresh_doors)
            cand = (d + 1, room, action)
            best = cand if best is None or cand[:2] < best[:2] else best
        unknown = [o for o in objs if o.endswith(" ball") and o not in known_balls]
        if unknown and pickups_left > 0 and 0 < d <= doors_left:
            cand = (d, room, first[room])
            best = cand if best is None or cand[:2] < best[:2] else best
    if best is not None:
        return best[2]
    return visible[0]
