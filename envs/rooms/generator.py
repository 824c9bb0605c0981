"""Task generator and frozen-layout builder for Dark Treasure Rooms (docs/methods/envs.md#dark-treasure-rooms).

``generate_task(params, seed)`` is a pure function: ``random.Random(seed)`` drives every draw.
A drawn layout is kept only if

* R^max > 0 (docs/methods/envs.md#dark-treasure-rooms), and
* the systematic frontier explorer (:mod:`.explorer`) reaches exploration gap 0 within the
  run's episodes (docs/methods/metric-optimal-exploitation-gap.md#decisions, "if it cannot, the layout is too hard for its budget and should be
  rejected"); ``check_explorable=False`` turns this off.

Otherwise the next layout is drawn from the same generator (still a function of the seed).

Params (all optional): ``generator_version`` (1 | 2 | 3, default the current one,
:data:`GENERATOR_VERSION`), ``size`` (4), ``n_balls``, ``connectivity``
(``minigrid_connect_all`` | ``tree`` | ``ust``), ``start`` (``random`` | ``corner`` |
``centre``), ``extra_door_prob`` (0), ``door_budget_slack`` (0), ``door_budget_factor`` (1),
``distinct_ball_rooms`` (false), ``check_explorable`` (true),
plus the env's task params ``n_episodes`` (20), ``instruction`` (``task``), ``call_cap_extra``
(10), ``end_when_stuck`` (true). ``layout_id`` instead takes a frozen layout.

**Generator versions** (defaults per version; explicit params override them):

* **1** — ``minigrid_connect_all`` doors, a random start, 5 balls per layout. Its layouts
  connect rooms with loops, and its 7×7 layouts put the good balls near the end of the door
  budget (R^max as low as 9), so random-walk statistics drift from the paper's.
* **2** — the tree-like reading of the layouts (``docs/methods/instances.md``):
  a uniformly random spanning tree (``ust``); a random start among the rooms at most 4 doors
  more eccentric than the tree's centre (``centre_slack`` 4: on 4×4 and 5×5 trees nearly any
  room, on 7×7 trees no start at the tip of a long branch, where the budget C, still the
  start's eccentricity, would send a random walk the long way to the far side); balls per size {4: 7, 5: 5, 7: 4} (the method page's tree reading, other
  sizes 5); and one more acceptance rule, *best three reachable*: R^max must equal the sum of
  the K = 3 largest rewards, i.e. the budget lets one episode collect the three best balls,
  and *R^max near its expectation*: within ±3 of the expected sum of the best three of b
  integer U{1..10} rewards (24.0 / 21.5 / 19.5 for b = 7 / 5 / 4), so that three
  layouts per size are representative rather than lucky or unlucky draws. Version-2 layouts
  record ``generator_version`` and these rules in their meta.
* **3** — version 2's trees, start rule and acceptance rules, with the reading of the paper
  whose coverage unit clew uses (observation sets): 6 / 4 / 3 balls at 4×4 / 5×5 / 7×7 (other
  sizes 5), **each in a room of its own**, so a layout has n² + b observation sets, the
  paper's coverage denominators under that reading; and a door budget **C = ⌈1.5 · e⌉**, e the
  start's eccentricity (still set from the distance to the farthest room). Version 2's C = e
  let a random walk cover too little of a layout and repeat too little for the paper's
  random-walk statistics; docs/methods/instances.md has the measurements behind the choice.

The frozen layouts of each version: three test layouts per size (the paper's 3 layouts per
size, docs/methods/envs.md#dark-treasure-rooms; version 1 ``4x4-a`` .. ``7x7-c``, version 2
``v2-4x4-a`` .., version 3 ``v3-4x4-a`` ..), seeds
1000·n + i, and ten train layouts per size (``4x4-t0`` .., ``v2-4x4-t0`` ..), seeds
1000·n + 100 + i. Rebuild with ``python -m clew.envs.rooms.generator --version N``; a test
checks each file still equals what the seeds give.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from functools import cache
from math import comb
from typing import Any

from clew.envs.base import Task
from clew.envs.rooms.env import RoomsEnv, observation_sets
from clew.envs.rooms.explorer import frontier_action
from clew.envs.rooms.layouts import LAYOUTS_FILES, Layout, frozen_layout, random_layout
from clew.envs.rooms.solver import exploit_value, known_model, layout_best_route

LAYOUT_PARAMS = ("size", "n_balls", "connectivity", "start", "extra_door_prob",
                 "door_budget_slack", "centre_slack", "distinct_ball_rooms", "door_budget_factor")
ENV_PARAMS = ("n_episodes", "instruction", "call_cap_extra", "end_when_stuck")
SIZES = (4, 5, 7)
TEST_IDS = ("a", "b", "c")
N_TRAIN = 10
MAX_ATTEMPTS = 500
GENERATOR_VERSION = 3
#: per version: layout defaults, balls per size (else 5), and the acceptance rules: whether the
#: best three balls must be jointly reachable, how far R^max may lie from its expectation
VERSIONS: dict[int, dict[str, Any]] = {
    1: {"defaults": {}, "balls": {}, "best_three": False, "rmax_tolerance": None},
    2: {"defaults": {"connectivity": "ust", "start": "centre", "centre_slack": 4},
        "balls": {4: 7, 5: 5, 7: 4},  # the tree reading (docs/methods/instances.md)
        "best_three": True,
        "rmax_tolerance": 3},
    3: {"defaults": {"connectivity": "ust", "start": "centre", "centre_slack": 6,
                     "distinct_ball_rooms": True, "door_budget_factor": 1.5},
        "balls": {4: 6, 5: 4, 7: 3},  # the observation-set reading: N = n² + balls
        "best_three": True,
        "rmax_tolerance": 3,
        "typical_tests": True},
}
#: version 3's test layouts are typical of their family: the mean exploration gap and coverage
#: that TYPICAL_WALKS random walks leave on a test layout lie within TYPICAL_WINDOW of the
#: family's means at its size (exploration gap, coverage), measured over 120 layouts per size
#: (seeds 50000.. and 80000.., 10 walks each: ``python benchmarks/instances_stats.py --part
#: rooms-typical``; docs/methods/instances.md)
FAMILY_WALK = {4: (0.16, 0.78), 5: (0.33, 0.69), 7: (0.45, 0.55)}
TYPICAL_WINDOW = (0.05, 0.04)
TYPICAL_WALKS = 20
ID_PREFIX = {1: "", 2: "v2-", 3: "v3-"}


def version_options(version: int, size: int, options: dict[str, Any]) -> dict[str, Any]:
    """The version's layout defaults under the explicit ``options``."""
    if version not in VERSIONS:
        raise ValueError(f"rooms generator: generator_version {version!r} is not one of "
                         f"{', '.join(map(str, VERSIONS))}")
    out = dict(VERSIONS[version]["defaults"])
    if version >= 2:
        out["n_balls"] = VERSIONS[version]["balls"].get(size, 5)
    out.update(options)
    return out


def expected_best(n_balls: int, k: int = 3, lo: int = 1, hi: int = 10) -> float:
    """E[sum of the k largest of n_balls i.i.d. integer U{lo..hi} rewards] (exact).

    The j-th largest is >= v iff at least j rewards are >= v, so E = Σ_j Σ_v P(Bin >= j).
    """
    total = 0.0
    for j in range(1, k + 1):
        for v in range(lo, hi + 1):
            p = (hi - v + 1) / (hi - lo + 1)
            total += sum(comb(n_balls, m) * p**m * (1 - p) ** (n_balls - m)
                         for m in range(j, n_balls + 1))
    return total + (lo - 1) * min(k, n_balls)


def best_three_reachable(layout: Layout) -> bool:
    """Can one episode collect the K best balls (R^max = their sum)?"""
    best = sorted((b.reward for b in layout.balls), reverse=True)[:layout.max_pickups]
    return layout_best_route(layout).value == sum(best)


def explorer_closes_gap(layout: Layout, n_episodes: int = 20) -> bool:
    """Does the frontier explorer know an optimal route after ``n_episodes`` episodes?"""
    env = RoomsEnv()
    env.reset(Task("rooms", {"layout": layout_dict(layout), "n_episodes": n_episodes}))
    while not env.done:
        env.step(frontier_action(env))
    return exploit_value(layout, known_model(env.state.moves)) == layout_best_route(layout).value


def random_walk_stats(layout: Layout, walks: int = TYPICAL_WALKS,
                      n_episodes: int = 20) -> tuple[float, float]:
    """The mean exploration gap (1 − R^exploit / R^max after a run) and coverage (observation
    sets visited / reachable) that a uniform random walk over the visible objects leaves on
    ``layout``; walk w draws from ``Random(w)``."""
    rmax = layout_best_route(layout).value
    task = Task("rooms", {"layout": layout_dict(layout), "n_episodes": n_episodes})
    gap = coverage = 0.0
    for w in range(walks):
        rng, env = random.Random(w), RoomsEnv()
        env.reset(task)
        while not env.done:
            env.step(rng.choice(env.legal_actions()))
        gap += 1 - exploit_value(layout, known_model(env.state.moves)) / rmax
        seen = observation_sets(env.start_visible(), env.state.moves)
        coverage += len(seen) / layout.n_observation_states
    return gap / walks, coverage / walks


@cache
def typical_test_seeds(size: int, version: int) -> tuple[tuple[int, float, float], ...]:
    """(seed, random-walk gap, coverage) of the first three seeds 1000·n, 1000·n + 1, … whose
    layouts are typical of the family (:data:`FAMILY_WALK`); train seeds start at 1000·n + 100."""
    found: list[tuple[int, float, float]] = []
    for seed in range(1000 * size, 1000 * size + 100):
        stats = random_walk_stats(make_layout(size, seed, generator_version=version))
        if all(abs(x - mean) <= window
               for x, mean, window in zip(stats, FAMILY_WALK[size], TYPICAL_WINDOW)):
            found.append((seed, *(round(x, 3) for x in stats)))
            if len(found) == len(TEST_IDS):
                return tuple(found)
    raise ValueError(f"rooms: fewer than {len(TEST_IDS)} typical {size}x{size} test layouts "
                     f"among seeds {1000 * size}..{1000 * size + 99}")


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
                n_episodes: int = 20, generator_version: int = 1, **options: Any) -> Layout:
    """The first acceptable layout drawn from ``Random(seed)`` by the given generator version."""
    options = version_options(generator_version, size, options)
    rules = VERSIONS[generator_version]
    best_three, tolerance = rules["best_three"], rules["rmax_tolerance"]
    rng = random.Random(seed)
    for attempt in range(MAX_ATTEMPTS):
        layout = random_layout(size, rng, **options)
        rmax = layout_best_route(layout).value
        if rmax <= 0:
            continue
        if best_three and not best_three_reachable(layout):
            continue
        if tolerance is not None and abs(
                rmax - expected_best(len(layout.balls), layout.max_pickups)) > tolerance:
            continue
        if check_explorable and not explorer_closes_gap(layout, n_episodes):
            continue
        meta = {"seed": seed, "attempt": attempt,
                "connectivity": options.get("connectivity", "minigrid_connect_all"),
                "n_balls": options.get("n_balls", 5)}
        if generator_version >= 2:  # version-1 meta stays as it was
            meta.update(generator_version=generator_version,
                        start=options.get("start", "random"),
                        centre_slack=options.get("centre_slack", 0), best_three=best_three,
                        rmax_tolerance=tolerance)
        if generator_version >= 3:
            meta.update(distinct_ball_rooms=options.get("distinct_ball_rooms", False),
                        door_budget_factor=options.get("door_budget_factor", 1.0))
        return Layout(layout.size, layout.start, layout.doors, layout.balls,
                      layout.door_budget, layout.max_pickups, layout_id, meta)
    raise ValueError(f"rooms: no acceptable {size}x{size} layout in {MAX_ATTEMPTS} draws "
                     f"from seed {seed} (options {options}); raise door_budget_slack?")


def generate_task(params: dict[str, Any], seed: int) -> Task:
    """A rooms task: a frozen layout (``layout_id``) or a fresh one drawn from ``seed``."""
    known = {*LAYOUT_PARAMS, *ENV_PARAMS, "layout_id", "check_explorable", "generator_version"}
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
        version = params.get("generator_version", GENERATOR_VERSION)
        task_id = f"rooms-{ID_PREFIX.get(version, '')}{size}x{size}-s{seed}"
        layout = make_layout(size, seed, layout_id=task_id,
                             check_explorable=bool(params.get("check_explorable", True)),
                             n_episodes=int(params.get("n_episodes", 20)),
                             generator_version=version, **options)
    return Task("rooms", {"layout": layout.to_dict(), **env_params}, seed=seed, id=task_id)


def frozen_specs(version: int = 1) -> list[tuple[str, int, int]]:
    """(layout id, size, seed) of every frozen layout of a generator version: test seeds
    1000·n + i (version 3: the first typical ones), train seeds 1000·n + 100 + i."""
    pre, specs = ID_PREFIX[version], []
    for n in SIZES:
        seeds = ([s for s, *_ in typical_test_seeds(n, version)]
                 if VERSIONS[version].get("typical_tests") else
                 [1000 * n + i for i in range(len(TEST_IDS))])
        specs += [(f"{pre}{n}x{n}-{x}", n, s) for x, s in zip(TEST_IDS, seeds)]
        specs += [(f"{pre}{n}x{n}-t{i}", n, 1000 * n + 100 + i) for i in range(N_TRAIN)]
    return specs


def _frozen(lid: str, size: int, seed: int, version: int) -> dict[str, Any]:
    data = make_layout(size, seed, layout_id=lid, generator_version=version).to_dict()
    if VERSIONS[version].get("typical_tests"):
        measured = {s: stats for s, *stats in typical_test_seeds(size, version)}
        if seed in measured:  # a test layout: what the typicality rule measured
            data["meta"]["random_walk_gap"], data["meta"]["random_walk_coverage"] = measured[seed]
    return data


def build_frozen(version: int = 1) -> dict[str, Any]:
    command = "python -m clew.envs.rooms.generator" + ("" if version == 1 else
                                                       f" --version {version}")
    about = ("docs/methods/envs.md#dark-treasure-rooms" if version == 1  # version 1's note stays as it was
             else f"generator version {version}, docs/methods/instances.md")
    return {
        "version": version,
        "note": f"Dark Treasure Rooms layouts ({about}); built by `{command}`; "
                "never regenerate during experiments.",
        "layouts": [_frozen(lid, n, seed, version) for lid, n, seed in frozen_specs(version)],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="rebuild a frozen rooms layout file")
    ap.add_argument("--version", type=int, default=1, choices=sorted(VERSIONS),
                    help="generator version whose file to rebuild (default 1: layouts.json)")
    version = ap.parse_args(argv).version
    data = build_frozen(version)
    # one layout per line: readable diffs, small file
    rows = ",\n".join(json.dumps(d, sort_keys=True) for d in data["layouts"])
    head = json.dumps({k: v for k, v in data.items() if k != "layouts"}, sort_keys=True)
    text = head[:-1] + ', "layouts": [\n' + rows + "\n]}\n"
    LAYOUTS_FILES[version].write_text(text)
    print(f"wrote {len(data['layouts'])} layouts to {LAYOUTS_FILES[version]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
