"""Plain-data search tree of one real step (docs/methods/mcts.md), and its JSON form.

Every search algorithm (:mod:`clew.search.mcts`, :mod:`clew.search.frontier`) and the EL
flattener (docs/methods/exploratory-learning.md) work on these three dataclasses. Nodes and edges
are also indexed by id in the :class:`Tree`, so a flattener can follow a traversal (a list of edge
ids) without walking links.

Actions are env action strings (``env.parse_action`` output); ``None`` is the NONE action (no
completion parsed; docs/methods/mcts.md#stop-and-none-edges). Whether an edge is a STOP is decided
by the caller (``env.is_stop``) when the edge is created and stored on the edge, so the tree and
the flattener never need the env.

JSON schema (``tree_to_dict``; ``"schema": "clew.tree/1"``). Snapshots are never serialised.
Object links become ids::

    {
      "schema": "clew.tree/1",
      "root": 0,                                   # node id of the root
      "nodes": [                                   # by node_id (creation order), node_id == index
        {"node_id": 0, "parent": null | node_id, "incoming": null | edge_id, "depth": 0,
         "obs": str | null,                        # observation after the incoming action
         "edges": [edge_id, ...],                  # edge order = prior rank = tie-break order
         "expanded": bool, "ns": int, "value": float | null,
         "value_record": dict | null,              # samples, rationales, debate texts
         "terminal": bool,
         "terminal_reason": null | "stop" | "invalid" | "env_done" | "horizon" | "depth"
                            | "early_stop",
         "needs_eval": bool,
         "retrieved_policy_refl": [str, ...],      # reflection ids shown at this expansion
         "wave": int | null,                       # the wave that created it (root: 0)
         "info": {}}                               # free extras (e.g. env step info)
      ],
      "edges": [                                   # by edge_id (creation order), edge_id == index
        {"edge_id": 0, "parent": node_id, "action": str | null, "key": str, "raw": str,
         "count": int, "prior": float, "n": int, "q": float, "v_next": float | null,
         "child": node_id | null, "is_stop": bool, "is_none": bool}
      ],
      "expansion_order": [node_id, ...],           # order in which nodes were expanded
      "eval_order": [node_id, ...],                # order in which nodes were evaluated by V
      "traversals": [[edge_id, ...], ...],         # one per simulation, exactly as simulated
      "waves": {"size": int,                       # k: simulations selected together per wave
                "traversals": [int, ...]} | null,  # the wave of each traversal (1, 2, ...)
      "decision": {"kind": "single" | "path" | "sequence" | null, "edges": [edge_id, ...]},
      "counters": {"simulations": int, "value_calls": int, "policy_calls": int,
                   "seconds": float, "stopped_by": str | null},
      "meta": {...}                                # step t, task id, agent, config, usage, ...
    }

Decision kinds: ``single`` (MCTS: one root edge, the most visited), ``path`` (MCTS early stop at
the top value: the edges of the last traversal), ``sequence`` (ToT BFS/DFS and best-first: the
path to the best-scoring node, not necessarily the last traversal). The frontier
baselines record their visit order the same way as MCTS: one traversal (edge ids from the root)
per popped node, in pop order, each pop a wave of its own.

Waves (docs/methods/mcts.md#leaf-parallel-waves): MCTS selects up to ``waves.size`` leaves at a
time and sends their model calls together; ``waves.traversals`` says which wave each traversal
belonged to and a node's ``wave`` which wave created it. Within a wave, traversals, expansions,
evaluations, node ids and edge ids are in selection order. Trees written before waves have
``waves: null`` and no ``wave`` on their nodes.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clew.records.files import write_atomic
from clew.records.rundir import RunDir

SCHEMA = "clew.tree/1"


@dataclass(eq=False)
class Edge:
    """An action out of a node (docs/methods/mcts.md). ``parent``/``child`` are object links."""

    edge_id: int
    parent: Node
    action: str | None          # None = the NONE action (nothing parsed)
    key: str                    # env.canonical(action): merge key
    raw: str = ""               # first sampled completion that produced this key
    count: int = 0              # samples that produced this key
    prior: float = 0.0          # P(a|s), renormalised over the kept edges
    n: int = 0                  # N(s,a)
    q: float = 0.0              # Q(s,a), q_init
    v_next: float | None = None  # V(child) once evaluated
    child: Node | None = None
    is_stop: bool = False

    @property
    def is_none(self) -> bool:
        return self.action is None


@dataclass(eq=False)
class Node:
    """A state reached by a path of actions from the tree root (docs/methods/mcts.md)."""

    node_id: int
    parent: Node | None = None
    incoming: Edge | None = None
    depth: int = 0
    obs: str | None = None
    snap: Any = None            # env snapshot cache; never serialised
    edges: list[Edge] = field(default_factory=list)
    expanded: bool = False
    ns: int = 0                 # Ns(s) = sum of N over the edges
    value: float | None = None
    value_record: dict[str, Any] | None = None
    terminal: bool = False
    terminal_reason: str | None = None
    needs_eval: bool = True
    retrieved_policy_refl: list[str] = field(default_factory=list)
    wave: int | None = None     # the wave that created it (the root: 0)
    info: dict[str, Any] = field(default_factory=dict)

    def path_edges(self) -> list[Edge]:
        """Edges from the tree root down to this node."""
        out: list[Edge] = []
        node: Node | None = self
        while node is not None and node.incoming is not None:
            out.append(node.incoming)
            node = node.parent
        return out[::-1]


@dataclass(eq=False)
class Tree:
    """One search tree: nodes/edges by id, expansion order and traversals (docs/methods/mcts.md)."""

    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    expansion_order: list[int] = field(default_factory=list)
    eval_order: list[int] = field(default_factory=list)
    traversals: list[list[int]] = field(default_factory=list)
    wave_size: int | None = None           # k; None: a tree from before waves
    wave_pipeline: bool = False            # a wave's values backed up after the next's selection
    traversal_waves: list[int] = field(default_factory=list)
    wave: int = 0                          # the wave in progress; new nodes are stamped with it
    decision_kind: str | None = None       # "single" | "path"
    decision_edges: list[int] = field(default_factory=list)
    counters: dict[str, Any] = field(default_factory=lambda: {
        "simulations": 0, "value_calls": 0, "policy_calls": 0, "seconds": 0.0,
        "stopped_by": None})
    meta: dict[str, Any] = field(default_factory=dict)

    # --- building ------------------------------------------------------------------------
    @classmethod
    def with_root(cls, obs: str | None, snap: Any = None) -> Tree:
        tree = cls()
        tree.new_node(parent=None, incoming=None, obs=obs, snap=snap)
        return tree

    @property
    def root(self) -> Node:
        return self.nodes[0]

    def new_node(self, parent: Node | None, incoming: Edge | None, obs: str | None = None,
                 snap: Any = None) -> Node:
        node = Node(node_id=len(self.nodes), parent=parent, incoming=incoming,
                    depth=0 if parent is None else parent.depth + 1, obs=obs, snap=snap,
                    wave=self.wave)
        self.nodes.append(node)
        if incoming is not None:
            incoming.child = node
        return node

    def new_edge(self, parent: Node, action: str | None, key: str, raw: str = "", count: int = 0,
                 prior: float = 0.0, q: float = 0.0, is_stop: bool = False) -> Edge:
        edge = Edge(edge_id=len(self.edges), parent=parent, action=action, key=key, raw=raw,
                    count=count, prior=prior, q=q, is_stop=is_stop)
        self.edges.append(edge)
        parent.edges.append(edge)
        return edge

    def add_traversal(self, path: list[Edge], wave: int | None = None) -> None:
        """Record one simulation's path, selected in ``wave`` (default: the wave in progress)."""
        self.traversals.append([e.edge_id for e in path])
        self.traversal_waves.append(self.wave if wave is None else wave)

    def edge(self, edge_id: int) -> Edge:
        return self.edges[edge_id]

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id]


# --- JSON ----------------------------------------------------------------------------------
def _node_dict(node: Node) -> dict[str, Any]:
    return {
        "node_id": node.node_id,
        "parent": None if node.parent is None else node.parent.node_id,
        "incoming": None if node.incoming is None else node.incoming.edge_id,
        "depth": node.depth, "obs": node.obs,
        "edges": [e.edge_id for e in node.edges],
        "expanded": node.expanded, "ns": node.ns, "value": node.value,
        "value_record": node.value_record, "terminal": node.terminal,
        "terminal_reason": node.terminal_reason, "needs_eval": node.needs_eval,
        "retrieved_policy_refl": list(node.retrieved_policy_refl), "wave": node.wave,
        "info": node.info,
    }


def _edge_dict(edge: Edge) -> dict[str, Any]:
    return {
        "edge_id": edge.edge_id, "parent": edge.parent.node_id, "action": edge.action,
        "key": edge.key, "raw": edge.raw, "count": edge.count, "prior": edge.prior,
        "n": edge.n, "q": edge.q, "v_next": edge.v_next,
        "child": None if edge.child is None else edge.child.node_id,
        "is_stop": edge.is_stop, "is_none": edge.is_none,
    }


def tree_to_dict(tree: Tree) -> dict[str, Any]:
    """The JSON-able form of ``tree`` (schema in the module docstring)."""
    return {
        "schema": SCHEMA,
        "root": 0,
        "nodes": [_node_dict(n) for n in tree.nodes],
        "edges": [_edge_dict(e) for e in tree.edges],
        "expansion_order": list(tree.expansion_order),
        "eval_order": list(tree.eval_order),
        "traversals": [list(t) for t in tree.traversals],
        "waves": None if tree.wave_size is None else {
            "size": tree.wave_size, "traversals": list(tree.traversal_waves),
            **({"pipeline": True} if tree.wave_pipeline else {})},
        "decision": {"kind": tree.decision_kind, "edges": list(tree.decision_edges)},
        "counters": dict(tree.counters),
        "meta": tree.meta,
    }


class TreeFormatError(ValueError):
    """A stored tree does not follow the schema; the message says where."""


def tree_from_dict(data: dict[str, Any], where: str = "tree") -> Tree:
    """Rebuild a :class:`Tree` (links included, no snapshots) from :func:`tree_to_dict` output."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise TreeFormatError(f"{where}: expected schema {SCHEMA!r}, got {got!r}")
    try:
        tree = Tree()
        for i, nd in enumerate(data["nodes"]):
            if nd["node_id"] != i:
                raise TreeFormatError(f"{where}: nodes[{i}] has node_id {nd['node_id']}")
            tree.nodes.append(Node(
                node_id=i, depth=int(nd["depth"]), obs=nd["obs"], expanded=bool(nd["expanded"]),
                ns=int(nd["ns"]), value=nd["value"], value_record=nd.get("value_record"),
                terminal=bool(nd["terminal"]), terminal_reason=nd.get("terminal_reason"),
                needs_eval=bool(nd.get("needs_eval", True)),
                retrieved_policy_refl=list(nd.get("retrieved_policy_refl", [])),
                wave=None if nd.get("wave") is None else int(nd["wave"]),
                info=dict(nd.get("info") or {})))
        for i, ed in enumerate(data["edges"]):
            if ed["edge_id"] != i:
                raise TreeFormatError(f"{where}: edges[{i}] has edge_id {ed['edge_id']}")
            edge = Edge(
                edge_id=i, parent=tree.nodes[ed["parent"]], action=ed["action"], key=ed["key"],
                raw=ed.get("raw", ""), count=int(ed.get("count", 0)),
                prior=float(ed.get("prior", 0.0)), n=int(ed["n"]), q=float(ed["q"]),
                v_next=ed.get("v_next"), is_stop=bool(ed.get("is_stop", False)))
            if ed.get("child") is not None:
                edge.child = tree.nodes[ed["child"]]
            tree.edges.append(edge)
        for nd, node in zip(data["nodes"], tree.nodes):
            node.parent = None if nd["parent"] is None else tree.nodes[nd["parent"]]
            node.incoming = None if nd["incoming"] is None else tree.edges[nd["incoming"]]
            node.edges = [tree.edges[j] for j in nd["edges"]]
        tree.expansion_order = [int(x) for x in data.get("expansion_order", [])]
        tree.eval_order = [int(x) for x in data.get("eval_order", [])]
        tree.traversals = [[int(x) for x in t] for t in data.get("traversals", [])]
        waves = data.get("waves")
        if waves is not None:
            tree.wave_size = int(waves["size"])
            tree.wave_pipeline = bool(waves.get("pipeline", False))
            tree.traversal_waves = [int(x) for x in waves["traversals"]]
            if len(tree.traversal_waves) != len(tree.traversals):
                raise TreeFormatError(f"{where}: waves.traversals has "
                                      f"{len(tree.traversal_waves)} entries for "
                                      f"{len(tree.traversals)} traversals")
            tree.wave = max(tree.traversal_waves, default=0)
        decision = data.get("decision") or {}
        tree.decision_kind = decision.get("kind")
        tree.decision_edges = [int(x) for x in decision.get("edges", [])]
        tree.counters = dict(data.get("counters") or {})
        tree.meta = dict(data.get("meta") or {})
    except TreeFormatError:
        raise
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise TreeFormatError(f"{where}: malformed tree ({type(exc).__name__}: {exc})") from exc
    return tree


# --- files ---------------------------------------------------------------------------------
def dump_tree_dict(path: str | Path, data: dict[str, Any]) -> None:
    """Save an already converted tree dict as gzip JSON (atomic)."""
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    # mtime=0: identical trees give identical files
    write_atomic(path, gzip.compress(raw, mtime=0))


def save_tree(path: str | Path, tree: Tree | dict[str, Any]) -> None:
    """Save ``tree`` (a Tree or its dict) to ``path`` as gzip JSON, atomically."""
    dump_tree_dict(path, tree if isinstance(tree, dict) else tree_to_dict(tree))


def load_tree_dict(path: str | Path) -> dict[str, Any]:
    """Read a tree file (gzip JSON, or plain JSON when the name does not end in .gz)."""
    path = Path(path)
    try:
        blob = path.read_bytes()
        text = gzip.decompress(blob) if blob[:2] == b"\x1f\x8b" else blob
        return json.loads(text)
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error, json.JSONDecodeError,
            UnicodeDecodeError) as exc:
        raise TreeFormatError(f"{path}: cannot read tree ({type(exc).__name__}: {exc})") from exc


def load_tree(path: str | Path) -> Tree:
    """Load a tree saved by :func:`save_tree`."""
    return tree_from_dict(load_tree_dict(path), where=str(path))


def read_trees(run: RunDir | str | Path, key: str) -> dict[int, Tree]:
    """The trees of one episode of a run directory, by real step (``trees/KEY/STEP.json.gz``)."""
    folder = run if isinstance(run, RunDir) else RunDir(run)
    return {step: load_tree(path) for step, path in folder.tree_files(key)}
