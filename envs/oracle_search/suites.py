"""Suites of HillSearch / TreeSearch / MaxSatSearch tasks (docs/methods/envs.md#oracle-search-tasks).

A task is one (instance, budget N) pair; repeated episodes of a task come from the runner's
repeats (the instance is static, the agent's randomness varies). All HillSearch tasks use
``denominator="2w"`` docs/methods/metric-best-found.md#decisions: the reading consistent with the paper's baseline figures].

* ``paper-003-main`` (version 2) — test: H-E3 (N 36, 48), T-main (N 36, 48, 60), M-main
  (N 36, 48). Reproduces the baseline rows of the paper's main results (Table 1, and the
  instances behind Tables 2, 3, 14, 15).
* ``paper-003-additional`` (version 2) — test: H-B2 (N 36, 48), T-alt1 and T-alt2
  (N 36, 48, 60), M-alt1..3 (N 36, 48). Reproduces the additional-instance tables of
  Appendix E.3 (Hill: Table 7; MaxSat: Tables 10–12; Tree: the E.3 tables of T-alt1/T-alt2).
* ``paper-003-main-v1`` / ``paper-003-additional-v1`` — the version-1 contents (H-B2 in main,
  H-E3 in additional), kept so runs made with them stay comparable; superseded.

Hill labels (``docs/results.md``): the paper's appendix names the needle-at-1.3 list (H-B2) as its
main instance, but the main table's baseline row is reproduced by the needle-at-6.2 list (H-E3),
and Table 7's by H-B2 (measured with ``benchmarks/baselines_003.py``; see ``docs/results.md``).
Version 2 therefore swaps the Hill instances between the two suites; the instances keep their
appendix names, so a task id (``H-E3/N36``) says which function it is.
* ``paper-003-general`` — the E.4 sets: test = 50 instances per family at N = 48 (seeds 0..49),
  train = 50 more per family (seeds 1000..1049).
* ``paper-003-difficulty`` — the E.5 sweep at N = 36: test = one instance per level (seed 0)
  docs/methods/metric-best-found.md#decisions, train = two more per level (seeds 100, 101).

[D] What train/test mean for the fixed instances: *test* is the paper's instances; *train* is
freshly generated instances of the same families that the test set never contains: 10 instances
per family from the E.4 general distribution (seeds 20000.. for main, 30000.. for additional),
each at the family's paper budgets. For TreeSearch, E.4 draws whose parameters equal a paper
instance's are redrawn, because equal parameters give the *same* tree up to relabelling.
MaxSat's fixed instances are generated from published seeds: M-main 0, M-alt1 1, M-alt2 2,
M-alt3 3 (the paper lists no clauses docs/methods/envs.md#maxsatsearch); trees: T-main 0, T-alt1 1, T-alt2 2.

[D, docs/methods/instances.md] E.4 ranges are integers, inclusive; its parameters are drawn with their own
``random.Random`` (from the seed and the family) so that the instance draws stay independent.
"""

from __future__ import annotations

import random
import zlib
from typing import Any

from clew.envs.base import Task
from clew.envs.family import Suite
from clew.envs.oracle_search import hill, maxsat, treesearch

BUDGETS = {"hill": (36, 48), "tree": (36, 48, 60), "maxsat": (36, 48)}
GENERATORS = {"hill": hill.generate_task, "tree": treesearch.generate_task,
              "maxsat": maxsat.generate_task}
FIXED_SEEDS = {"T-main": 0, "T-alt1": 1, "T-alt2": 2,
               "M-main": 0, "M-alt1": 1, "M-alt2": 2, "M-alt3": 3}
E4_BUDGET = 48
E5_BUDGET = 36


def _task(family: str, params: dict[str, Any], seed: int, task_id: str, split: str) -> Task:
    return GENERATORS[family]({**params, "id": task_id, "split": split}, seed)


def fixed_tasks(instances: dict[str, list[str]], split: str = "test") -> list[Task]:
    """The paper's instances at each of their family's budgets."""
    tasks = []
    for family, names in instances.items():
        for name in names:
            extra = {"denominator": "2w"} if family == "hill" else {}
            for n in BUDGETS[family]:
                tasks.append(_task(family, {"instance": name, "budget": n, **extra},
                                   FIXED_SEEDS.get(name, 0), f"{name}/N{n}", split))
    return tasks


# --- E.4 general distribution -------------------------------------------------------------------

def e4_params(family: str, seed: int) -> dict[str, Any]:
    """Parameters of the E.4 general set for one seed (docs/methods/envs.md#hillsearch, docs/methods/envs.md#treesearch, docs/methods/envs.md#maxsatsearch)."""
    rng = random.Random(zlib.crc32(f"e4:{family}:{seed}".encode()))
    if family == "hill":
        k = rng.randint(2, 4)
        return {"k": k, "k_needle": rng.randint(k + 1, k + 2), "alpha_decoy": 0.01,
                "alpha_needle": 0.008, "j_decoy": 0.1, "j_needle": 0.2, "denominator": "2w"}
    if family == "tree":
        paper = [tuple(p.values()) for p in treesearch.FIXED.values()]
        while True:
            p = {"r_trap": rng.randint(1, 4), "r_good": rng.randint(1, 4), "b": rng.randint(3, 5),
                 "d_trap": rng.randint(20, 40), "d_good": rng.randint(10, 16)}
            if tuple(p.values()) not in paper:
                return p
    if family == "maxsat":
        w_gold = rng.randint(60, 160)
        return {"n": rng.randint(12, 24), "k_gold": rng.randint(3, 4),
                "k_other": rng.randint(2, 6), "w_gold": w_gold,
                "m": w_gold + rng.randint(30, 80)}
    raise ValueError(f"unknown family {family!r}; known: hill, tree, maxsat")


def e4_tasks(seeds: range, split: str, budgets: dict[str, tuple[int, ...]] | None = None,
             prefix: str = "general") -> list[Task]:
    tasks = []
    for family in ("hill", "tree", "maxsat"):
        for seed in seeds:
            for n in (budgets or {}).get(family, (E4_BUDGET,)):
                tasks.append(_task(family, {**e4_params(family, seed), "budget": n}, seed,
                                   f"{family}-{prefix}-{seed}/N{n}", split))
    return tasks


# --- E.5 difficulty sweep -----------------------------------------------------------------------

def e5_params(family: str, level: int) -> dict[str, Any]:
    """Level 1..7 of the difficulty sweep (docs/methods/envs.md#hillsearch, docs/methods/envs.md#treesearch, docs/methods/envs.md#maxsatsearch)."""
    if not 1 <= level <= 7:
        raise ValueError(f"difficulty level must be 1..7, got {level}")
    if family == "hill":
        kn = level + 1  # k' = 2..8, k = k' - 1
        return {"k": kn - 1, "k_needle": kn, "alpha_decoy": 0.01, "alpha_needle": 0.008,
                "j_decoy": 0.1, "j_needle": 0.2, "denominator": "2w"}
    if family == "tree":
        return {"r_trap": 4, "r_good": level, "b": 3, "d_trap": 40, "d_good": 12}
    if family == "maxsat":
        w_gold = 130 + 10 * level
        return {"n": 11 + level, "k_gold": level, "k_other": 2, "w_gold": w_gold,
                "m": 50 + w_gold}
    raise ValueError(f"unknown family {family!r}; known: hill, tree, maxsat")


LEVEL_NAMES = {"hill": "kprime{}", "tree": "rgood{}", "maxsat": "kgold{}"}


def e5_tasks(seeds: tuple[int, ...], split: str) -> list[Task]:
    tasks = []
    for family in ("hill", "tree", "maxsat"):
        for level in range(1, 8):
            shown = level + 1 if family == "hill" else level
            for seed in seeds:
                name = LEVEL_NAMES[family].format(shown)
                tasks.append(_task(family, {**e5_params(family, level), "budget": E5_BUDGET},
                                   seed, f"{family}-{name}-s{seed}/N{E5_BUDGET}", split))
    return tasks


# --- the suites ---------------------------------------------------------------------------------

#: The fixed instances of each suite version: {version: {family: [instance, ...]}}.
MAIN = {1: {"hill": ["H-B2"], "tree": ["T-main"], "maxsat": ["M-main"]},
        2: {"hill": ["H-E3"], "tree": ["T-main"], "maxsat": ["M-main"]}}
ADDITIONAL = {1: {"hill": ["H-E3"], "tree": ["T-alt1", "T-alt2"],
                  "maxsat": ["M-alt1", "M-alt2", "M-alt3"]},
              2: {"hill": ["H-B2"], "tree": ["T-alt1", "T-alt2"],
                  "maxsat": ["M-alt1", "M-alt2", "M-alt3"]}}


def _fixed(name: str, version: int, sets: dict[int, dict[str, list[str]]], seeds: range,
           what: str, sources: tuple[str, str]) -> Suite:
    """The paper's fixed instances of ``sets[version]`` (test), with general-set tasks of
    ``seeds`` to search on (train); ``what`` names them (``{hill}``: the Hill instance),
    ``sources`` says where version 1 and later versions come from in the paper."""
    hill = sets[version]["hill"][0]
    return Suite(
        name, version,
        {"train": e4_tasks(seeds, "train", BUDGETS, "train"), "test": fixed_tasks(sets[version])},
        f"docs/methods/envs.md#oracle-search-tasks {what.format(hill=hill)} at the paper's budgets"
        + sources[version >= 2])


def _main(name: str, version: int) -> Suite:
    return _fixed(name, version, MAIN, range(20000, 20010), "main instances ({hill}, T-main, M-main)",
                  (" (v1: Hill instance of Table 7)", " (paper Table 1)"))


def _additional(name: str, version: int) -> Suite:
    return _fixed(name, version, ADDITIONAL, range(30000, 30010),
                  "additional instances (E.3; Hill {hill})",
                  (" (v1: Hill instance of Table 1)", " (paper Tables 7-12)"))


def paper_003_main() -> Suite:
    """Main results: H-E3, T-main, M-main (the paper's Table 1 baseline rows)."""
    return _main("paper-003-main", 2)


def paper_003_additional() -> Suite:
    """Additional instances: H-B2 (Table 7), T-alt1/T-alt2, M-alt1..3 (Tables 10-12)."""
    return _additional("paper-003-additional", 2)


def paper_003_main_v1() -> Suite:
    """Version 1 of ``paper-003-main`` (H-B2 in place of H-E3); superseded."""
    return _main("paper-003-main-v1", 1)


def paper_003_additional_v1() -> Suite:
    """Version 1 of ``paper-003-additional`` (H-E3 in place of H-B2); superseded."""
    return _additional("paper-003-additional-v1", 1)


def paper_003_general() -> Suite:
    return Suite(
        "paper-003-general", 1,
        {"train": e4_tasks(range(1000, 1050), "train"), "test": e4_tasks(range(50), "test")},
        "docs/methods/instances.md general sets: 50 instances per family at N=48")


def paper_003_difficulty() -> Suite:
    return Suite(
        "paper-003-difficulty", 1,
        {"train": e5_tasks((100, 101), "train"), "test": e5_tasks((0,), "test")},
        "docs/methods/instances.md difficulty sweep: 7 levels per family at N=36")
