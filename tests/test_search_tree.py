"""Tree data and its JSON/gzip round trip (docs/methods/mcts.md#tree-data)."""

from __future__ import annotations

import gzip
import json

import pytest
from clew.search.tree import (
    SCHEMA,
    Tree,
    TreeFormatError,
    load_tree,
    save_tree,
    tree_from_dict,
    tree_to_dict,
)


def small_tree() -> Tree:
    tree = Tree.with_root("o0", snap=object())
    root = tree.root
    a = tree.new_edge(root, "a", "a", raw="think a", count=12, prior=0.6)
    b = tree.new_edge(root, "stop", "stop", raw="think stop", count=8, prior=0.4, is_stop=True)
    root.expanded = True
    tree.expansion_order.append(root.node_id)
    s1 = tree.new_node(root, a, obs="o1")
    s1.value, s1.value_record = 0.2, {"samples": [["B", "meh"]]}
    a.n, a.q, a.v_next, root.ns = 1, 0.2, 0.2, 1
    none = tree.new_edge(s1, None, "NONE", prior=0.0)
    s1.expanded = True
    tree.expansion_order.append(s1.node_id)
    s2 = tree.new_node(s1, none)
    s2.terminal, s2.terminal_reason, s2.needs_eval, s2.value = True, "invalid", False, 0.0
    tree.traversals = [[a.edge_id], [a.edge_id, none.edge_id]]
    tree.decision_kind, tree.decision_edges = "single", [b.edge_id]
    tree.meta = {"t": 0, "task": "x"}
    return tree


def test_round_trip_keeps_links_and_stats(tmp_path):
    tree = small_tree()
    data = tree_to_dict(tree)
    assert data["schema"] == SCHEMA
    json.dumps(data)  # JSON-able
    back = tree_from_dict(json.loads(json.dumps(data)))
    assert tree_to_dict(back) == data
    assert back.root.snap is None  # snapshots are not serialised
    s2 = back.node(2)
    assert [e.edge_id for e in s2.path_edges()] == [0, 2]
    assert s2.parent is back.node(1) and back.edge(2).child is s2
    assert back.edge(2).is_none and back.edge(1).is_stop

    path = tmp_path / "trees" / "ep" / "0.json.gz"
    save_tree(path, tree)
    assert gzip.decompress(path.read_bytes())  # gzip on disk
    assert tree_to_dict(load_tree(path)) == data
    assert [p.name for p in path.parent.iterdir()] == ["0.json.gz"]  # no temp file left


def test_bad_files_name_the_file(tmp_path):
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"\x1f\x8b garbage")
    with pytest.raises(TreeFormatError, match="bad.json.gz"):
        load_tree(bad)
    data = tree_to_dict(small_tree())
    data["edges"][0]["parent"] = 99
    with pytest.raises(TreeFormatError, match="malformed"):
        tree_from_dict(data)
    with pytest.raises(TreeFormatError, match="schema"):
        tree_from_dict({"schema": "other"})
