"""``miniwob-v1``: MiniWoB++ tasks from one click to multi-step forms (docs/web.md).

Sixteen tasks of the MiniWoB++ pages the ``miniwob`` wheel ships, in three groups:

* one step (a single click or focus): ``click-test``, ``click-test-2``, ``click-button``,
  ``click-link``, ``click-dialog``, ``click-dialog-2``, ``click-tab``, ``focus-text-2``,
  ``click-widget``;
* two steps (select, then confirm): ``click-button-sequence``, ``click-option``,
  ``click-collapsible-nodelay``, ``enter-text``;
* multi-step forms (several fields or boxes, then submit): ``click-checkboxes``,
  ``enter-password``, ``login-user``.

Tasks whose pages animate on a timer (the ``-nodelay`` variants exist for this), need mouse
coordinates, drawing or dragging are left out: search replays actions, and a page that depends on
timing would fail the determinism check.

Splits: ``test`` = seeds 0, 1, 2 of every task (48 tasks); ``train`` = seeds 100–109 (160 tasks),
for search data and distillation. Budgets (``max_steps``): 3 for one-step tasks, 6 for two-step
tasks, 10 for forms, about three times the shortest solution.
"""

from __future__ import annotations

from dataclasses import replace

from clew.envs.browsergym.tasks import generate_task
from clew.envs.family import Suite

ONE_STEP = ("click-test", "click-test-2", "click-button", "click-link", "click-dialog",
            "click-dialog-2", "click-tab", "focus-text-2", "click-widget")
TWO_STEP = ("click-button-sequence", "click-option", "click-collapsible-nodelay", "enter-text")
FORMS = ("click-checkboxes", "enter-password", "login-user")
BUDGET = {**{t: 3 for t in ONE_STEP}, **{t: 6 for t in TWO_STEP}, **{t: 10 for t in FORMS}}
GROUP = {**{t: "one-step" for t in ONE_STEP}, **{t: "two-step" for t in TWO_STEP},
         **{t: "form" for t in FORMS}}
TEST_SEEDS = range(3)
TRAIN_SEEDS = range(100, 110)


def _tasks(seeds: range, split: str) -> list:
    return [replace(generate_task({"task": f"miniwob.{name}", "max_steps": BUDGET[name],
                                   "group": GROUP[name]}, seed), split=split)
            for name in BUDGET for seed in seeds]


def miniwob_v1() -> Suite:
    return Suite("miniwob-v1", 1, {"train": _tasks(TRAIN_SEEDS, "train"),
                                   "test": _tasks(TEST_SEEDS, "test")},
                 "MiniWoB++ through BrowserGym, offline: 16 tasks from one click to multi-step "
                 "forms; test = seeds 0-2, train = seeds 100-109")
