"""TreeSearch (docs/methods/envs.md#treesearch): a rooted tree of hidden values with deceptive trap branches.

The root has ``r_trap + r_good`` gateway children; each gateway carries ``b`` disjoint chains.
A node's value is the sum of the increments on its root path (root 0):

* trap gateway +2, then along each chain +1 at positions 1..6, afterwards +1 only where
  ``(j − 6) % 4 == 0`` (positions 10, 14, 18, ...) docs/methods/envs.md#treesearch;
* good gateway +1, then +4 at every chain position.

Decisions recorded here:
* [D, docs/methods/envs.md#treesearch] chain lengths ``L_trap = d_trap + trap_len_offset`` (default offset 0) and
  ``L_good = d_good + good_len_offset`` (default −1): the only reading that reproduces the paper's
  node counts 772/323/889 and maxima 45/53/61. Both offsets are parameters.
* Node ids are a uniformly random permutation of 0..|V|−1, root included (seeded by the task seed).
* docs/methods/envs.md#treesearch the adjacency list shown to the model is undirected, lists every node, in random node
  and neighbour order; re-querying a known node (the root included) is invalid.
* Availability lists (docs/methods/envs.md#treesearch): after a query, the node's children in random order; after a leaf,
  every queryable node by the step at which it became queryable (most recent first, ties random).
  Gateways became queryable at step 0.
"""

from __future__ import annotations

import random
import re
from typing import Any

from clew.envs.base import Task
from clew.envs.oracle_search import prompts
from clew.envs.oracle_search.protocol import (
    OracleSearchEnv,
    finish_task,
    generator_config,
    read_number,
)

#: generator defaults: the main instance T-main (B.2) and the paper's value schedule
DEFAULTS: dict[str, Any] = {
    "r_trap": 3, "r_good": 3, "b": 5, "d_trap": 40, "d_good": 12,
    "trap_len_offset": 0, "good_len_offset": -1,
    "trap_jump": 2, "trap_ramp": 6, "trap_every": 4, "good_jump": 1, "good_step": 4,
    "budget": 48,
}

#: docs/methods/envs.md#treesearch the paper's instances: (r_trap, r_good, b, d_trap, d_good)
_NODE = re.compile(r"\bnode\s*(?:id)?\s*[=:#]?\s*(-?\d+)\b", re.IGNORECASE)

FIXED = {
    "T-main": {"r_trap": 3, "r_good": 3, "b": 5, "d_trap": 40, "d_good": 12},
    "T-alt1": {"r_trap": 2, "r_good": 2, "b": 3, "d_trap": 40, "d_good": 14},
    "T-alt2": {"r_trap": 4, "r_good": 4, "b": 4, "d_trap": 40, "d_good": 16},
}


def chain_increments(kind: str, length: int, cfg: dict[str, Any]) -> list[int]:
    """Increments at chain positions 1..length below a gateway of ``kind``."""
    if kind == "good":
        return [int(cfg["good_step"])] * length
    ramp, every = int(cfg["trap_ramp"]), int(cfg["trap_every"])
    return [1 if j <= ramp or (j - ramp) % every == 0 else 0 for j in range(1, length + 1)]


def build_tree(cfg: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """Parent array, values, root and gateway ids of a relabelled tree (docs/methods/envs.md#treesearch)."""
    parent, values, kinds = [-1], [0], ["root"]
    gateways: list[int] = []
    lengths = {"trap": int(cfg["d_trap"]) + int(cfg["trap_len_offset"]),
               "good": int(cfg["d_good"]) + int(cfg["good_len_offset"])}
    jumps = {"trap": int(cfg["trap_jump"]), "good": int(cfg["good_jump"])}
    for g in range(int(cfg["r_trap"]) + int(cfg["r_good"])):
        kind = "trap" if g < int(cfg["r_trap"]) else "good"
        gid = len(parent)
        parent.append(0)
        values.append(jumps[kind])
        kinds.append(kind)
        gateways.append(gid)
        for _ in range(int(cfg["b"])):
            prev, value = gid, jumps[kind]
            for inc in chain_increments(kind, lengths[kind], cfg):
                value += inc
                parent.append(prev)
                values.append(value)
                kinds.append(kind)
                prev = len(parent) - 1
    perm = list(range(len(parent)))
    rng.shuffle(perm)  # perm[old] = new id
    new_parent = [0] * len(parent)
    new_values = [0] * len(parent)
    for old, new in enumerate(perm):
        new_parent[new] = -1 if parent[old] < 0 else perm[parent[old]]
        new_values[new] = values[old]
    return {
        "parent": new_parent, "values": new_values, "root": perm[0],
        "gateways": {"trap": sorted(perm[g] for g in gateways if kinds[g] == "trap"),
                     "good": sorted(perm[g] for g in gateways if kinds[g] == "good")},
    }


def node_count(cfg: dict[str, Any]) -> int:
    """|V| = 1 + r_trap·(1 + b·L_trap) + r_good·(1 + b·L_good) (docs/methods/envs.md#treesearch)."""
    lt = cfg["d_trap"] + cfg["trap_len_offset"]
    lg = cfg["d_good"] + cfg["good_len_offset"]
    return 1 + cfg["r_trap"] * (1 + cfg["b"] * lt) + cfg["r_good"] * (1 + cfg["b"] * lg)


def generate_task(params: dict[str, Any], seed: int = 0) -> Task:
    """TreeSearch task. ``params``: any of ``DEFAULTS`` (budget included), or ``instance``
    (``T-main``/``T-alt1``/``T-alt2``) for the paper's parameters; ``id``/``split`` name it."""
    cfg, p, task_id, split = generator_config("treesearch", params, DEFAULTS, FIXED)
    for name in DEFAULTS:
        v = cfg[name]
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"treesearch: {name} must be an integer, got {v!r}")  # noqa: TRY004
    for name in ("r_trap", "r_good", "trap_jump", "good_jump", "trap_ramp"):
        if cfg[name] < 0:
            raise ValueError(f"treesearch: {name} must be >= 0, got {cfg[name]}")
    for name in ("b", "trap_every", "good_step"):
        if cfg[name] < 1:
            raise ValueError(f"treesearch: {name} must be >= 1, got {cfg[name]}")
    if cfg["r_trap"] + cfg["r_good"] < 1:
        raise ValueError("treesearch: r_trap + r_good must be >= 1")
    for kind in ("trap", "good"):
        if cfg[f"d_{kind}"] + cfg[f"{kind}_len_offset"] < 1:
            raise ValueError(f"treesearch: {kind} chains need length >= 1 "
                             f"(d_{kind} + {kind}_len_offset)")
    return finish_task("treesearch", build_tree(cfg, random.Random(seed)), p, cfg, DEFAULTS, seed,
                       task_id, split)


class TreeSearchEnv(OracleSearchEnv):
    """docs/methods/envs.md#treesearch: query a node adjacent to the known set; receive its value and what it opened."""

    name = "treesearch"
    family = "tree"
    memory_min_score = 0.95      # docs/methods/reflection-memory.md#scores

    def random_action(self, rng: random.Random) -> str:
        """A uniformly random node of the frontier."""
        frontier = self.frontier()
        if not frontier:
            raise RuntimeError(f"random-query: no queryable node in {self.task.id!r}")
        return f"node={rng.choice(frontier)}"

    def _load(self, task: Task) -> None:
        params = task.params
        try:
            self.parent = [int(v) for v in params["parent"]]
            self.values = [int(v) for v in params["values"]]
            self.root = int(params["root"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"treesearch task {task.id!r}: params need parent, values and root "
                             "(integers)") from None
        n = len(self.parent)
        if len(self.values) != n or not 0 <= self.root < n or self.parent[self.root] != -1:
            raise ValueError(f"treesearch task {task.id!r}: inconsistent tree "
                             "(lengths of parent/values, or the root's parent is not -1)")
        self.children: list[list[int]] = [[] for _ in range(n)]
        for v, u in enumerate(self.parent):
            if v != self.root:
                if not 0 <= u < n:
                    raise ValueError(f"treesearch task {task.id!r}: node {v} has parent {u}")
                self.children[u].append(v)
        self.depth = [0] * n
        order = [self.root]
        for u in order:  # BFS from the root
            for v in self.children[u]:
                self.depth[v] = self.depth[u] + 1
                order.append(v)
        if len(order) != n:
            raise ValueError(f"treesearch task {task.id!r}: the parent array is not one tree")
        self._opt = float(max(self.values))

    # --- state ---------------------------------------------------------------------------
    def _init_extra(self) -> None:
        self.state.extra = {"known": {self.root: 0},
                            "avail": {v: 0 for v in self.children[self.root]}}

    def _after_valid(self, node: int) -> None:
        extra = self.state.extra
        extra["known"][node] = self.values[node]
        extra["avail"].pop(node, None)
        for child in self.children[node]:
            extra["avail"][child] = self.state.steps

    # --- facts (public: all follow from the first message and the feedback) ---------------
    @property
    def optimum(self) -> float:
        return self._opt

    def oracle(self) -> dict[str, Any]:
        return {"optimum": self._opt, "values": self.values,
                "gateways": self.task.params.get("gateways")}

    def parents(self) -> list[int]:
        return self.parent

    def known_values(self) -> dict[int, int]:
        return dict(self.state.extra["known"])

    def frontier(self) -> list[int]:
        """The admissible set: unknown nodes whose parent is known."""
        return sorted(self.state.extra["avail"])

    def answered(self, action: str) -> bool:
        node, error = self.read(str(action))
        return error is None and node in self.state.extra["known"]

    def legal_actions(self) -> list[str]:
        return [f"node={v}" for v in self.frontier()] if not self.done else []

    # --- texts ---------------------------------------------------------------------------
    answer_text = prompts.TREE_ANSWER
    help_text = prompts.TREE_HELP

    def system_prompt(self) -> str:
        return prompts.tree_system()

    def response_schema(self) -> dict[str, Any]:
        return prompts.tree_schema()

    def adjacency_lines(self) -> list[str]:
        rng = self._rng("graph", 0)
        nodes = list(range(len(self.parent)))
        rng.shuffle(nodes)
        lines = []
        for u in nodes:
            nbrs = list(self.children[u]) + ([self.parent[u]] if self.parent[u] >= 0 else [])
            rng.shuffle(nbrs)
            lines.append(f"{u}: " + ", ".join(str(v) for v in nbrs))
        return lines

    def _first_text(self) -> str:
        gates = list(self.children[self.root])
        self._rng("start", 0).shuffle(gates)
        return prompts.tree_first(len(self.parent), self.adjacency_lines(), self.root,
                                  self.n_queries, gates)

    def _feedback(self, node: int, value: float) -> str:
        new = list(self.children[node])
        self._rng("new").shuffle(new)
        available: list[int] = []
        if not new:
            avail = self.state.extra["avail"]
            available = list(avail)
            self._rng("avail").shuffle(available)
            available.sort(key=lambda v: -avail[v])  # stable: ties keep the random order
        return prompts.tree_feedback(node, int(value), self.remaining, new, available)

    def handoff_message(self) -> str:
        history = [(int(v), int(x)) for v, x in self.state.history]
        best = (self.root, 0)
        for v, x in history:
            if x > best[1]:
                best = (v, x)
        by_height: dict[int, list[int]] = {}
        for v in self.state.extra["avail"]:
            by_height.setdefault(self.depth[v], []).append(v)
        rng = self._rng("handoff")
        groups = []
        for h in sorted(by_height):
            ids = sorted(by_height[h])
            rng.shuffle(ids)
            groups.append((h, ids))
        graph = None
        if self.handoff_include_graph:
            graph = ("Graph (adjacency list):\n" + "\n".join(self.adjacency_lines())
                     + f"\nStart node: {self.root}, value 0.")
        return prompts.tree_handoff(history, best, groups, self.remaining, graph)

    # --- queries -------------------------------------------------------------------------
    def _parse(self, text: str) -> tuple[int | None, str | None]:
        return read_number(text, "node", _NODE, r"\s*(-?\d+)\s*", "<id>", integer=True)

    def _validate(self, node: int) -> str | None:
        if not 0 <= node < len(self.parent):
            return f"Node {node} does not exist"
        if node == self.root:
            return f"Node {node} is the start node; its value is already known"
        if node in self.state.extra["known"]:
            return f"Node {node} was already queried"
        if self.parent[node] not in self.state.extra["known"]:
            return f"Node {node} is not adjacent to any known node"
        return None

    def _evaluate(self, node: int) -> float:
        return float(self.values[node])

    def _canon(self, node: int) -> str:
        return f"node={node}"

    def _shown(self, value: float) -> int:
        return int(value)
