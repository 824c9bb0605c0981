"""Dark Treasure Rooms suites (docs/methods/envs.md#dark-treasure-rooms).

* ``test`` (unseen): the three frozen layouts per size (``4x4-a`` .. ``7x7-c``), 10 runs each
  (task seed = run index r, docs/methods/metric-optimal-exploitation-gap.md#runs-and-aggregation: "run r uses seed r"), so a size gives 30 runs as in the
  paper's open-model and random-walk cells.
* ``train`` (seen): ten other frozen layouts per size (``4x4-t0`` ..), one run each (seed 0),
  for collecting search data.

Suites, per generator version of the frozen layouts (see :mod:`clew.envs.rooms.generator`):

* version 3 (current): ``rooms-v3`` (all sizes), ``rooms-v3-4x4``, ``rooms-v3-5x5``,
  ``rooms-v3-7x7`` (one size, the task-oriented instruction), ``rooms-v3-7x7-exploit`` and
  ``rooms-v3-7x7-explore`` (7×7 with the soft lower / upper bound instruction,
  docs/methods/envs.md#dark-treasure-rooms);
* version 2 (superseded): ``rooms-v2``, ``rooms-v2-4x4``, ``rooms-v2-5x5``, ``rooms-v2-7x7``,
  ``rooms-v2-7x7-exploit``, ``rooms-v2-7x7-explore``;
* version 1 (superseded, kept so old runs stay comparable): ``rooms-v1``, ``rooms-4x4``,
  ``rooms-5x5``, ``rooms-7x7``, ``rooms-7x7-exploit``, ``rooms-7x7-explore``.

Every task carries its full layout, so a task file is self-contained.
"""

from __future__ import annotations

from clew.envs.base import Task
from clew.envs.family import Suite
from clew.envs.rooms.generator import ID_PREFIX, N_TRAIN, SIZES, TEST_IDS
from clew.envs.rooms.layouts import frozen_layouts

RUNS_PER_LAYOUT = 10
N_EPISODES = 20


def _tasks(layout_ids: list[str], runs: int, split: str, instruction: str) -> list[Task]:
    layouts = frozen_layouts()
    suffix = "" if instruction == "task" else f"-{instruction}"
    return [
        Task("rooms", {"layout": layouts[lid], "n_episodes": N_EPISODES,
                       "instruction": instruction},
             seed=r, id=f"rooms-{lid}{suffix}-r{r}", split=split)
        for lid in layout_ids for r in range(runs)
    ]


def _suite(name: str, sizes: tuple[int, ...], instruction: str = "task",
           version: int = 1) -> Suite:
    pre = ID_PREFIX[version]
    test = [f"{pre}{n}x{n}-{x}" for n in sizes for x in TEST_IDS]
    train = [f"{pre}{n}x{n}-t{i}" for n in sizes for i in range(N_TRAIN)]
    return Suite(
        name, version,
        {"train": _tasks(train, 1, "train", instruction),
         "test": _tasks(test, RUNS_PER_LAYOUT, "test", instruction)},
        f"Dark Treasure Rooms {'/'.join(f'{n}x{n}' for n in sizes)}, {N_EPISODES} episodes "
        f"per run, instruction '{instruction}', layouts v{version} (docs/methods/envs.md#dark-treasure-rooms)",
    )


def rooms_v1() -> Suite:
    return _suite("rooms-v1", SIZES)


def rooms_4x4() -> Suite:
    return _suite("rooms-4x4", (4,))


def rooms_5x5() -> Suite:
    return _suite("rooms-5x5", (5,))


def rooms_7x7() -> Suite:
    return _suite("rooms-7x7", (7,))


def rooms_7x7_exploit() -> Suite:
    return _suite("rooms-7x7-exploit", (7,), "exploit")


def rooms_7x7_explore() -> Suite:
    return _suite("rooms-7x7-explore", (7,), "explore")


def rooms_v2() -> Suite:
    return _suite("rooms-v2", SIZES, version=2)


def rooms_v2_4x4() -> Suite:
    return _suite("rooms-v2-4x4", (4,), version=2)


def rooms_v2_5x5() -> Suite:
    return _suite("rooms-v2-5x5", (5,), version=2)


def rooms_v2_7x7() -> Suite:
    return _suite("rooms-v2-7x7", (7,), version=2)


def rooms_v2_7x7_exploit() -> Suite:
    return _suite("rooms-v2-7x7-exploit", (7,), "exploit", version=2)


def rooms_v2_7x7_explore() -> Suite:
    return _suite("rooms-v2-7x7-explore", (7,), "explore", version=2)


def rooms_v3() -> Suite:
    return _suite("rooms-v3", SIZES, version=3)


def rooms_v3_4x4() -> Suite:
    return _suite("rooms-v3-4x4", (4,), version=3)


def rooms_v3_5x5() -> Suite:
    return _suite("rooms-v3-5x5", (5,), version=3)


def rooms_v3_7x7() -> Suite:
    return _suite("rooms-v3-7x7", (7,), version=3)


def rooms_v3_7x7_exploit() -> Suite:
    return _suite("rooms-v3-7x7-exploit", (7,), "exploit", version=3)


def rooms_v3_7x7_explore() -> Suite:
    return _suite("rooms-v3-7x7-explore", (7,), "explore", version=3)
