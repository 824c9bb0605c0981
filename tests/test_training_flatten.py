"""EL/IL flattening (docs/methods/exploratory-learning.md#traversals-kept to #teacher-forcing): the worked example of docs/methods/exploratory-learning.md#worked-example, backtrack placement,
STOP handling, IL = executed actions, and no-backtrack envs."""

from __future__ import annotations

from itertools import pairwise

import pytest
from clew.agents.distilled import BACKTRACK_TURN, system_prompt
from clew.agents.window import ChatWindow
from clew.envs.base import Task
from clew.search.tree import Tree
from clew.training.flatten import (
    Act,
    Back,
    ExportOptions,
    FlattenError,
    Obs,
    assessment,
    completion_text,
    count_actions,
    el_turns,
    export_episode,
    flatten_episode,
    flatten_step,
    il_turns,
    make_samples,
    select_traversals,
    state_ids,
    teacher_force,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from training_toys import NoBacktrackTreeEnv, TreeEnv, raw, worked_example


def describe(items, tree=None):
    """Items as the spec writes them: node obs for states, edge actions, backtrack S<k>."""
    ids = state_ids(items)
    by_node = {}
    out = []
    for item, sid in zip(items, ids):
        if isinstance(item, Obs):
            by_node[id(item.node)] = sid
            out.append(f"S{sid}")
        elif isinstance(item, Act):
            out.append(item.edge.action)
        else:
            out.append(f"backtrack S{by_node[id(item.target)]}")
    return out


def test_worked_example_traversals_and_sequence():
    tree, record, _ = worked_example()
    e = {x.action: x.edge_id for x in tree.edges}
    assert select_traversals(tree) == [[e["A"]], [e["A"], e["C"]], [e["B"]]]  # sim 4 dropped
    items = flatten_episode(record, {0: tree})
    # S0 -> A -> S1 -> C -> S2 -> backtrack S0 -> S0 -> B -> S3, final observation dropped
    assert describe(items) == ["S0", "A", "S1", "C", "S2", "backtrack S0", "S0", "B"]
    back = [x for x in items if isinstance(x, Back)]
    assert len(back) == 1 and back[0].n == 2 and back[0].target is tree.root
    assert [x.node.obs for x in items if isinstance(x, Obs)] == ["<o0>", "<s1>", "<s3>", "<o0>"]
    assert count_actions(items) == 4


def test_worked_example_turns_and_last_sample_exactly():
    tree, record, task = worked_example()
    env = TreeEnv()
    items = flatten_episode(record, {0: tree})
    chat = teacher_force(env, task, el_turns(items), "el", root=tree.root)
    turn1 = raw("A")                                                   # o_0: no assessment
    turn2 = ("Assessment: <judge rationale on s1> (progress estimate: 0.20)\n\n" + raw("C"))
    turn3 = ("Assessment: <judge rationale on s3> (progress estimate: 0.10)\n\n"
             + BACKTRACK_TURN + "\n\nNext action: ```backtrack S0```")
    turn4 = raw("B")                                                   # S0 has no evaluation
    assert chat.valid == [True] * 4 and chat.mismatches == 0
    samples, dropped = make_samples(chat)
    assert len(samples) == 4 and dropped == {"invalid_target": 0, "mentions_reflections": 0}
    last = samples[-1]
    fresh = TreeEnv()
    fresh.reset(task)
    assert last.messages == [
        {"role": "system", "content": system_prompt(fresh, "el")},
        {"role": "user", "content": "TASK: <g>\n[S0] OBSERVATION:\n<o0>\nPREVIOUS ACTION: none"},
        {"role": "assistant", "content": turn1, "weight": 0},
        {"role": "user", "content": "[S1] OBSERVATION:\n<s1>\nPREVIOUS ACTION: <canonical A>"},
        {"role": "assistant", "content": turn2, "weight": 0},
        {"role": "user", "content": "[S2] OBSERVATION:\n<s3>\nPREVIOUS ACTION: <canonical C>"},
        {"role": "assistant", "content": turn3, "weight": 0},
        {"role": "user", "content": "[S0] You returned to an earlier state.\nOBSERVATION:\n"
                                    "<o0>\nPREVIOUS ACTION: backtrack S0"},
        {"role": "assistant", "content": turn4, "weight": 1}]
    assert (last.turn_index, last.n_backtracks) == (3, 1)
    # the other samples are prefixes, weight on their last turn only
    for k, s in enumerate(samples):
        weights = [m["weight"] for m in s.messages if m["role"] == "assistant"]
        assert weights == [0] * k + [1]


def test_worked_example_il_is_the_executed_action_only():
    tree, record, _ = worked_example()
    out = export_episode(record, {0: tree}, TreeEnv)
    assert len(out.el) == 4 and out.el_actions == 4
    assert len(out.il) == 1
    il = out.il[0].messages
    assert [m["role"] for m in il] == ["system", "user", "assistant"]
    assert il[-1] == {"role": "assistant", "content": raw("B"), "weight": 1}
    assert "backtrack" not in il[0]["content"]


def test_step_boundary_assessment_comes_from_previous_tree():
    """Step t >= 1 starts at the real state reached at t-1; its turns carry V from that tree."""
    tree0, _, _ = worked_example()
    tree1 = Tree.with_root("<s2>")
    g = tree1.new_edge(tree1.root, "G", "G", raw=raw("G"), prior=1.0)
    s = tree1.new_node(tree1.root, g, obs="<s4>")
    s.value = 0.9
    tree1.traversals, tree1.decision_kind, tree1.decision_edges = [[0]], "single", [0]
    _, record, task = worked_example()
    task = Task("toy-tree", {**task.params, "goal": "BG"}, id="ex2")
    record = {**record, "task": task.to_dict(), "actions": ["B", "G"],
              "steps": record["steps"] + [{"action": "G", "valid": True, "obs": "<s4>",
                                           "raw": raw("G")}]}
    items = flatten_episode(record, {0: tree0, 1: tree1})
    assert describe(items) == ["S0", "A", "S1", "C", "S2", "backtrack S0", "S0", "B", "S3", "G"]
    turns = el_turns(items)
    assert turns[-1].text.startswith("Assessment: <judge rationale on s2> "
                                     "(progress estimate: 0.60)\n\n")


def test_backtrack_to_a_boundary_state_uses_its_id():
    """A backtrack in step 1 to step 1's root targets the real state S<k> of step 0's child."""
    tree0, record, task = worked_example()
    tree1 = Tree.with_root("<s2>")
    g = tree1.new_edge(tree1.root, "G", "G", raw=raw("G"), prior=0.8)
    h = tree1.new_edge(tree1.root, "H", "H", raw=raw("H"), prior=0.2)
    for e, obs in ((g, "<s4>"), (h, "<s6>")):
        tree1.new_node(tree1.root, e, obs=obs).value = 0.3
    tree1.traversals = [[0], [1]]
    tree1.decision_kind, tree1.decision_edges = "single", [1]
    task = Task("toy-tree", {**task.params, "goal": "BH"}, id="ex3")
    record = {**record, "task": task.to_dict(), "actions": ["B", "H"],
              "steps": record["steps"] + [{"action": "H", "valid": True, "obs": "<s6>"}]}
    items = flatten_episode(record, {0: tree0, 1: tree1})
    assert describe(items) == ["S0", "A", "S1", "C", "S2", "backtrack S0", "S0", "B",
                               "S3", "G", "S4", "backtrack S3", "S3", "H"]
    chat = teacher_force(TreeEnv(), task, el_turns(items), root=tree0.root)
    assert chat.valid == [True] * 7
    assert "```backtrack S3```" in chat.messages[-3]["content"]


def test_stop_in_traversal_is_deleted_and_backtrack_counts_right():
    """Appendix C 7: a traversal ending in STOP, then another branch: no STOP turn."""
    tree = Tree.with_root("<o0>")
    a = tree.new_edge(tree.root, "A", "A", raw=raw("A"), prior=0.5)
    b = tree.new_edge(tree.root, "B", "B", raw=raw("B"), prior=0.5)
    s1 = tree.new_node(tree.root, a, obs="<s1>")
    stop = tree.new_edge(s1, "STOP", "STOP", raw=raw("STOP"), prior=1.0, is_stop=True)
    t = tree.new_node(s1, stop)
    t.terminal, t.value = True, 0.0
    tree.new_node(tree.root, b, obs="<s2>").value = 0.6
    tree.traversals = [[a.edge_id], [a.edge_id, stop.edge_id], [b.edge_id]]
    tree.decision_kind, tree.decision_edges = "single", [b.edge_id]
    items = flatten_step(tree, select_traversals(tree))
    assert describe(items) == ["S0", "A", "S1", "backtrack S0", "S0", "B", "S2"]
    assert [x.n for x in items if isinstance(x, Back)] == [1]  # STOP is not undone
    assert not any(isinstance(x, Act) and x.edge.is_stop for x in items)


def test_final_stop_is_kept():
    tree = Tree.with_root("<o0>")
    stop = tree.new_edge(tree.root, "STOP", "STOP", raw=raw("STOP"), prior=1.0, is_stop=True)
    tree.new_node(tree.root, stop).terminal = True
    tree.traversals, tree.decision_kind, tree.decision_edges = [[0]], "single", [0]
    record = {"actions": ["STOP"], "steps": [{"action": "STOP", "valid": True, "obs": "<o0>"}]}
    items = flatten_episode(record, {0: tree})
    assert describe(items) == ["S0", "STOP"]


def test_committed_path_keeps_traversals_up_to_the_path():
    """Decision kind "path" (docs/methods/mcts.md#value-one-paths): the last kept traversal is the committed path."""
    tree, record, task = worked_example()
    e = {x.action: x.edge_id for x in tree.edges}
    tree.decision_kind, tree.decision_edges = "path", [e["B"], e["G"]]
    task = Task("toy-tree", {**task.params, "goal": "BG"}, id="p")
    record = {**record, "task": task.to_dict(), "actions": ["B", "G"],
              "steps": record["steps"] + [{"action": "G", "valid": True, "obs": "<s4>"}]}
    assert select_traversals(tree)[-1] == [e["B"], e["G"]]
    items = flatten_episode(record, {0: tree})
    assert describe(items) == ["S0", "A", "S1", "C", "S2", "backtrack S0", "S0", "B", "S3", "G"]


def test_trees_must_match_the_executed_trajectory():
    tree, record, _ = worked_example()
    with pytest.raises(FlattenError, match="executed 'A'"):
        flatten_episode({**record, "actions": ["A"]}, {0: tree})
    with pytest.raises(FlattenError, match="step 1 has no search tree"):
        flatten_episode({**record, "actions": ["B", "G"]}, {0: tree})
    bad = {**record, "steps": [{**record["steps"][0], "obs": "<other>"}]}
    with pytest.raises(FlattenError, match="simulated observation differs"):
        flatten_episode(bad, {0: tree})


def test_no_backtrack_env_gets_no_backtrack_turns():
    tree, record, task = worked_example()
    items = flatten_episode(record, {0: tree}, backtrack=False)
    assert not any(isinstance(x, Back) for x in items)
    assert [x.edge.action for x in items if isinstance(x, Act)] == ["A", "C", "B"]
    task = Task("toy-tree-nobt", {**task.params, "obs": {**task.params["obs"], "ACB": "<q>"},
                                  "goal": "ACB"}, id="nb")
    out = export_episode({**record, "task": task.to_dict()}, {0: tree}, NoBacktrackTreeEnv)
    assert out.el_skipped is None
    assert all("backtrack" not in m["content"] for s in out.el for m in s.messages)
    assert "backtrack" not in out.el[0].messages[0]["content"]  # not offered in the prompt


def test_no_backtrack_env_issues_each_action_once():
    tree, _, _ = worked_example()
    e = {x.action: x.edge_id for x in tree.edges}
    d = tree.new_node(tree.edges[e["D"]].parent, tree.edges[e["D"]], obs="<s5>")
    d.value = 0.3
    travs = [[e["A"]], [e["A"], e["C"]], [e["B"]], [e["A"], e["D"]]]
    items = flatten_step(tree, travs, backtrack=False)
    assert [x.edge.action for x in items if isinstance(x, Act)] == ["A", "C", "B", "D"]
    assert not any(isinstance(x, Back) for x in items)


def test_assessment_text_signed_scale_and_heuristic_completions():
    tree, _, _ = worked_example()
    s3 = tree.edges[[x.action for x in tree.edges].index("C")].child
    obs = Obs(s3, 0, scale="signed")
    s3.value = -0.2                      # signed D; shown on the unit scale as 0.40
    s3.value_record = {"samples": [["E", "Thoughts: off\n track\nSTATUS CODE: E"],
                                   ["D", "Thoughts: unsure\nSTATUS CODE: D"]]}
    assert assessment(obs) == "Assessment: unsure (progress estimate: 0.40)"
    assert assessment(obs, "number") == "Assessment: (progress estimate: 0.40)"
    assert assessment(obs, "text") == "Assessment: unsure"
    s3.value_record = {"v": -0.2, "kind": "heuristic", "samples": []}
    assert assessment(obs) == "Assessment: (progress estimate: 0.40)"
    assert assessment(Obs(tree.root, 0)) is None         # o_0 has no evaluation
    # a heuristic policy records the bare action: the turn gets the answer line
    assert completion_text("down", "down") == "Next action: ```down```"
    assert completion_text("think\nNext action: ```down```", "down").startswith("think")


def test_length_filter_counts_forward_and_backtrack_turns():
    tree, record, _ = worked_example()
    out = export_episode(record, {0: tree}, TreeEnv, options=ExportOptions(el_max_actions=3))
    assert out.el == [] and "too long (4 actions > el_max_actions 3)" in out.el_skipped
    assert len(out.il) == 1  # IL does not depend on the EL length


def test_il_turns_are_the_executed_completions_in_order():
    record = {"steps": [{"action": "A", "raw": "why A\nNext action: ```A```"},
                        {"action": "C", "raw": None}]}
    assert [t.text for t in il_turns(record)] == ["why A\nNext action: ```A```",
                                                  "Next action: ```C```"]


def test_full_mode_and_elision():
    tree, record, task = worked_example()
    chat = teacher_force(TreeEnv(), task, el_turns(flatten_episode(record, {0: tree})),
                         root=tree.root)
    (full,), _ = make_samples(chat, mode="full")
    assert [m.get("weight") for m in full.messages if m["role"] == "assistant"] == [1, 1, 1, 1]
    samples, _ = make_samples(chat, window=ChatWindow(keep_first_pairs=1, keep_last_pairs=2))
    last = samples[-1].messages
    # 4 pairs > 1 + 2: the second pair goes, the system turn and the target stay
    assert [m["role"] for m in last] == ["system"] + ["user", "assistant"] * 3
    assert last[2]["content"] == chat.messages[2]["content"]
    assert last[-1]["weight"] == 1 and last[-1]["content"] == chat.messages[-1]["content"]


# --- property: backtracks appear exactly where the traversal changes branch --------------------
@st.composite
def random_search(draw):
    """A random tree (branching <= 3, depth <= 4) and random root-to-node traversals."""
    tree = Tree.with_root("r")
    frontier = [tree.root]
    n_nodes = draw(st.integers(2, 12))
    while len(tree.nodes) < n_nodes:
        parent = frontier[draw(st.integers(0, len(frontier) - 1))]
        if len(parent.edges) >= 3 or parent.depth >= 4:
            frontier.remove(parent)
            if not frontier:
                break
            continue
        letter = "abc"[len(parent.edges)]
        stop = draw(st.booleans()) and draw(st.booleans())
        e = tree.new_edge(parent, letter, letter, is_stop=stop)
        child = tree.new_node(parent, e, obs=f"{parent.obs}{letter}")
        if not stop:
            frontier.append(child)
    leaves = tree.nodes[1:]
    travs = draw(st.lists(st.sampled_from(leaves), min_size=1, max_size=8))
    return tree, [[e.edge_id for e in n.path_edges()] for n in travs]


@settings(max_examples=200, deadline=None)
@given(random_search())
def test_backtracks_exactly_where_the_branch_changes(case):
    tree, travs = case
    travs = [t for i, t in enumerate(travs) if i == 0 or travs[i - 1] != t]  # as docs/methods/exploratory-learning.md#traversals-kept does
    items = flatten_step(tree, travs)
    # walk the items: every Act leaves the current node, every Back goes to an ancestor
    cur = [tree.root]
    leaves = []
    for prev, item in pairwise(items):
        if isinstance(item, Act):
            assert item.edge.parent is cur[-1]
            if item.edge.is_stop:
                leaves.append(item.edge.child)
            else:
                cur.append(item.edge.child)
        elif isinstance(item, Back):
            assert item.target in cur[:-1] and cur.index(item.target) == len(cur) - 1 - item.n
            cur = cur[:cur.index(item.target) + 1]
        elif isinstance(prev, Act):
            assert item.node is cur[-1]
            leaves.append(item.node)
    # the walk reaches every traversal's leaf, in order (consecutive repeats merged)
    expect = []
    for i, t in enumerate(travs):
        leaf = tree.edge(t[-1]).child
        if tree.edge(t[-1]).is_stop and i < len(travs) - 1:
            continue  # a STOP turn in the middle is deleted (docs/methods/exploratory-learning.md#flattening-a-step)
        if not expect or expect[-1] is not leaf:
            expect.append(leaf)
    it = iter(leaves)  # the expected leaves are a subsequence of the states walked through
    assert all(any(x is leaf for x in it) for leaf in expect)
    # a Back is emitted between two traversals iff the next one leaves the current branch
    n_back = sum(isinstance(x, Back) for x in items)
    expected_backs = 0
    path: list[int] = []
    for t in travs:
        if path and tree.edge(path[-1]).is_stop:
            path = path[:-1]
        if path[:len(path)] != t[:-1][:len(path)] or len(path) > len(t) - 1:
            expected_backs += 1
        path = list(t)
    assert n_back == expected_backs
