"""Search trees to step-level preference pairs and value targets
(docs/methods/exploratory-learning.md#preference-pairs-and-dpo).

A searched tree holds more signal than the executed path that SFT imitates: at every node the
search tried several actions and estimated each one's worth (the edge's Q, the mean return backed
up through it over its N visits), and every evaluated node has a value V. This module turns them
into two datasets:

* **pairs** (TRL's conversational preference format): at a node, the highest-Q action among the
  edges visited at least ``min_visits`` times is ``chosen``; every other such edge whose Q is at
  least ``margin`` lower is ``rejected`` in one pair each (best against the rest: each pair has
  the node's clearest winner, and a node gives at most b − 1 pairs). Q is compared on the unit
  scale (a signed tree's Q is mapped to (q + 1) / 2). NONE edges (nothing parsed) never take part.
* **values**: one row per node with a value or a visited incoming edge: the state text, ``v``
  (the value function's estimate on the unit scale; ``None`` when every sample was unreadable:
  such a node is kept and counted, never written as 0), ``q`` and ``visits`` (the incoming edge's
  backed-up mean and visit count; the root's ``q`` is the visit-weighted mean of its edges).

The ``prompt`` of both is what the distilled agent in the IL format sees at that node
(:mod:`clew.agents.distilled`, ``format: il``): the system prompt, the episode's executed steps
before the tree, then the tree path to the node, replayed in a fresh env with
:func:`clew.training.flatten.teacher_force` and its history elided as in the chat samples, so a
model trained on the pairs is run with
``clew eval --agent distilled --agent-options '{"format": "il"}'``. The completions are the
edges' own completions (a bare action gets the answer line, like IL data).

Every episode is used, successful or not: Q and V are the search's estimates at each node and
do not depend on how the episode ended.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clew.agents.window import ChatWindow
from clew.envs.base import Task
from clew.records.jsonl import numbered_jsonl
from clew.search.tree import Edge, Node, Tree
from clew.training.flatten import FlattenError, Turn, completion_text, il_turns, teacher_force


@dataclass
class PairOptions:
    """The ``pair_*`` / ``value_*`` fields of :class:`clew.training.datasets.DataConfig`."""

    margin: float
    min_visits: int
    value_min_visits: int
    window: ChatWindow = field(default_factory=ChatWindow)   # the chat samples' window


@dataclass
class TreeRows:
    pairs: list[dict[str, Any]] = field(default_factory=list)
    values: list[dict[str, Any]] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)


def _unit(x: float | None, scale: str) -> float | None:
    if x is None:
        return None
    return (x + 1.0) / 2.0 if scale == "signed" else float(x)


def _path(node: Node) -> list[Edge]:
    out = []
    while node.incoming is not None:
        out.append(node.incoming)
        node = node.parent
    return out[::-1]


def _unknown(node: Node) -> bool:
    rec = node.value_record or {}
    return bool(node.info.get("value_unknown") or rec.get("all_failed"))


def node_pairs(node: Node, scale: str, opt: PairOptions) -> list[tuple[Edge, Edge]]:
    """(chosen, rejected) edge pairs at ``node`` (see the module docstring)."""
    edges = [e for e in node.edges if not e.is_none and e.n >= opt.min_visits]
    if len(edges) < 2:
        return []
    best = max(edges, key=lambda e: e.q)          # the first of equal Q: the higher prior
    top = _unit(best.q, scale)
    return [(best, e) for e in edges
            if e is not best and top - _unit(e.q, scale) >= opt.margin - 1e-12]


def _value_row(node: Node, scale: str, opt: PairOptions) -> dict[str, Any] | None:
    v = None if _unknown(node) or node.value is None else _unit(node.value, scale)
    if node.incoming is None:
        visits = sum(e.n for e in node.edges)
        q = _unit(sum(e.n * e.q for e in node.edges) / visits, scale) if visits else None
    else:
        visits, q = node.incoming.n, _unit(node.incoming.q, scale)
        if not visits:
            q = None
    if visits < opt.value_min_visits:
        q = None
    if v is None and q is None and not _unknown(node):
        return None
    return {"state": node.obs or "", "v": v, "q": q, "visits": visits,
            "value_unknown": _unknown(node)}


def tree_rows(record: dict[str, Any], t: int, tree: Tree, make_env, opt: PairOptions,
              meta: dict[str, Any]) -> TreeRows:
    """Pairs and value rows of the tree searched before real step ``t`` of ``record``."""
    out = TreeRows()
    scale = str(tree.meta.get("value_scale") or "unit")
    task = Task.from_dict(record["task"])
    prefix = il_turns(record)[:t]
    for node in tree.nodes:
        pairs = node_pairs(node, scale, opt)
        value = _value_row(node, scale, opt)
        if not pairs and value is None:
            continue
        path = _path(node)
        if any(e.is_stop or e.is_none for e in path):
            continue                                  # no state after a STOP or a NONE edge
        turns = prefix + [Turn("act", None, completion_text(e.raw, e.action), edge=e)
                          for e in path]
        for turn in turns[t:]:
            turn.text = turn.render()
        try:
            chat = teacher_force(make_env(), task, turns, "il", open_end=True,
                                 trail=opt.window.trail)
        except FlattenError:
            out.counts["replay_failed"] += 1
            continue
        if chat.truncated or chat.messages[-1]["role"] != "user":
            out.counts["replay_failed"] += 1
            continue
        # cut like the IL samples and the distilled agent's own prompts
        prompt = opt.window.apply([{"role": m["role"], "content": m["content"]}
                                   for m in chat.messages])
        where = {**meta, "t": t, "node": node.node_id, "depth": node.depth}
        if value is not None:
            out.values.append({"prompt": prompt, **value, **where})
            out.counts["value_unknown"] += int(value["value_unknown"])
        for chosen, rejected in pairs:
            out.pairs.append({
                "prompt": prompt,
                "chosen": [{"role": "assistant",
                            "content": completion_text(chosen.raw, chosen.action)}],
                "rejected": [{"role": "assistant",
                              "content": completion_text(rejected.raw, rejected.action)}],
                "q_chosen": _unit(chosen.q, scale), "q_rejected": _unit(rejected.q, scale),
                "n_chosen": chosen.n, "n_rejected": rejected.n, **where})
    return out


def episode_rows(record: dict[str, Any], trees: dict[int, Tree], make_env, opt: PairOptions,
                 meta: dict[str, Any]) -> TreeRows:
    """Pairs and value rows of every tree of one episode."""
    out = TreeRows()
    n_steps = len(record.get("steps") or [])
    for t, tree in sorted(trees.items()):
        if t > n_steps:
            out.counts["tree_after_the_last_step"] += 1
            continue
        rows = tree_rows(record, t, tree, make_env, opt, meta)
        out.pairs += rows.pairs
        out.values += rows.values
        out.counts.update(rows.counts)
    return out


def load_preference_dataset(path: str):
    """A preference dataset (``clew data``'s ``pairs`` folder or a JSONL of conversational
    ``prompt`` / ``chosen`` / ``rejected`` rows), only those three columns."""
    from datasets import Dataset, load_from_disk

    p = Path(path)
    if p.is_dir():
        ds = load_from_disk(str(p))
    elif p.suffix == ".jsonl" and p.exists():
        ds = Dataset.from_list([obj for _, obj in numbered_jsonl(p)])
    else:
        raise FileNotFoundError(f"dataset {p}: neither a saved dataset folder nor a .jsonl file")
    if not len(ds):
        raise ValueError(f"dataset {p} has no preference pairs")
    missing = [c for c in ("prompt", "chosen", "rejected") if c not in ds.column_names]
    if missing:
        raise ValueError(f"dataset {p} is not a preference dataset: no {', '.join(missing)} "
                         f"column (columns: {ds.column_names}; `clew data` writes DIR/pairs)")
    return ds.select_columns(["prompt", "chosen", "rejected"])
