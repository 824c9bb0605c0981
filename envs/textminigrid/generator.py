"""TextMiniGrid tasks: (params, seed) -> Task, with the bot's label (docs/methods/envs.md#textminigrid).

``generate_task`` draws the layout with the docs/methods/envs.md#textminigrid generator for ``reset(seed=seed)``, stores it
in the task's params (so the task file rebuilds the level without any RNG), and runs the BabyAI
bot once to record L* (``oracle_length``), the difficulty level and, when the bot fails, why
(``bot_failure``). ``label=False`` skips the bot.

``paper_tasks`` applies the docs/methods/metric-textminigrid.md#behavioral-difficulty seed rule: seeds 1–5 per configuration; a seed
whose bot run crashes, gives up or needs more than 200 steps is replaced by the next unused seed
(6, 7, ...); rejected seeds are recorded in the task params (``rejected_seeds``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from clew.envs.base import Task
from clew.envs.textminigrid.bot import difficulty, solve_layout
from clew.envs.textminigrid.layout import DENSITIES, LayoutParams, generate_layout

ROOM_LEVELS = (1, 4, 9)
DENSITY_LEVELS = tuple(DENSITIES)  # low, medium, high
CONFIGS = tuple((rooms, density) for rooms in ROOM_LEVELS for density in DENSITY_LEVELS)


def task_id(p: LayoutParams, seed: int) -> str:
    extra = ("" if p.locked_room_prob == 0.5 else f"-p{p.locked_room_prob:g}") + (
        "-u" if p.uniform_placement else "")
    return f"tmg-r{p.rooms}-k{p.objs_per_room}{extra}-s{seed}"


def generate_task(params: dict[str, Any], seed: int) -> Task:
    """A labelled TextMiniGrid task; params: rooms (1/4/9), objs_per_room or density, ..."""
    p = LayoutParams.from_params(params)
    layout = generate_layout(p.rooms_per_side, p.objs_per_room, seed, p.locked_room_prob,
                             p.uniform_placement)
    out: dict[str, Any] = {
        "rooms": p.rooms, "objs_per_room": p.objs_per_room, "density": p.density,
        "locked_room_prob": p.locked_room_prob, "uniform_placement": p.uniform_placement,
        "layout": layout.to_dict(),
    }
    if params.get("label", True):
        run = solve_layout(layout)
        out.update(oracle_length=run.length, difficulty=difficulty(run.length),
                   bot_failure=run.failure)
    return Task("textminigrid", out, seed=int(seed), id=task_id(p, seed),
                split=str(params.get("split", "test")))


def config_tasks(rooms: int, density: str, seeds: range | list[int], count: int,
                 split: str) -> list[Task]:
    """``count`` bot-solvable tasks of one configuration, taking seeds in order (docs/methods/metric-textminigrid.md#behavioral-difficulty rule).

    Every task of the configuration records the seeds that were rejected (``rejected_seeds``).
    """
    tasks: list[Task] = []
    rejected: list[int] = []
    for seed in seeds:
        task = generate_task({"rooms": rooms, "density": density, "split": split}, seed)
        if task.params["oracle_length"] is None:
            rejected.append(seed)
            continue
        tasks.append(task)
        if len(tasks) == count:
            return [replace(t, params={**t.params, "rejected_seeds": rejected}) for t in tasks]
    raise ValueError(f"textminigrid: only {len(tasks)} bot-solvable seeds for rooms={rooms}, "
                     f"density={density} in the range given")


def paper_tasks(per_config: int = 5, first_seed: int = 1, split: str = "test") -> list[Task]:
    """The 45-task set of docs/methods/metric-textminigrid.md#behavioral-difficulty: 9 configurations × 5 seeds, failed seeds replaced."""
    return [t for rooms, density in CONFIGS
            for t in config_tasks(rooms, density, range(first_seed, first_seed + 1000),
                                  per_config, split)]
