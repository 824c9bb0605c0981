"""The ``exploration-v2`` suite (and ``exploration-v1``): four environment families, small,
seen/unseen splits.

Versions differ only in the instance generators they ask for (docs/methods/instances.md); everything below
holds for both. ``exploration-v2`` (current) draws its grid maps with the grid-map generator's
version 2 and its rooms layouts with the rooms generator's version 2 (tree-like layouts, 7
balls at 4×4, the best three reachable; see ``docs/methods/instances.md``); its task ids start
with ``xv2/``. ``exploration-v1`` pins both generators to version 1 and never changes.

The suite the loop uses to collect search data (``train``, seen) and to
evaluate distilled agents (``test``, unseen). It is deliberately small, so that a CPU search on
``train`` and an evaluation on ``test`` fit in the demo: 12 tasks per split, 3 per family.

Every task comes from its family's registered generator; nothing is hand-made. Choices [D]:

* **Seeds.** ``train`` draws from seeds 100.. and ``test`` from seeds 200.., per family and
  configuration (TextMiniGrid skips seeds, see below, but never reaches the other split's range:
  :func:`_seeds` refuses to). Train and test therefore never share an instance. These seeds are
  also outside the ones other suites use for the same parameters (gridmap-v1 0–9, rooms frozen
  layouts 4000+, TextMiniGrid 1–~20, 1000–1099, 2000+).
* **gridmap** (docs/methods/envs.md#grid-map-with-task-dag): (exploration level, DAG level) = (low, easy), (medium, easy),
  (low, medium): maps of 10–16 cells with 4–6 nodes, budget 3·|M|.
* **rooms** (docs/methods/envs.md#dark-treasure-rooms): 4×4 layouts drawn by the generator (its R^max > 0 and
  explorer-closes-the-gap checks included), ``n_episodes = 4`` rooms-episodes per run instead of
  the paper's 20: enough for the gap decomposition to move between episodes, short enough for a
  search.
* **oracle search** (docs/methods/envs.md#oracle-search-tasks): one task per env. HillSearch with the paper's generator defaults
  (k = 3 decoy levels, k' = 4, a narrow needle); TreeSearch with 2 trap and 2 good gateways,
  b = 2 chains each, d_trap = 8, d_good = 4 (49 nodes; traps top out at 8, the good branches at
  13); MaxSatSearch with n = 8 variables (256 assignments), m = 30, a gold clause of 3 literals
  weighing 15. Budget N = 16 queries for all three (the paper's are 36–60).
* **textminigrid** (docs/methods/envs.md#textminigrid): one room (a 4×4 interior), low / medium / high object density,
  PickUp missions whose BabyAI-bot solution is *easy* (L* ≤ 6); seeds whose bot run fails or is
  not easy are skipped, taking the next seed. Default env options (m = 1, 200-step limit).

Task ids are ``xv<version>/<env>/<configuration>/s<seed>`` and unique across both splits. The
grid-map configurations below are low and medium exploration levels, whose maps the two grid-map
generator versions draw alike (the tasks record the version they asked for).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from clew.envs.base import Task
from clew.envs.family import Suite
from clew.envs.gridmap.generator import pits_task
from clew.envs.registry import generate

NAME = "exploration-v{}"
VERSIONS = (1, 2)
FIRST_SEED = {"train": 100, "test": 200}
SEED_SPAN = 100  # a split's seeds stay in [first, first + span)

GRIDMAP = (("low", "easy"), ("medium", "easy"), ("low", "medium"))
ROOMS = {"size": 4, "n_episodes": 4}
ROOMS_TASKS = 3
ORACLE_SEARCH: dict[str, dict[str, Any]] = {
    "hillsearch": {"k": 3, "k_needle": 4, "denominator": "2w", "budget": 16},
    "treesearch": {"r_trap": 2, "r_good": 2, "b": 2, "d_trap": 8, "d_good": 4, "budget": 16},
    "maxsatsearch": {"n": 8, "m": 30, "k_gold": 3, "k_other": 2, "w_gold": 15, "budget": 16},
}
TEXTMINIGRID_DENSITIES = ("low", "medium", "high")
TEXTMINIGRID_LEVEL = "easy"


def _seeds(split: str) -> range:
    first = FIRST_SEED[split]
    return range(first, first + SEED_SPAN)


def _named(task: Task, config: str, split: str, version: int) -> Task:
    return replace(task, id=f"xv{version}/{task.env}/{config}/s{task.seed}", split=split)


def gridmap_tasks(split: str, version: int = 1, per_config: int = 1,
                  seeds: Sequence[int] | None = None) -> list[Task]:
    seeds = _seeds(split) if seeds is None else seeds
    # the generators' default is their current version: every suite version pins its own
    gen = {"generator_version": version}
    return [_named(generate("gridmap", {"exploration_level": level, "dag_level": dag, **gen},
                            seeds[i + k * len(GRIDMAP)]), f"{level}-{dag}", split, version)
            for k in range(per_config) for i, (level, dag) in enumerate(GRIDMAP)]


def rooms_tasks(split: str, version: int = 1, per_config: int = 1) -> list[Task]:
    seeds = _seeds(split)
    params = {**ROOMS, "generator_version": version}
    return [_named(generate("rooms", dict(params), seeds[i]), f"{ROOMS['size']}x{ROOMS['size']}",
                   split, version) for i in range(ROOMS_TASKS * per_config)]


def oracle_search_tasks(split: str, version: int = 1, per_config: int = 1) -> list[Task]:
    seeds = _seeds(split)
    return [_named(generate(env, dict(params), seeds[k]), f"N{params['budget']}", split, version)
            for k in range(per_config) for env, params in ORACLE_SEARCH.items()]


def textminigrid_tasks(split: str, version: int = 1, per_config: int = 1,
                       seeds: Sequence[int] | None = None) -> list[Task]:
    tasks = []
    seeds = _seeds(split) if seeds is None else seeds
    pool = iter(seeds)
    for _ in range(per_config):
        for density in TEXTMINIGRID_DENSITIES:
            for seed in pool:
                task = generate("textminigrid", {"rooms": 1, "density": density}, seed)
                if task.params.get("difficulty") == TEXTMINIGRID_LEVEL:
                    tasks.append(_named(task, f"r1-{density}", split, version))
                    break
            else:
                raise ValueError(f"{NAME.format(version)}: too few {TEXTMINIGRID_LEVEL} 1-room "
                                 f"textminigrid tasks with density {density} among the {split} "
                                 f"seeds {seeds}")
    return tasks


def split_tasks(split: str, version: int = 1, per_config: int = 1) -> list[Task]:
    return (gridmap_tasks(split, version, per_config) + rooms_tasks(split, version, per_config)
            + oracle_search_tasks(split, version, per_config)
            + textminigrid_tasks(split, version, per_config))


def _suite(version: int) -> Suite:
    return Suite(NAME.format(version), version,
                 {split: split_tasks(split, version) for split in ("train", "test")},
                 "all four families, 3 small tasks per family and split; train seeds 100.., "
                 f"test seeds 200..; instance generators v{version} (docs/methods/instances.md)")


#: train tasks per configuration in ``exploration-v1-wide`` (its test split is exploration-v1's)
WIDE = 10


def exploration_v1_wide() -> Suite:
    """``exploration-v1-wide``: exploration-v1 with ten times the train tasks (10 per grid-map,
    rooms, oracle-search and TextMiniGrid configuration, the next seeds of the train range) and
    exploration-v1's test split unchanged: enough search data for a distilled model to learn
    from (docs/methods/loop.md#the-cpu-experiment). Its first train tasks are exploration-v1's
    train tasks except on TextMiniGrid, where configurations interleave."""
    return Suite("exploration-v1-wide", 1,
                 {"train": split_tasks("train", 1, WIDE), "test": split_tasks("test", 1)},
                 f"exploration-v1 with {WIDE}x the train tasks (seeds 100..), the same test split")


def exploration_v1_wide_test() -> Suite:
    """``exploration-v1-wide-test``: exploration-v1's test split with ten times the tasks (10 per
    grid-map, rooms, oracle-search and TextMiniGrid configuration from the test seeds 200..: 30
    a family), and no train split. Three test tasks a family cannot tell two models apart: a
    model's success there is mostly how it does on those three maps or rooms
    (docs/methods/loop.md#the-gate). Its first tasks of each configuration are exploration-v1's
    test tasks. No task is in exploration-v1-wide's or exploration-v1-gridmap-xl's train split;
    one TextMiniGrid task (low density, seed 235) has the layout and mission of one of
    exploration-v1-textminigrid-xl's 180 (seed 3072): one-room layouts are few."""
    return Suite("exploration-v1-wide-test", 1, {"test": split_tasks("test", 1, WIDE)},
                 f"exploration-v1's test split with {WIDE}x the tasks (seeds 200..); no train "
                 "split")


#: grid-map search tasks beyond the train range: seeds 1000.. are outside both splits of every
#: exploration suite and outside gridmap-v1/v2's 0-9
GRIDMAP_XL_FIRST_SEED = 1000
GRIDMAP_XL_PER_CONFIG = 90


def exploration_v1_gridmap_xl() -> Suite:
    """``exploration-v1-gridmap-xl``: 270 grid-map train tasks drawn like exploration-v1's (its
    three configurations, generator v1; seeds 1000..1269), for search data: nine times the 30
    maps of exploration-v1-wide, whose train seed range holds at most 33 per configuration. The
    one-turn grid-map model of docs/methods/loop.md#what-was-tried learned its rule from this
    many maps. Test tasks stay exploration-v1's."""
    seeds = range(GRIDMAP_XL_FIRST_SEED,
                  GRIDMAP_XL_FIRST_SEED + GRIDMAP_XL_PER_CONFIG * len(GRIDMAP))
    return Suite("exploration-v1-gridmap-xl", 1,
                 {"train": gridmap_tasks("train", 1, GRIDMAP_XL_PER_CONFIG, seeds),
                  "test": gridmap_tasks("test", 1)},
                 f"{len(seeds)} grid-map train tasks like exploration-v1's (seeds "
                 f"{seeds[0]}..{seeds[-1]}); exploration-v1's grid-map test split")


def with_pits(tasks: list[Task], keep: bool = True) -> list[Task]:
    """The grid-map tasks of ``tasks`` again as ``gridmap-pits`` tasks (the same maps, each
    with its pits: docs/methods/envs.md#pits; ids end in ``-pits``), after ``tasks`` when
    ``keep``, else alone."""
    pits = [pits_task(t) for t in tasks if t.env == "gridmap"]
    return [*tasks, *pits] if keep else pits


def exploration_v1_gridmap_pits_xl() -> Suite:
    """``exploration-v1-gridmap-pits-xl``: exploration-v1-gridmap-xl's 270 train maps and
    exploration-v1-wide-test's 30 grid-map test maps, as ``gridmap-pits`` tasks."""
    return Suite("exploration-v1-gridmap-pits-xl", 1,
                 {"train": with_pits(exploration_v1_gridmap_xl().splits["train"], keep=False),
                  "test": with_pits(exploration_v1_wide_test().splits["test"], keep=False)},
                 "exploration-v1-gridmap-xl's train maps and exploration-v1-wide-test's grid "
                 "maps, with pits")


def exploration_v1_wide_pits() -> Suite:
    """``exploration-v1-wide-pits``: exploration-v1-wide, and its grid maps again with pits."""
    wide = exploration_v1_wide()
    return Suite("exploration-v1-wide-pits", 1,
                 {split: with_pits(tasks) for split, tasks in wide.splits.items()},
                 "exploration-v1-wide, and its grid maps again as gridmap-pits tasks")


def exploration_v1_wide_test_pits() -> Suite:
    """``exploration-v1-wide-test-pits``: exploration-v1-wide-test, and its 30 grid maps again
    with pits."""
    return Suite("exploration-v1-wide-test-pits", 1,
                 {"test": with_pits(exploration_v1_wide_test().splits["test"])},
                 "exploration-v1-wide-test, and its grid maps again as gridmap-pits tasks")


#: TextMiniGrid search tasks from seeds 3000..: outside both splits, the few-shot examples'
#: 1000-1099 and textminigrid-v1's train seeds 2000..
TEXTMINIGRID_XL_PER_CONFIG = 60
TEXTMINIGRID_XL_SEEDS = range(3000, 5000)


def exploration_v1_textminigrid_xl() -> Suite:
    """``exploration-v1-textminigrid-xl``: 180 TextMiniGrid train tasks drawn like
    exploration-v1's (one room, low / medium / high density, easy missions; the first fitting
    seeds from 3000, configurations interleaved), for search data: six times the 30 of
    exploration-v1-wide. Test tasks stay exploration-v1's."""
    tasks = textminigrid_tasks("train", 1, TEXTMINIGRID_XL_PER_CONFIG, TEXTMINIGRID_XL_SEEDS)
    return Suite("exploration-v1-textminigrid-xl", 1,
                 {"train": tasks, "test": textminigrid_tasks("test", 1)},
                 f"{len(tasks)} TextMiniGrid train tasks like exploration-v1's (seeds "
                 f"{tasks[0].seed}..{tasks[-1].seed}); exploration-v1's TextMiniGrid test split")


def exploration_v1() -> Suite:
    """Version 1 (registered as ``exploration-v1``): generators pinned to version 1."""
    return _suite(1)


def exploration_v2() -> Suite:
    """Version 2 (registered as ``exploration-v2``): grid-map and rooms generators v2."""
    return _suite(2)
