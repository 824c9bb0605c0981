"""TextMiniGrid renderers against docs/methods/envs.md#textminigrid's worked examples, rotations and brute force."""

import numpy as np
import pytest
from clew.envs.textminigrid.layout import Layout, Mission, Placed, build_level, generate_layout
from clew.envs.textminigrid.render import (
    AGENT,
    EMPTY,
    cell_of,
    direction_name,
    egocentric_view,
    hybrid_token,
    inventory_text,
    north_up,
    render_level,
    render_sd,
    sc_token,
    view_to_world,
)
from hypothesis import given, settings
from hypothesis import strategies as st

# docs/methods/envs.md#textminigrid / docs/methods/envs.md#textminigrid example: own generator, 2×2 rooms, agent facing East (seed 16, k = 3)
SPEC_SC = """\
WW;PL;WW;WW;WW;XX;XX;
EM;EM;EM;EM;WW;XX;XX;
EA;EM;PK;EM;WW;XX;XX;
II;EM;EM;EM;PD;XX;XX;
YK;EM;EM;EM;WW;XX;XX;
WW;WW;WW;WW;WW;XX;XX;
XX;XX;XX;XX;XX;XX;XX;"""

SPEC_HYBRID = """\
Wall;Purple_Locked_Door;Wall;Wall;Wall;Unseen;Unseen;
Empty;Empty;Empty;Empty;Wall;Unseen;Unseen;
Grey_Ball;Empty;Purple_Key;Empty;Wall;Unseen;Unseen;
Agent;Empty;Empty;Empty;Purple_Closed_Door;Unseen;Unseen;
Yellow_Key;Empty;Empty;Empty;Wall;Unseen;Unseen;
Wall;Wall;Wall;Wall;Wall;Unseen;Unseen;
Unseen;Unseen;Unseen;Unseen;Unseen;Unseen;Unseen;"""

# the paper's Fig. 25, agent facing West
FIG25_SC = """\
XX;XX;XX;XX;WW;BK;GB;
XX;XX;XX;XX;WW;EM;EK;
XX;XX;XX;XX;WW;EM;EM;
XX;XX;XX;XX;WW;EM;II;
XX;XX;XX;XX;WW;WW;WW;
XX;XX;XX;XX;XX;XX;XX;
XX;XX;XX;XX;XX;XX;XX;"""


@pytest.fixture(scope="module")
def spec_level():
    return build_level(generate_layout(2, 3, 16))


def one_room(agent, objects=(), doors=()):
    """A 1-room level; the mission picks up the first object."""
    first = objects[0]
    return build_level(Layout(1, tuple(doors), tuple(objects), agent,
                              Mission("pickup", first.type, first.color)))


def test_symbolic_cell_matches_the_spec_example(spec_level):
    assert direction_name(spec_level.agent_dir) == "East"
    assert render_level(spec_level, "sc") == SPEC_SC


def test_hybrid_matches_the_spec_example(spec_level):
    assert render_level(spec_level, "hybrid") == SPEC_HYBRID


def test_scene_description_matches_the_spec_example(spec_level):
    lines = render_level(spec_level, "sd").splitlines()
    walls = [x for x in lines if x.startswith("You see a wall")]
    assert len(walls) == 12  # "the real output lists all 12 visible wall cells"
    assert lines[:3] == ["You see a wall 3 steps left.", "You see a wall 2 steps right.",
                         "You see a wall 2 steps right and 1 step forward."]
    assert set(walls[3:]) == {
        f"You see a wall {p}." for p in (
            "3 steps left and 2 steps forward", "3 steps left and 3 steps forward",
            "3 steps left and 4 steps forward", "2 steps left and 4 steps forward",
            "1 step left and 4 steps forward", "1 step right and 4 steps forward",
            "2 steps right and 4 steps forward", "2 steps right and 2 steps forward",
            "2 steps right and 3 steps forward")}
    assert lines[12:] == [
        "You see a grey ball 1 step left.",
        "You see a yellow key 1 step right.",
        "You see a locked purple door 3 steps left and 1 step forward.",
        "You see a purple key 1 step left and 2 steps forward.",
        "You see a closed purple door 4 steps forward.",
    ]


def test_fig25_west_facing_example():
    # 1 room, interior x, y in 1..4; agent at (2, 4) facing West: wall 2 ahead, wall 1 to the left
    level = one_room((2, 4, 2), [Placed(1, 1, "key", "blue"), Placed(2, 1, "box", "green"),
                                 Placed(2, 2, "key", "grey")])
    assert render_level(level, "sc") == FIG25_SC


@pytest.mark.parametrize("agent_dir, row, col", [(3, 6, 3), (0, 3, 0), (1, 0, 3), (2, 3, 6)])
def test_agent_position_in_the_north_up_grid(agent_dir, row, col):
    level = one_room((2, 2, agent_dir), [Placed(4, 4, "ball", "red")])
    rows = [r.split(";")[:-1] for r in render_level(level, "sc").splitlines()]
    assert len(rows) == 7 and all(len(r) == 7 for r in rows)
    where = [(r, c) for r in range(7) for c in range(7) if rows[r][c] == "II"]
    assert where == [(row, col)]


def test_rotation_equals_numpy_rot90(spec_level):
    level = spec_level
    view = egocentric_view(level)
    for agent_dir, k in ((3, 0), (0, -1), (1, 2), (2, 1)):  # N, E, S, W
        expected = np.rot90(np.array([[sc_token(c) for c in row] for row in view]), k)
        got = [[sc_token(c) for c in row] for row in north_up(view, agent_dir)]
        assert got == expected.tolist()


def _positions(max_rooms=3):
    return st.tuples(st.integers(1, max_rooms), st.sampled_from([1, 3, 5]), st.integers(0, 10**6),
                     st.lists(st.sampled_from([0, 1, 2]), max_size=25))


def _walk(level, moves):
    for a in moves:
        level.step(a)  # left, right, forward: a random pose
    return level


@settings(max_examples=40, deadline=None)
@given(_positions())
def test_displayed_cell_is_the_world_cell(case):
    """docs/methods/envs.md#textminigrid [V]: displayed (r, c) is world cell (ax + c − c_agent, ay + r − r_agent)."""
    n, k, seed, moves = case
    level = _walk(build_level(generate_layout(n, k, seed)), moves)
    rows = [r.split(";")[:-1] for r in render_level(level, "sc").splitlines()]
    (ra, ca), = [(r, c) for r in range(7) for c in range(7) if rows[r][c] == "II"]
    ax, ay = level.agent_pos
    for r in range(7):
        for c in range(7):
            if rows[r][c] in ("XX", "II"):
                continue
            x, y = ax + c - ca, ay + r - ra
            assert rows[r][c] == sc_token(cell_of(level.grid.get(x, y)))


@settings(max_examples=40, deadline=None)
@given(_positions())
def test_scene_description_sentences_match_world_cells(case):
    n, k, seed, moves = case
    level = _walk(build_level(generate_layout(n, k, seed)), moves)
    view = egocentric_view(level)
    lines = render_sd(view).splitlines()
    expected = 0
    for vy in range(7):
        for vx in range(7):
            cell = view[vy][vx]
            if cell.kind in ("unseen", "empty", "agent"):
                continue
            expected += 1
            world = level.grid.get(*view_to_world(level, vx, vy))
            assert cell_of(world) == cell
    assert len(lines) == expected
    assert all(x.startswith("You see ") and x.endswith(".") for x in lines)
    # walls first, then doors and objects
    kinds = ["wall" if " wall " in x else "thing" for x in lines]
    assert kinds == sorted(kinds, key=lambda s: s != "wall")


def test_sd_grammar_and_empty_view():
    view = [[EMPTY] * 7 for _ in range(7)]
    view[6][3] = AGENT
    assert render_sd(view) == "You see no walls or objects."
    level = one_room((1, 4, 3), [Placed(2, 4, "ball", "purple"), Placed(1, 3, "box", "red")])
    lines = render_level(level, "sd").splitlines()  # facing North at the west wall
    assert "You see a purple ball 1 step right." in lines
    assert "You see a red box 1 step forward." in lines
    assert "You see a wall 1 step left and 2 steps forward." in lines


def test_door_tokens_open_close_and_locked():
    doors = [Placed(5, 2, "door", "green"), Placed(2, 5, "door", "blue", locked=True)]
    layout = Layout(2, tuple(doors), (Placed(8, 8, "ball", "red"),), (4, 2, 0),
                    Mission("pickup", "ball", "red"))
    level = build_level(layout)
    assert render_level(level, "sc").splitlines()[3].split(";")[1] == "GD"
    level.step(5)  # toggle: open
    sc = render_level(level, "sc")
    assert sc.splitlines()[3].split(";")[1] == "__"
    assert "Open_Door" in render_level(level, "hybrid")
    assert "You see an open green door 1 step forward." in render_level(level, "sd")
    level.step(5)  # close again: the original color comes back
    assert render_level(level, "sc").splitlines()[3].split(";")[1] == "GD"
    assert sc_token(cell_of(level.grid.get(2, 5))) == "BL"
    assert hybrid_token(cell_of(level.grid.get(2, 5))) == "Blue_Locked_Door"


def test_agent_token_while_carrying_and_inventory_text():
    level = one_room((2, 2, 0), [Placed(3, 2, "box", "blue")])
    assert inventory_text(level.carrying) == "nothing"
    level.step(3)  # pick up the blue box in front
    assert inventory_text(level.carrying) == "a blue box"
    assert "II" in render_level(level, "sc") and "BB" not in render_level(level, "sc")
    assert "Agent" in render_level(level, "hybrid")


def test_direction_names_follow_minigrid():
    assert [direction_name(d) for d in range(4)] == ["East", "South", "West", "North"]
