"""Hindsight paths (docs/methods/exploratory-learning.md#hindsight-paths): the shortcut through
the states an episode visited, its detours, and the EL and IL chats made from them."""

from __future__ import annotations

from clew.agents.distilled import BACKTRACK_TURN
from clew.training.flatten import ExportOptions, export_episode
from clew.training.hindsight import hindsight
from training_toys import GraphEnv, graph_task

# A -r-> B -r-> C (the goal); a dead end X (and Y behind it) below A; a long way B -s-> Z -t-> C
MOVES = {"A": {"r": "B", "d": "X"}, "X": {"u": "A", "d": "Y"}, "Y": {"u": "X"},
         "B": {"r": "C", "s": "Z", "l": "A"}, "Z": {"t": "C"}}


def found(actions, keyed=True):
    env = GraphEnv()
    env.keyed = keyed
    return hindsight(env, graph_task(MOVES), actions)


def test_a_loop_is_cut_and_becomes_a_detour_to_where_the_walk_turned_round():
    h = found(["d", "d", "u", "u", "r", "r"])
    assert h.path == ["r", "r"]
    assert h.detours == {0: [["d", "d"]]}


def test_a_move_tried_in_the_simulator_shortens_the_path_and_a_longer_way_is_no_detour():
    h = found(["r", "s", "t"])
    assert h.path == ["r", "r"]          # B -r-> C was never executed, only simulated
    assert h.detours == {}


def test_walking_back_onto_the_path_is_no_detour():
    h = found(["r", "l", "r", "r"])
    assert h.path == ["r", "r"]
    assert h.detours == {}


def test_invalid_actions_are_dropped_and_an_env_without_state_keys_has_no_shortcut():
    assert found(["q", "r", "r"]).path == ["r", "r"]
    assert found(["d", "u", "r", "r"], keyed=False) is None


def record(actions, raw=lambda a: a):
    return {"key": "toy#0", "task": graph_task(MOVES).to_dict(), "actions": actions,
            "steps": [{"action": a, "raw": raw(a)} for a in actions],
            "outcome": {"success": True, "grade": 1.0}}


def assistant(sample):
    return sample.messages[-1]["content"]


def test_export_imitates_the_shortcut_and_el_backs_out_of_the_detour():
    opts = ExportOptions(el_traversals="detours", il_path="shortcut")
    out = export_episode(record(["d", "d", "u", "u", "r", "r"]), {}, GraphEnv, options=opts)
    assert [assistant(s) for s in out.il] == ["Next action: ```r```"] * 2
    el = [assistant(s) for s in out.el]
    assert el[:2] == ["Next action: ```d```"] * 2
    assert el[2] == f"{BACKTRACK_TURN}\n\nNext action: ```backtrack S0```"
    assert el[3:] == ["Next action: ```r```"] * 2
    assert out.counts["hindsight_shortcuts"] == 1 and out.counts["hindsight_saved_actions"] == 4


def test_without_a_shortcut_both_formats_use_the_executed_path():
    class Unkeyed(GraphEnv):
        keyed = False
    opts = ExportOptions(el_traversals="detours", il_path="shortcut")
    sampled = record(["d", "u", "r", "r"], raw=lambda a: f"I try {a}.\nNext action: ```{a}```")
    out = export_episode(sampled, {}, Unkeyed, options=opts)
    # IL keeps the completions as sampled; EL writes the answer lines of its own turns
    assert [assistant(s) for s in out.il] == [f"I try {a}.\nNext action: ```{a}```"
                                               for a in ["d", "u", "r", "r"]]
    assert [assistant(s) for s in out.el] == [f"Next action: ```{a}```"
                                               for a in ["d", "u", "r", "r"]]
    assert out.counts["hindsight_shortcuts"] == 0


def test_executed_il_is_unchanged_by_default():
    out = export_episode(record(["d", "u", "r", "r"]), {}, GraphEnv)
    assert [assistant(s) for s in out.il] == [f"Next action: ```{a}```"
                                               for a in ["d", "u", "r", "r"]]
    assert out.el_skipped == "no search trees"


# MOVES with, off B, a dead end E (its one move leads back to B) and a one-way room Z
DEAD = {**MOVES, "B": {"r": "C", "s": "Z", "l": "A", "e": "E"}, "E": {"w": "B"}}


def test_dead_ends_next_to_the_shortcut_become_detours_when_asked():
    env = GraphEnv()
    h = hindsight(env, graph_task(DEAD), ["r", "r"], dead_ends=True)
    # X has two moves and Z's one move leads on to C: neither is a dead end
    assert h.path == ["r", "r"] and h.detours == {1: [["e"]]} and h.dead_ends == 1
    assert hindsight(GraphEnv(), graph_task(DEAD), ["r", "r"]).detours == {}
    walked = hindsight(GraphEnv(), graph_task(DEAD), ["r", "e", "w", "r"], dead_ends=True)
    assert walked.detours == {1: [["e"]]} and walked.dead_ends == 0   # walked: given once


def test_a_pit_next_to_the_shortcut_is_a_dead_end_too():
    # P: its one move keeps the walker in it (docs/methods/envs.md#pits); Q: one move that leads
    # on elsewhere is no dead end
    pit = {**MOVES, "B": {"r": "C", "s": "Z", "l": "A", "p": "P", "q": "Q"}, "P": {"o": "P"},
           "Q": {"o": "Z"}}
    h = hindsight(GraphEnv(), graph_task(pit), ["r", "r"], dead_ends=True)
    assert h.detours == {1: [["p"]]} and h.dead_ends == 1


def el(actions, moves, **options):
    """The EL assistant turns of one hindsight export, and its counts."""
    rec = {**record(actions), "task": graph_task(moves).to_dict()}
    opts = ExportOptions(el_traversals="detours", il_path="shortcut", **options)
    out = export_episode(rec, {}, GraphEnv, options=opts)
    return [assistant(s) for s in out.el], out.counts


BACK = f"{BACKTRACK_TURN}\n\nNext action: ```backtrack"


def test_el_enters_a_dead_end_and_backs_out_with_a_bare_backtrack_to_the_state_before():
    turns, counts = el(["r", "r"], DEAD, el_dead_ends=True, el_back_one="bare")
    assert turns == ["Next action: ```r```", "Next action: ```e```", f"{BACK}```",
                     "Next action: ```r```"]
    assert counts["hindsight_dead_ends"] == 1
    assert el(["r", "r"], DEAD, el_dead_ends=True)[0][2] == f"{BACK} S1```"
    # two states back keeps its id
    assert el(["d", "d", "u", "u", "r", "r"], MOVES, el_back_one="bare")[0][2] == f"{BACK} S0```"


def test_moves_a_backtrack_undid_are_context_only_when_asked():
    turns, counts = el(["r", "r"], DEAD, el_dead_ends=True, el_back_one="bare",
                       el_undone="skip")
    assert turns == ["Next action: ```r```", f"{BACK}```", "Next action: ```r```"]
    assert counts["el_undone"] == 1
    # a walked detour of two moves (A -d-> X -d-> Y), left by one backtrack: both moves undone
    turns, counts = el(["d", "d", "u", "u", "r", "r"], MOVES, el_undone="skip")
    assert turns == [f"{BACK} S0```", "Next action: ```r```", "Next action: ```r```"]
    assert counts["el_undone"] == 2
    assert "el_undone" not in el(["r", "r"], DEAD, el_dead_ends=True)[1]
