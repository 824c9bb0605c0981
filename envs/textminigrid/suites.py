"""TextMiniGrid suites (docs/methods/metric-textminigrid.md#behavioral-difficulty).

* ``textminigrid-45``: the paper's task set, split ``test``: 9 configurations (1/4/9 rooms ×
  low/medium/high density) × seeds 1–5, failed seeds replaced by the next ones (docs/methods/metric-textminigrid.md#behavioral-difficulty rule).
* ``textminigrid-v1``: ``test`` = the same 45 tasks (unseen); ``train`` = 10 tasks per
  configuration from seeds 2000 upwards (seen; disjoint from the test seeds and from the few-shot
  seeds 1000–1099), for search data and distillation.

Building a suite runs the bot once per task (about 1 s for the 45 tasks on one core).
"""

from __future__ import annotations

from clew.envs.family import Suite
from clew.envs.textminigrid.generator import CONFIGS, config_tasks, paper_tasks

TRAIN_FIRST_SEED = 2000
TRAIN_PER_CONFIG = 10


def _train_tasks() -> list:
    return [t for rooms, density in CONFIGS
            for t in config_tasks(rooms, density, range(TRAIN_FIRST_SEED, TRAIN_FIRST_SEED + 1000),
                                  TRAIN_PER_CONFIG, "train")]


def textminigrid_45() -> Suite:
    return Suite("textminigrid-45", 1, {"test": paper_tasks()},
                 "docs/methods/metric-textminigrid.md#behavioral-difficulty: 9 layout configurations × 5 seeds, PickUp missions")


def textminigrid_v1() -> Suite:
    return Suite("textminigrid-v1", 1, {"train": _train_tasks(), "test": paper_tasks()},
                 "TextMiniGrid: train = 10 seeds ≥ 2000 per configuration, test = the 45 paper tasks")
