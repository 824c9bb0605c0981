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
  backed-up mean and visit count; the root's ``q`` is the visit-weighted mean of its edges),
  ``uses_oracle`` (the tree's ``meta``), ``success`` (the episode's) and ``steps_left`` (the real
  steps after a root, None below it).

A third, **value_sft** (:func:`value_sft_rows`), turns the value rows into chats that train a value
model (docs/methods/exploratory-learning.md#learned-value): the ``prompt`` and one assistant turn,
the grade of the row's target (:func:`clew.agents.distilled_value.grade_answer`). The target is
the search's own estimate, ``q`` (the backed-up mean: the value function's estimates of the
node's subtree), else ``v`` where ``q`` is unknown, or ``v`` alone, or ``outcome``: in hindsight,
for an executed state (a tree's root), what the episode's ending made of it, γ^k on success and 0
otherwise, k the steps it had left (``value_discount`` γ; AlphaZero's value target). ``outcome``
needs an env whose episodes end on success (the record's ``outcome.success``); the rest is left
out and counted, as are the states off the executed path (``value_target``). Rows from
a tree whose search read the oracle (its ``meta.uses_oracle``) are left out and counted: a model
trained on them would carry the oracle into every search that uses it.

The ``prompt`` of all three is what the distilled agent in the IL format sees at that node
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

from clew.agents.distilled_value import grade_answer
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
    success = (record.get("outcome") or {}).get("success")
    steps_left = len(record.get("steps") or []) - t     # after this tree's root
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
        where = {**meta, "t": t, "node": node.node_id, "depth": node.depth,
                 "uses_oracle": tree.meta.get("uses_oracle")}
        if value is not None:
            # what hindsight knows of an executed state (the root): how the episode ended, and when
            out.values.append({"prompt": prompt, **value, **where, "success": success,
                               "steps_left": steps_left if node.incoming is None else None})
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


VALUE_TARGETS = ("q", "v", "outcome")
#: why a value row gives no value_sft chat
READ_ORACLE = "the search read the oracle (tree meta uses_oracle: true)"
NO_ORACLE_FLAG = "the tree does not record whether its search read the oracle"
NO_TARGET = "no target (value unknown and no visited incoming edge)"
NOT_EXECUTED = "not an executed state (value_target outcome grades the trees' roots)"
NO_OUTCOME = "the episode does not end on success (value_target outcome)"


def value_target(row: dict[str, Any], target: str = "q", discount: float = 0.95
                 ) -> float | None:
    """The unit-scale target of a value row: ``q``, else ``v`` (``target="q"``), ``v``, or
    ``outcome`` (γ^k on success, else 0, k the steps left; None off the executed path)."""
    if target not in VALUE_TARGETS:
        raise ValueError(f"value_target must be one of {', '.join(VALUE_TARGETS)}, got {target!r}")
    if target == "outcome":
        if row.get("steps_left") is None or row.get("success") is None:
            return None
        return discount ** int(row["steps_left"]) if row["success"] else 0.0
    if target == "q" and row.get("q") is not None:
        return float(row["q"])
    return None if row.get("v") is None else float(row["v"])


def value_sft_rows(values: list[dict[str, Any]], target: str = "q", discount: float = 0.95
                   ) -> tuple[list[dict[str, Any]], Counter]:
    """``value_sft`` chats from ``values`` rows (see the module docstring), and the rows left
    out, counted by reason. Columns: ``messages`` (the prompt's assistant turns weight 0, the
    grade weight 1), the chat datasets' metadata (``kind`` and ``subset`` say value /
    value_sft, ``turn_index`` is the real step of the tree), ``target``, ``node``, ``depth``."""
    rows, skipped = [], Counter()
    for row in values:
        oracle = row.get("uses_oracle")
        if oracle is not False:
            skipped[READ_ORACLE if oracle else NO_ORACLE_FLAG] += 1
            continue
        y = value_target(row, target, discount)
        if y is None:
            skipped[NO_TARGET if target != "outcome" else
                    NOT_EXECUTED if row.get("steps_left") is None else NO_OUTCOME] += 1
            continue
        messages = [{"role": m["role"], "content": m["content"],
                     "weight": 0 if m["role"] == "assistant" else None} for m in row["prompt"]]
        messages.append({"role": "assistant", "content": grade_answer(y), "weight": 1})
        rows.append({"messages": messages, "task_id": row["task_id"], "env": row["env"],
                     "source_run": row["source_run"], "episode": row["episode"],
                     "agent": row["agent"], "kind": "value", "subset": "value_sft",
                     "turn_index": int(row["t"]), "n_backtracks": 0, "selected_by": "all",
                     "target": y, "node": int(row["node"]), "depth": int(row["depth"])})
    return rows, skipped


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
