"""`clew view`: replay schedule of real MCTS trees, tolerant loading, safe self-contained HTML."""

from __future__ import annotations

import json
import re

import pytest
from clew.cli.main import main
from clew.reports.tree_view import (
    default_out,
    normalise,
    reflection_texts,
    render,
    replay_schedule,
    write_view,
)
from clew.search.tree import TreeFormatError, save_tree
from hypothesis import given, settings
from hypothesis import strategies as st
from report_fixtures import EVIL, mcts_tree


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 25))
def test_replay_schedule_follows_the_traversals(seed, sims):
    tree = mcts_tree(seed, sims)
    sched = replay_schedule(tree)
    assert sched["mode"] == "traversals" and sched["steps"] == len(tree["traversals"])
    edges, nodes = tree["edges"], tree["nodes"]
    first_seen = {0: 0}
    for k, trav in enumerate(tree["traversals"], 1):
        for eid in trav:
            first_seen.setdefault(edges[eid]["child"], k)
    for nd in nodes:
        i = nd["node_id"]
        # a node appears at the first simulation that passes through it (all MCTS nodes do)
        assert sched["node_step"][i] == first_seen[i]
        if nd["parent"] is not None:
            assert sched["node_step"][nd["parent"]] <= sched["node_step"][i]
        if i in tree["expansion_order"]:
            assert sched["expand_step"][i] == sched["node_step"][i]
        else:
            assert sched["expand_step"][i] is None
    assert sched["expand_step"][0] == 0
    # the order of first expansion steps follows the recorded expansion order
    steps = [sched["expand_step"][i] for i in tree["expansion_order"]]
    assert steps == sorted(steps)


def minimal_tree() -> dict:
    """Only the required fields: no traversals, priors, raw text, value records or meta."""
    node = lambda i, parent, inc, depth, edges, expanded: {
        "node_id": i, "parent": parent, "incoming": inc, "depth": depth, "obs": f"obs {i}",
        "edges": edges, "expanded": expanded, "ns": 0, "value": None, "terminal": False}
    edge = lambda i, parent, child, action: {
        "edge_id": i, "parent": parent, "action": action, "key": action, "n": 0, "q": 0.0,
        "child": child}
    return {"schema": "clew.tree/1", "root": 0,
            "nodes": [node(0, None, None, 0, [0, 1], True), node(1, 0, 0, 1, [2], True),
                      node(2, 1, 2, 2, [], False)],
            "edges": [edge(0, 0, 1, "a"), edge(1, 0, None, "b"), edge(2, 1, 2, "c")],
            "expansion_order": [0, 1], "future_field": {"kept": True}}


def test_tolerates_missing_optional_fields_and_keeps_unknown_ones():
    tree = normalise(minimal_tree())
    assert tree["nodes"][0]["retrieved_policy_refl"] == [] and tree["edges"][0]["prior"] == 0.0
    assert tree["future_field"] == {"kept": True}
    sched = replay_schedule(tree)
    # no traversals: one expansion per step; children appear when the parent is expanded
    assert sched == {"mode": "expansions", "steps": 2, "node_step": [0, 0, 2],
                     "expand_step": [0, 2, None], "waves": None, "wave_size": None,
                     "wave_pipeline": False}
    assert "obs 2" in render(tree)


def test_bad_tree_files_are_named_errors(tmp_path):
    bad = tmp_path / "bad.json.gz"
    save_tree(bad, {"schema": "clew.tree/1", "nodes": [{"node_id": 5}], "edges": []})
    with pytest.raises(TreeFormatError, match="bad.json.gz"):
        write_view(bad)
    assert main(["view", str(bad)]) == 2
    junk = tmp_path / "junk.json.gz"
    junk.write_bytes(b"not json")
    assert main(["view", str(junk)]) == 2


def test_html_embeds_the_tree_safely(tmp_path):
    tree = mcts_tree(1, 8)
    tree["meta"] = {"task_id": "line-0", "reflections": [{"id": "r1", "text": "go " + EVIL}]}
    tree["nodes"][0]["retrieved_policy_refl"] = ["r1"]
    path = tmp_path / "trees" / "line-0#0" / "3.json.gz"
    save_tree(path, tree)
    out = write_view(path)
    assert out == default_out(path) == path.with_name("3.html")
    page = out.read_text()
    assert EVIL not in page and "window.pwned" in page  # present, but only as escaped data
    assert len(re.findall(r"<script", page)) == 2  # the data block and the viewer code
    assert "src=" not in page and "<link" not in page  # nothing loaded from outside
    data = re.search(r'<script type="application/json" id="tree-data">(.*?)</script>', page, re.DOTALL)
    payload = json.loads(data.group(1))
    assert payload["tree"]["nodes"][1]["obs"] == tree["nodes"][1]["obs"]
    assert payload["reflections"] == {"r1": "go " + EVIL}
    assert payload["replay"]["steps"] == len(tree["traversals"])


def test_reflection_texts_forms():
    assert reflection_texts({"meta": {"reflections": {"a": "x"}}}) == {"a": "x"}
    assert reflection_texts({"meta": {"reflections": [{"id": 1, "text": "y"}]}}) == {"1": "y"}
    assert reflection_texts({"meta": {}}) == {}


def test_cli_view_writes_the_page(tmp_path, capsys):
    path = tmp_path / "0.json.gz"
    save_tree(path, mcts_tree(2, 5))
    assert main(["view", str(path), "--out", str(tmp_path / "x" / "v.html")]) == 0
    assert (tmp_path / "x" / "v.html").read_text().startswith("<!DOCTYPE html>")
    assert "v.html" in capsys.readouterr().out
