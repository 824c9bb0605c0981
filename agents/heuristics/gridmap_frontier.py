"""Heuristic grid-map agents (docs/methods/metric-explore-exploit-error.md#target-set-and-cases item 6, docs/methods/metric-explore-exploit-error.md#per-step-labels "heuristic agents for testing").

* :class:`FrontierAgent` ("frontier"): no LM and no oracle. It builds its own map from the
  observations (visited cells, the admissible moves seen there, the states found) and moves
  along a shortest path *over known cells* (visited ∪ known-passable) to the nearest pending
  state (the goal first, when it is ready), or else to the nearest frontier cell. Ties break by
  the fixed direction order up, down, left, right. It relies on the env's documented coordinate
  convention (up = y+1, right = x+1).
* :class:`OracleAgent` ("gridmap-oracle", ``uses_oracle = True``): the docs/methods/metric-explore-exploit-error.md#target-set-and-cases zero-error sanity
  agent. At the start of each no-progress segment it picks a target z ∈ T(t) nearest by true-map
  distance (ties: smallest cell) and follows a true shortest path to z until the next progress
  event; every step then reduces d(·, z) and no vertex repeats, so both errors are 0.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from clew.agents.base import BaseAgent, Decision, Episode
from clew.envs.base import Task
from clew.envs.gridmap.env import GridMapEnv
from clew.envs.gridmap.instance import DIRECTIONS, Cell, Node, prec, step_cell


@dataclass
class KnownMap:
    """What the frontier agent has learned from its observations so far."""

    visited: set[Cell] = field(default_factory=set)
    passable: set[Cell] = field(default_factory=set)
    states: dict[str, Node] = field(default_factory=dict)
    goal: str | None = None
    activated: set[str] = field(default_factory=set)
    seen: int = 0  # observations processed

    def update(self, info: dict[str, Any]) -> None:
        pos = (int(info["position"][0]), int(info["position"][1]))
        self.visited.add(pos)
        for d in info.get("moves_here", info.get("legal_moves", [])):
            self.passable.add(step_cell(pos, d))
        node = info.get("node")
        if node:
            self.states[node["name"]] = Node(
                node["name"], pos, tuple(tuple(o) for o in node["options"]),
                tuple(node["children"]))
            if node.get("is_goal"):
                self.goal = node["name"]
            if node["status"] == "achieved":
                self.activated.add(node["name"])
        self.activated.update(info.get("activated", []))
        self.goal = info.get("goal") or self.goal

    def pending(self) -> list[str]:
        return sorted(u for u, n in self.states.items()
                      if u not in self.activated and prec(n, self.activated))

    def targets(self) -> set[Cell]:
        ready = self.pending()
        if self.goal in ready:
            return {self.states[self.goal].cell}
        if ready:
            return {self.states[u].cell for u in ready}
        return self.passable - self.visited


def first_move(start: Cell, targets: set[Cell], cells: set[Cell]) -> str | None:
    """First direction of a shortest path inside ``cells`` from ``start`` to the nearest target."""
    if not targets:
        return None
    first: dict[Cell, str | None] = {start: None}
    queue = deque([start])
    while queue:
        c = queue.popleft()
        if c in targets and c != start:
            return first[c]
        for d in DIRECTIONS:
            n = step_cell(c, d)
            if n in cells and n not in first:
                first[n] = first[c] or d
                queue.append(n)
    return None


class FrontierAgent(BaseAgent):
    """Nearest pending state if one is known, else nearest frontier cell (BFS over known cells)."""

    name = "frontier"
    kind = "heuristic"
    uses_oracle = False

    async def act(self, episode: Episode) -> Decision:
        known: KnownMap = episode.scratch.setdefault("known_map", KnownMap())
        for obs in episode.observations[known.seen:]:
            known.update(obs.info)
        known.seen = len(episode.observations)
        pos = tuple(episode.obs.info["position"])
        move = first_move(pos, known.targets(), known.visited | known.passable)
        if move is None:  # cannot happen before the goal (docs/methods/metric-explore-exploit-error.md#target-set-and-cases item 2); stay legal anyway
            legal = episode.env.legal_actions()
            move = legal[0] if legal else "up"
        return Decision(move, info={"targets": len(known.targets())})


class OracleAgent(BaseAgent):
    """The zero-error agent of docs/methods/metric-explore-exploit-error.md#target-set-and-cases item 6 (reads ``env.oracle()``)."""

    name = "gridmap-oracle"
    kind = "heuristic"
    uses_oracle = True

    async def act(self, episode: Episode) -> Decision:
        return Decision(oracle_move(episode.env.oracle(), episode.scratch))


def oracle_move(oracle: Any, memo: dict[str, Any]) -> str:
    """One step of the oracle policy; ``memo`` keeps the segment's target between calls."""
    inst = oracle.instance
    achieved = sum(1 for s in oracle.status.values() if s == "achieved")
    key = (len(oracle.observed), achieved)  # changes exactly on progress events
    _, targets = oracle.case_and_targets()
    z = memo.get("oracle_target")
    if memo.get("oracle_key") != key or z not in targets:
        here = inst.distances.table(oracle.position)
        z = min(targets, key=lambda c: (here[c], c))
        memo["oracle_target"], memo["oracle_key"] = z, key
    to_z = inst.distances.table(z)
    p = oracle.position
    for d in inst.moves[p]:
        if to_z[step_cell(p, d)] == to_z[p] - 1:
            return d
    raise RuntimeError("gridmap oracle: no move reduces the distance to the target")


def oracle_actions(instance: Any, max_steps: int | None = None) -> list[str]:
    """The oracle agent's whole action list on an instance, ignoring the budget (its step
    count per instance is logged; more than B means even this agent fails there)."""
    limit = max_steps or 10 * instance.budget
    env = GridMapEnv()
    env.reset(Task("gridmap", replace(instance, budget=limit).to_params()))
    memo: dict[str, Any] = {}
    actions: list[str] = []
    while not env.done:
        a = oracle_move(env.oracle(), memo)
        actions.append(a)
        env.step(a)
    return actions
