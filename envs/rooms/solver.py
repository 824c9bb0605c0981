"""Optimal exploitation for Dark Treasure Rooms by brute-force orienteering (docs/methods/metric-optimal-exploitation-gap.md#rooms-solver).

The exploiter may use only what a history reveals (the *known model*):

* known doors: every door traversal observed (room u -> room v); by default a traversed door is
  usable both ways (``symmetric=True``, docs/methods/metric-optimal-exploitation-gap.md#decisions #8), ``symmetric=False`` is the method page's
  ``strict_directed`` option;
* known balls: every ball picked up at least once, with the reward observed and the room it was
  picked up in (docs/methods/metric-optimal-exploitation-gap.md#decisions #7). ``true_balls`` adds balls that were only *seen*, with their true
  values (the method page's ``seen_balls_use_true_value`` oracle variant).

:func:`best_route` then tries every ordered sequence of at most K distinct known balls and keeps
the most valuable one whose door cost (shortest known distances, 0 inside one room) is <= C.
That test matches the env rule exactly: up to C traversals, balls in the room reached by the
C-th door can still be picked up (docs/methods/envs.md#dark-treasure-rooms, docs/methods/metric-optimal-exploitation-gap.md#decisions #5). With K = 3 and a handful of known balls
this is at most a few hundred sequences.

The generic solver for any deterministic budgeted MDP (docs/methods/metric-optimal-exploitation-gap.md#generic-solver) is
:func:`clew.envs.measures.optimal_exploitation`; tests check both agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import permutations
from typing import Protocol

from clew.envs.measures import distances


class Move(Protocol):
    """What the solver reads of one step of a run (:class:`clew.envs.rooms.env.Move`)."""

    room: int
    seen: tuple[str, ...]
    action: str
    kind: str
    reward: int
    next_room: int
    moved: bool
    after: tuple[str, ...]


class BallLike(Protocol):
    name: str
    room: int
    reward: int


class Layout(Protocol):
    """What the solver reads of a layout (:class:`clew.envs.rooms.layouts.Layout`)."""

    start: int
    balls: Sequence[BallLike]
    door_budget: int
    max_pickups: int

    @property
    def adjacency(self) -> dict[int, set[int]]: ...


def bfs(adjacency: dict[int, set[int]] | dict[int, list[int]], source: int) -> dict[int, int]:
    """Shortest door distances from ``source`` over ``adjacency`` (unreachable rooms absent)."""
    return distances(source, lambda room: sorted(adjacency.get(room, ())))


@dataclass(frozen=True)
class KnownBall:
    name: str
    room: int
    value: int


@dataclass
class KnownModel:
    """What a history reveals: door edges (directed; both directions when symmetric) and balls."""

    edges: set[tuple[int, int]] = field(default_factory=set)
    balls: dict[str, KnownBall] = field(default_factory=dict)

    def adjacency(self) -> dict[int, set[int]]:
        adj: dict[int, set[int]] = {}
        for u, v in self.edges:
            adj.setdefault(u, set()).add(v)
        return adj

    def add_move(self, move: Move, symmetric: bool = True) -> bool:
        """Add one step's knowledge; returns whether anything new was learnt."""
        before = (len(self.edges), len(self.balls))
        if move.kind == "door" and move.moved:
            self.edges.add((move.room, move.next_room))
            if symmetric:
                self.edges.add((move.next_room, move.room))
        elif move.kind == "ball":
            name = move.action.rsplit(" ", 1)[0]
            self.balls.setdefault(name, KnownBall(name, move.room, int(move.reward)))
        return (len(self.edges), len(self.balls)) != before

    def add_seen(self, move: Move, true_balls: Mapping[str, KnownBall]) -> bool:
        """Oracle variant: balls seen (not necessarily picked up) count with their true value."""
        added = False
        for obj in (*move.seen, *move.after):
            name, _, kind = obj.rpartition(" ")
            if kind == "ball" and name not in self.balls and name in true_balls:
                self.balls[name] = true_balls[name]
                added = True
        return added


def known_model(
    moves: Iterable[Move],
    symmetric: bool = True,
    true_balls: Mapping[str, KnownBall] | None = None,
) -> KnownModel:
    model = KnownModel()
    for move in moves:
        model.add_move(move, symmetric)
        if true_balls is not None:
            model.add_seen(move, true_balls)
    return model


@dataclass(frozen=True)
class Route:
    value: int
    balls: tuple[str, ...] = ()
    doors: int = 0  # door traversals the route needs


def best_route(
    start: int,
    adjacency: Mapping[int, Iterable[int]],
    balls: Iterable[KnownBall],
    budget: int,
    pickups: int = 3,
) -> Route:
    """Most valuable sequence of <= ``pickups`` balls reachable within ``budget`` doors (docs/methods/metric-optimal-exploitation-gap.md#rooms-solver).

    Ties in value go to the route with fewer doors, then to the first in name order."""
    balls = sorted(balls, key=lambda b: b.name)
    adj = {u: set(vs) for u, vs in adjacency.items()}
    rooms = {start} | {b.room for b in balls}
    dist = {u: bfs(adj, u) for u in rooms}
    best = Route(0)
    for k in range(1, min(pickups, len(balls)) + 1):
        for seq in permutations(balls, k):
            cost, here, feasible = 0, start, True
            for ball in seq:
                step = dist[here].get(ball.room)
                if step is None:
                    feasible = False
                    break
                cost += step
                here = ball.room
            if not feasible or cost > budget:
                continue
            value = sum(b.value for b in seq)
            if value > best.value or (value == best.value and value > 0 and cost < best.doors):
                best = Route(value, tuple(b.name for b in seq), cost)  # ties: fewer doors
    return best


def true_balls(layout: Layout) -> dict[str, KnownBall]:
    return {b.name: KnownBall(b.name, b.room, b.reward) for b in layout.balls}


def layout_best_route(layout: Layout) -> Route:
    """R^max: the solver on the true layout (all doors both ways, all balls; docs/methods/metric-optimal-exploitation-gap.md#optimal-exploitation-return #4)."""
    return best_route(layout.start, layout.adjacency, true_balls(layout).values(),
                      layout.door_budget, layout.max_pickups)


def exploit_value(layout: Layout, model: KnownModel) -> int:
    """R^exploit of a known model on ``layout`` (start room, C and K come from the layout)."""
    return best_route(layout.start, model.adjacency(), model.balls.values(),
                      layout.door_budget, layout.max_pickups).value
