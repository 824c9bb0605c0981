"""Task generator and frozen-layout builder for Dark Treasure Rooms (spec_001 §2.2).

``generate_task(params, seed)`` is a pure function: ``random.Random(seed)`` drives every draw.
A drawn layout is kept only if

* R^max > 0 (spec §2.2), and
* the systematic frontier explorer (:mod:`.explorer`) reaches exploration gap 0 within the
  run's episodes (spec §5, "if it cannot, the layout is too hard for its budget and should be
  rejected"); ``check_explorable=False`` turns this off.

Otherwise the next layout is drawn from the same generator (still a function of the seed).

Params (all optional): ``size`` (4), ``n_balls`` (5), ``connectivity``
(``minigrid_connect_all`` | ``tree``), ``start`` (``random`` | ``corner``), ``extra_door_prob``
(0), ``door_budget_slack`` (0), ``check_explorable`` (true), plus the env's task params
``n_episodes`` (20), ``instruction`` (``task``), ``call_cap_extra`` (10), ``end_when_stuck``
(true). ``layout_id`` instead takes a frozen layout from ``layouts.json``.

The frozen layouts: three test layouts per size (``4x4-a`` .. ``7x7-c``, seeds 1000·n + i,
the paper's 3 layouts per size, spec §2.1) and ten train layouts per size (``4x4-t0`` ..,
seeds 1000·n + 100 + i). Rebuild with ``python -m clew.envs.rooms.generator``; a test checks
the file still equals what the seeds give.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from clew.envs.base import Task
from clew.envs.rooms.layouts import LAYOUTS_FILE, Layout, frozen_layout, random_layout

LAYOUT_PARAMS = ("size", "n_balls", "connectivity", "start", "extra_door_prob",
                 "door_budget_slack")
ENV_PARAMS = ("n_episodes", "instruction", "call_cap_extra", "end_when_stuck")
SIZES = (4, 5, 7)
TEST_IDS = ("a", "b", "c")
N_TRAIN = 10
MAX_ATTEMPTS = 100


def explorer_closes_gap(layout: Layout, n_episodes: int = 20) -> bool:
    """Does the frontier explorer know an optimal route after ``n_episodes`` episodes?"""
    from clew.envs.rooms.env import RoomsEnv
    from clew.envs.rooms.explorer import frontier_action
    from clew.envs.rooms.solver import exploit_value, known_model, layout_best_route

    env = RoomsEnv()
    env.reset(Task("rooms", {"layout": layout_dict(layout), "n_episodes": n_episodes}))
    while not env.done:
        env.step(frontier_action(env))
    return exploit_value(layout, known_model(env.state.moves)) == layout_best_route(layout).value


def layout_dict(layout: Layout) -> dict[str, Any]:
    """JSON form without the derived fields (cheap, for tasks built on the fly)."""
    return {
        "id": layout.id, "size": layout.size, "start": layout.start,
        "door_budget": layout.door_budget, "max_pickups": layout.max_pickups,
        "doors": [{"name": d.name, "rooms": list(d.rooms)} for d in layout.doors],
        "balls": [{"name": b.name, "room": b.room, "reward": b.reward} for b in layout.balls],
        "meta": dict(layout.meta),
    }


def make_layout(size: int, seed: int, *, layout_id: str = "", check_explorable: bool = True,
                n_episodes: int = 20, **options: Any) -> Layout:
    """The first acceptable layout drawn from ``Random(seed)``."""
    from clew.envs.rooms.solver import layout_best_route

    rng = random.Random(seed)
    for attempt in range(MAX_ATTEMPTS):
        layout = random_layout(size, rng, **options)
        if layout_best_route(layout).value <= 0:
            continue
        if check_explorable and not explorer_closes_gap(layout, n_episodes):
            continue
        meta = {"seed": seed, "attempt": attempt,
                "connectivity": options.get("connectivity", "minigrid_connect_all"),
                "n_balls": options.get("n_balls", 5)}
        return Layout(layout.size, layout.start, layout.doors, layout.balls,
                      layout.door_budget, layout.max_pickups, layout_id, meta)
    raise ValueError(f"rooms: no acceptable {size}x{size} layout in {MAX_ATTEMPTS} draws "
                     f"from seed {seed} (options {options}); raise door_budget_slack?")


def generate_task(params: dict[str, Any], seed: int) -> Task:
    """A rooms task: a frozen layout (``layout_id``) or a fresh one drawn from ``seed``."""
    known = {*LAYOUT_PARAMS, *ENV_PARAMS, "layout_id", "check_explorable"}
    unknown = set(params) - known
    if unknown:
        raise ValueError(f"rooms generator: unknown param(s) {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(sorted(known))}")
    env_params = {k: params[k] for k in ENV_PARAMS if k in params}
    if "layout_id" in params:
        layout = frozen_layout(str(params["layout_id"]))
        task_id = f"rooms-{layout.id}"
    else:
        options = {k: params[k] for k in LAYOUT_PARAMS if k in params and k != "size"}
        size = int(params.get("size", 4))
        task_id = f"rooms-{size}x{size}-s{seed}"
        layout = make_layout(size, seed, layout_id=task_id,
                             check_explorable=bool(params.get("check_explorable", True)),
                             n_episodes=int(params.get("n_episodes", 20)), **options)
    return Task("rooms", {"layout": layout.to_dict(), **env_params}, seed=seed, id=task_id)


def frozen_specs() -> list[tuple[str, int, int]]:
    """(layout id, size, seed) of every frozen layout."""
    specs = []
    for n in SIZES:
        specs += [(f"{n}x{n}-{x}", n, 1000 * n + i) for i, x in enumerate(TEST_IDS)]
        specs += [(f"{n}x{n}-t{i}", n, 1000 * n + 100 + i) for i in range(N_TRAIN)]
    return specs


def build_frozen() -> dict[str, Any]:
    return {
        "version": 1,
        "note": "Dark Treasure Rooms layouts (spec_001 §2.2); built by "
                "`python -m clew.envs.rooms.generator`; never regenerate during experiments.",
        "layouts": [make_layout(n, seed, layout_id=lid).to_dict()
                    for lid, n, seed in frozen_specs()],
    }


def main(argv: list[str] | None = None) -> int:
    data = build_frozen()
    # one layout per line: readable diffs, small file
    rows = ",\n".join(json.dumps(d, sort_keys=True) for d in data["layouts"])
    head = json.dumps({k: v for k, v in data.items() if k != "layouts"}, sort_keys=True)
    text = head[:-1] + ', "layouts": [\n' + rows + "\n]}\n"
    LAYOUTS_FILE.write_text(text)
    print(f"wrote {len(data['layouts'])} layouts to {LAYOUTS_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
