"""TextMiniGrid layout generator (docs/methods/envs.md#textminigrid) and the BabyAI bot oracle (docs/methods/metric-textminigrid.md#behavioral-difficulty)."""

import json
from collections import Counter

import pytest
from clew.envs.textminigrid.bot import difficulty, run_bot, solve_layout
from clew.envs.textminigrid.layout import (
    GeneratedLevel,
    Layout,
    LayoutParams,
    Placed,
    build_level,
    extract_layout,
    generate_layout,
)
from minigrid.utils import baby_ai_bot

CASES = [(n, k, seed) for n in (1, 2, 3) for k in (1, 3, 5) for seed in (1, 2, 7)]


def room_of(x, y):
    return x // 5, y // 5


@pytest.mark.parametrize("n,k,seed", CASES)
def test_generated_layout_invariants(n, k, seed):
    lay = generate_layout(n, k, seed)
    assert lay.width == 5 * n + 1  # 6×6, 11×11, 16×16 (A1)
    # exactly k objects per room, the locked door's key included (A4)
    per_room = Counter(room_of(o.x, o.y) for o in lay.objects)
    assert per_room == Counter({(i, j): k for i in range(n) for j in range(n)})
    # the target is unique by (type, color) over the whole level and is not a door
    kinds = Counter((o.type, o.color) for o in lay.objects)
    assert lay.mission.kind == "pickup" and lay.mission.type in ("key", "ball", "box")
    assert kinds[(lay.mission.type, lay.mission.color)] == 1
    locked = [d for d in lay.doors if d.locked]
    assert len(locked) <= 1 and (n > 1 or not lay.doors)
    for door in locked:  # the key exists, and the target key never opens the locked door
        assert kinds[("key", door.color)] >= 1
        assert not (lay.mission.type == "key" and lay.mission.color == door.color)
    level = build_level(lay)
    front = level.grid.get(*level.front_pos)
    assert front is None or front.type == "wall"  # BabyAI re-samples until this holds
    assert level.mission == f"pick up the {lay.mission.color} {lay.mission.type}"


def test_generation_is_deterministic_per_seed():
    assert generate_layout(3, 5, 11) == generate_layout(3, 5, 11)
    assert len({generate_layout(2, 3, s) for s in range(1, 11)}) == 10


@pytest.mark.parametrize("n,k,seed", CASES[::4])
def test_layout_rebuild_equals_the_generated_level(n, k, seed):
    gen = GeneratedLevel(n, k)
    gen.reset(seed=seed)
    lay = extract_layout(gen)
    again = Layout.from_dict(json.loads(json.dumps(lay.to_dict())))
    assert again == lay
    built = build_level(again)
    assert (built.grid.encode() == gen.grid.encode()).all()
    assert tuple(built.agent_pos) == tuple(gen.agent_pos) and built.agent_dir == gen.agent_dir
    assert built.mission == gen.mission


def test_babyai_placement_quirk_and_uniform_flag():
    """A29: with 1 room, objects never land on the cross around RoomGrid's dummy centre (3, 3)."""
    cross = {(3, 3), (2, 3), (4, 3), (3, 2), (3, 4)}
    cells = {(o.x, o.y) for s in range(60) for o in generate_layout(1, 5, s).objects}
    assert not cells & cross
    uniform = {(o.x, o.y) for s in range(60)
               for o in generate_layout(1, 5, s, uniform_placement=True).objects}
    assert uniform & cross


def test_bad_layouts_and_params_are_named():
    lay = generate_layout(2, 3, 1)
    data = lay.to_dict()
    data["objects"][0]["x"] = 0  # onto the outer wall
    with pytest.raises(ValueError, match="not an object in a room interior"):
        Layout.from_dict(data)
    data = lay.to_dict()
    data["mission"]["color"] = "red" if lay.mission.color != "red" else "blue"
    data["mission"]["type"] = "ball"
    data["objects"] = [o for o in data["objects"]
                       if (o["type"], o["color"]) != ("ball", data["mission"]["color"])]
    with pytest.raises(ValueError, match="mission names"):
        Layout.from_dict(data)
    with pytest.raises(ValueError, match="malformed"):
        Layout.from_dict({"rooms_per_side": 1})
    with pytest.raises(ValueError, match="'rooms' must be 1, 4 or 9"):
        LayoutParams.from_params({"rooms": 3})
    with pytest.raises(ValueError, match="'density'"):
        LayoutParams.from_params({"density": "dense"})
    assert LayoutParams.from_params({"rooms": 9, "density": "high"}).objs_per_room == 5
    with pytest.raises(ValueError, match="two items"):
        Layout(1, (), (Placed(1, 1, "ball", "red"), Placed(1, 1, "key", "red")), (2, 2, 0),
               lay.mission).validate()


# --- the bot -----------------------------------------------------------------------------------
@pytest.mark.parametrize("length, level", [
    (1, "easy"), (6, "easy"), (7, "medium"), (13, "medium"), (14, "hard"), (45, "hard"),
    (46, "super-hard"), (199, "super-hard"), (None, None)])
def test_difficulty_thresholds(length, level):
    assert difficulty(length) == level


def test_bot_solutions_replay_to_success_in_exactly_l_star_steps():
    solved = 0
    for n, k, seed in CASES:
        lay = generate_layout(n, k, seed)
        run = solve_layout(lay)
        assert run.success == (run.failure is None)
        if not run.success:
            continue
        solved += 1
        level = build_level(lay)
        ids = {"Turn Left": 0, "Turn Right": 1, "Go Forward": 2, "Pick Up": 3, "Drop": 4,
               "Toggle": 5}
        for i, name in enumerate(run.actions):
            _, reward, terminated, _, _ = level.step(ids[name])
            assert terminated == (i == len(run.actions) - 1)
        assert reward > 0 and run.length == len(run.actions)
    assert solved >= len(CASES) - 2


def test_bot_failures_are_recorded_not_raised(monkeypatch):
    lay = generate_layout(3, 5, 1)
    assert run_bot(build_level(lay), max_steps=2).failure == "step limit"

    def broken(self, action_taken=None):
        raise AssertionError("planner confused")

    monkeypatch.setattr(baby_ai_bot.BabyAIBot, "replan", broken)
    run = solve_layout(lay)
    assert not run.success and run.length is None
    assert run.failure.startswith("exception: AssertionError")


def test_run_bot_leaves_the_level_untouched():
    level = build_level(generate_layout(2, 3, 4))
    before = level.grid.encode().copy(), tuple(level.agent_pos), level.agent_dir
    assert run_bot(level).actions
    assert (level.grid.encode() == before[0]).all()
    assert (tuple(level.agent_pos), level.agent_dir) == before[1:]
