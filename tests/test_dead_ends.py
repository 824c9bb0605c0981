"""The counting of benchmarks/dead_ends.py (docs/results.md#round-9-dead-ends-and-the-bare-backtrack):
dead-end turns, backtracks and how far they go back, on scripted grid-map episode records."""

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def dead(load_benchmark):
    return load_benchmark("dead_ends")


def obs(text: str, legal: str) -> str:
    return f"OBSERVATION: Position [0, 0]. {text} Legal moves: {legal}. Steps used: 1."


def step(action, text, legal="up, down", backtrack=None):
    info = {"backtrack": backtrack} if backtrack is not None else {}
    return {"action": action, "valid": True, "obs": obs(text, legal), "info": info}


def test_the_dead_end_phrases_are_the_grid_maps_own(dead):
    source = (Path(__file__).resolve().parents[1] / "envs" / "gridmap" / "env.py").read_text()
    assert all(phrase in source for phrase in dead.NOT_ACTIVATED_NOW)
    assert dead.is_dead_end(obs("State AB12 is here; still not activated; it needs CD34.", "up"))
    assert not dead.is_dead_end(obs("You found state AB12; it is now activated.", "up"))
    assert not dead.is_dead_end(obs("State AB12 is here; it is already activated.", "up, left"))


def test_dead_end_turns_backtracks_and_what_they_undo(dead):
    record = {"outcome": {"success": False}, "steps": [
        step("up", "You found state A; it is now activated."),              # S1
        step("up", "Nothing is here."),                                      # S2
        step("left", "You found state B; it is not activated. To activate it you need C.",
             legal="right"),                                                 # S3, a dead end
        step("backtrack S2", "You backtracked to state S2.", backtrack=2),   # one back
        step("down", "Nothing is here."),                                    # S4
        step("backtrack S0", "You backtracked to state S0.", backtrack=0),   # undoes A
    ]}
    c = dead.episode_stats(record)
    assert (c["dead_end_turns"], c["dead_end_backtracks"], c["backtracks"]) == (1, 1, 2)
    assert (c["back_1"], c["back_3"], c["undid_activation"]) == (1, 1, 1)
    s = dead.summary("toy", c + dead.episode_stats({"outcome": {"success": True}, "steps": []}))
    assert s["episodes"] == 2 and s["success"] == 0.5 and s["episodes_with_backtrack"] == 1
    assert s["states_back"] == {"1": 1, "3": 1}


def test_pit_turns_and_the_backtracks_out_of_them(dead):
    record = {"outcome": {"success": False}, "steps": [
        step("up", "You fell into a pit; no move gets you out of it.", legal="down"),
        step("down", "You are in a pit; your move did not get you out of it.", legal="down"),
        step("backtrack", "You backtracked to state S0.", backtrack=0),
        step("up", "You fell into a pit; no move gets you out of it.", legal="down"),
    ]}
    counts = dead.episode_stats(record)
    # the last turn is not one a decision followed: two pit turns, one left by a backtrack
    assert (counts["pit_entries"], counts["pit_turns"], counts["pit_backtracks"]) == (2, 2, 1)
    assert counts["dead_end_turns"] == 0
