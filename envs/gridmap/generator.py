"""Instance generator: exploration level × task-DAG level (docs/methods/envs.md#grid-map-with-task-dag, docs/methods/instances.md).

``generate_task(params, seed)`` is a pure function: the same (params, seed) gives the same task
on every platform. It draws from three independent sub-streams (DAG, names, layout), each a
``random.Random`` seeded with a string (Python hashes string seeds with SHA-512, not the salted
``hash()``). The DAG and name streams are keyed by (seed, dag_level) and the layout stream by
(seed, dag_level, exploration_level): a seed gives the same DAG and names on the three map
types of a DAG level (a controlled comparison), and a different map for every configuration.

Decisions taken (docs/methods/metric-explore-exploit-error.md#decisions):

* layers: sizes drawn one after another, uniform over 1..min(3, remaining); the goal alone in
  a final layer.
* the goal has a single AND option; duplicate option sets are dropped; repair adds every
  non-goal sink to the goal's option, so every node leads to the goal.
* names: distinct random [A-Z0-9]{4} tokens; we also require at least one letter and one
  digit (every example in the paper has both), which keeps English words such as "DOWN" or
  "LEFT" out of the names, where they would confuse action parsing.
* size: cells = ceil(N/ρ) with N the number of task nodes (start not counted); (W, H)
  minimises |W/H − aspect|, then W·H, subject to W·H ≥ max(cells, N+1). Aspect 1 gives
  W = H = ceil(sqrt(cells)). ``fixed_size=[W, H]`` overrides (Appendix G).
* carving: for each node (random order) an L-shaped start→node corridor (random elbow
  order) with a w×w brush, w drawn per corridor from the preset's width set; every other cell
  blocked. The brush block's corner is clamped into the box, so the block always holds the
  path cell and the carved region is connected.
* Generator versions (``generator_version`` param, recorded in the task's presets; default
  the current one, :data:`GENERATOR_VERSION`). Old suites pass their version explicitly, so
  their tasks never change (see ``docs/methods/instances.md``).

  - **1**: the carving above and nothing else. Its high-exploration maps are only about
    70% open (9×9 hard maps: 57 of 81 cells on average over 200 seeds), far from the mostly
    open maps the paper's instance statistics imply (the carving's own sanity target).
  - **2**: version 1's carving, then an *open-fraction floor* ``min_open`` per exploration
    level (high 0.9; medium and low none): while fewer than ``min_open``·W·H cells are open,
    carve one more L-shaped corridor, with a brush width drawn from the same width set, from
    the start to a uniformly drawn blocked cell (a corridor that leads to no node, i.e. an open
    area or a dead end). Corridors keep the preset's 2–3 cell widths and every carved cell
    stays connected to the start. Version 2 draws from the same streams as version 1 and the
    floor only adds draws after them, so a version-2 map contains the version-1 map of the
    same (params, seed): same start, nodes, DAG and names, more open cells, a larger budget.
    Medium and low maps are identical in both versions. Why a floor rather than another
    corridor rule: every start-anchored L-corridor rule we measured (star, chains between
    nodes, all pairs) left 9×9 high/hard maps at 71–87% open on average with a long low
    tail; a floor states the target directly.
* start and node cells: uniform random distinct cells; ``min_spacing`` (Manhattan distance
  between any two of start and nodes, default 0 = none) is an option, by rejection sampling.
* presets: exploration_level high/medium/low ↔ (ρ, widths) = (0.10, {2,3}), (0.25, {1,2,3}),
  (0.40, {1}); dag_level easy/medium/hard ↔ 4/6/8 nodes with the docs/methods/envs.md#grid-map-with-task-dag probabilities. The paper's
  other names are accepted (dag "small"/"large"; ``exploitation_demand`` low/medium/high).
* Parent weights exp(−β·((D−1)−d)) are rounded to 12 significant digits so that a last-ulp
  difference between platforms' ``exp`` cannot change a draw.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from fractions import Fraction
from typing import Any

from clew.envs.base import Task
from clew.envs.gridmap.instance import Cell, Instance, bfs, build_instance

GENERATOR_VERSION = 2
GENERATOR_VERSIONS = (1, 2)

#: dag_level -> node count (goal included) and the docs/methods/envs.md#grid-map-with-task-dag probability tables, as [value, p] pairs.
DAG_PRESETS: dict[str, dict[str, Any]] = {
    "easy": {"num_nodes": 4, "option_count_probs": [[1, 1.0]],
             "dependency_count_probs": [[1, 0.5], [2, 0.5]],
             "goal_dependency_count_probs": [[1, 0.5], [2, 0.5]]},
    "medium": {"num_nodes": 6, "option_count_probs": [[1, 0.8], [2, 0.2]],
               "dependency_count_probs": [[1, 0.5], [2, 0.5]],
               "goal_dependency_count_probs": [[1, 0.5], [2, 0.5]]},
    "hard": {"num_nodes": 8, "option_count_probs": [[1, 0.6], [2, 0.4]],
             "dependency_count_probs": [[1, 1 / 3], [2, 1 / 3], [3, 1 / 3]],
             "goal_dependency_count_probs": [[1, 1 / 3], [2, 1 / 3], [3, 1 / 3]]},
}
#: exploration_level -> node density ρ and corridor widths.
MAP_PRESETS: dict[str, dict[str, Any]] = {
    "high": {"density": 0.10, "widths": [2, 3]},
    "medium": {"density": 0.25, "widths": [1, 2, 3]},
    "low": {"density": 0.40, "widths": [1]},
}
#: exploration_level -> the version-2 open-fraction floor (0 = none).
MIN_OPEN: dict[str, float] = {"high": 0.9, "medium": 0.0, "low": 0.0}
EXPLORATION_LEVELS = ("high", "medium", "low")
DAG_LEVELS = ("easy", "medium", "hard")
_DAG_ALIASES = {"small": "easy", "large": "hard"}
_DEMAND_TO_LEVEL = {"low": "high", "medium": "medium", "high": "low"}

_KNOWN_PARAMS = {
    "exploration_level", "exploitation_demand", "dag_level", "alpha", "beta", "aspect",
    "fixed_size", "min_spacing", "num_nodes", "density", "widths", "max_layer_size",
    "generator_version", "min_open",
}
_NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def generate_task(params: dict[str, Any], seed: int) -> Task:
    """The registered generator: ``params`` names the presets (and optional overrides)."""
    inst = generate_instance(params, seed)
    p = inst.presets
    # version-1 ids stay as they were; later versions say theirs, so runs never mix them up
    tag = "" if p["generator_version"] == 1 else f"v{p['generator_version']}-"
    return Task(env="gridmap", params=inst.to_params(), seed=seed,
                id=f"gridmap-{tag}{p['exploration_level']}-{p['dag_level']}-s{seed}")


def pits_task(task: Task) -> Task:
    """A grid-map task as a ``gridmap-pits`` task (docs/methods/envs.md#pits): the same map,
    under that env's name, its id ending in ``-pits``."""
    return replace(task, env="gridmap-pits", id=f"{task.id}-pits")


def generate_pits_task(params: dict[str, Any], seed: int) -> Task:
    """The generator of ``gridmap-pits``: :func:`generate_task`'s map as a :func:`pits_task`."""
    return pits_task(generate_task(params, seed))


def resolve_presets(params: dict[str, Any]) -> dict[str, Any]:
    """Fill in the preset tables for the requested levels; unknown keys are an error."""
    if not isinstance(params, dict):
        got = type(params).__name__  # a task file's content: ValueError, like its other errors
        raise ValueError(f"gridmap generator params must be an object, got {got}")  # noqa: TRY004
    unknown = sorted(set(params) - _KNOWN_PARAMS)
    if unknown:
        raise ValueError(f"gridmap generator: unknown param(s) {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(_KNOWN_PARAMS))}")
    level = params.get("exploration_level")
    if "exploitation_demand" in params:
        demand = str(params["exploitation_demand"]).lower()
        if demand not in _DEMAND_TO_LEVEL:
            raise ValueError(f"gridmap generator: exploitation_demand {demand!r} is not one of "
                             "low, medium, high")
        if level is not None and str(level).lower() != _DEMAND_TO_LEVEL[demand]:
            raise ValueError("gridmap generator: exploration_level and exploitation_demand "
                             "disagree (they are inverse names of one axis)")
        level = _DEMAND_TO_LEVEL[demand]
    level = str(level or "medium").lower()
    if level not in MAP_PRESETS:
        raise ValueError(f"gridmap generator: exploration_level {level!r} is not one of "
                         f"{', '.join(EXPLORATION_LEVELS)}")
    dag = str(params.get("dag_level", "medium")).lower()
    dag = _DAG_ALIASES.get(dag, dag)
    if dag not in DAG_PRESETS:
        raise ValueError(f"gridmap generator: dag_level {dag!r} is not one of "
                         f"{', '.join(DAG_LEVELS)}")
    out: dict[str, Any] = {
        "exploration_level": level,
        "exploitation_demand": {v: k for k, v in _DEMAND_TO_LEVEL.items()}[level],
        "dag_level": dag,
        **DAG_PRESETS[dag], **MAP_PRESETS[level],
        "alpha": 3, "beta": 1.0, "aspect": 1.0, "fixed_size": None, "min_spacing": 0,
        "max_layer_size": 3,
    }
    version = params.get("generator_version", GENERATOR_VERSION)
    if version not in GENERATOR_VERSIONS or isinstance(version, bool):
        raise ValueError(f"gridmap generator: generator_version {version!r} is not one of "
                         f"{', '.join(map(str, GENERATOR_VERSIONS))}")
    if version >= 2:
        out["min_open"] = MIN_OPEN[level]
    elif params.get("min_open") is not None:
        raise ValueError("gridmap generator: min_open needs generator_version 2 or later")
    for key in ("alpha", "beta", "aspect", "fixed_size", "min_spacing", "num_nodes", "density",
                "widths", "max_layer_size", "min_open"):
        if key in params and params[key] is not None:
            out[key] = params[key]
    _check_presets(out)
    out["generator_version"] = version
    return out


def _check_presets(p: dict[str, Any]) -> None:
    def bad(key: str, why: str) -> ValueError:
        return ValueError(f"gridmap generator: {key}={p[key]!r} {why}")
    if not isinstance(p["num_nodes"], int) or p["num_nodes"] < 2:
        raise bad("num_nodes", "must be an integer >= 2 (goal included)")
    if not 0 < float(p["density"]) <= 1:
        raise bad("density", "must be in (0, 1]")
    if not p["widths"] or not all(isinstance(w, int) and w >= 1 for w in p["widths"]):
        raise bad("widths", "must be a non-empty list of positive integers")
    if not isinstance(p["alpha"], int) or p["alpha"] < 1:
        raise bad("alpha", "must be a positive integer")
    if float(p["aspect"]) <= 0:
        raise bad("aspect", "must be positive")
    if not isinstance(p["max_layer_size"], int) or p["max_layer_size"] < 1:
        raise bad("max_layer_size", "must be a positive integer")
    if "min_open" in p and not 0 <= float(p["min_open"]) <= 1:
        raise bad("min_open", "must be in [0, 1]")
    fs = p["fixed_size"]
    if fs is not None and (not isinstance(fs, (list, tuple)) or len(fs) != 2
                           or not all(isinstance(v, int) and v >= 1 for v in fs)):
        raise bad("fixed_size", "must be [W, H] with positive integers")


def generate_instance(params: dict[str, Any], seed: int) -> Instance:
    """docs/methods/envs.md#grid-map-with-task-dag: DAG, names, grid size, placement, carving; B = alpha·|M|."""
    p = resolve_presets(params)
    n_nodes = p["num_nodes"]
    # The stream names keep their version-1 spelling in every version: a later version differs
    # from version 1 only where its rules differ (see the module docstring).
    base = f"clew/gridmap/v1/{int(seed)}/{p['dag_level']}"
    rng_dag = random.Random(f"{base}/dag")
    rng_names = random.Random(f"{base}/names")
    rng_map = random.Random(f"{base}/{p['exploration_level']}/layout")

    prereq, goal = sample_dag(rng_dag, p)
    names = sample_names(rng_names, n_nodes)
    width, height = grid_size(p, n_nodes)
    if width * height < n_nodes + 1:
        raise ValueError(f"gridmap generator: a {width}x{height} grid cannot hold {n_nodes} "
                         "nodes plus the start")
    start, loc, cells = carve_layout(rng_map, width, height, n_nodes, p["widths"],
                                     int(p["min_spacing"]), float(p.get("min_open", 0.0)))
    dag = {names[u]: [[names[v] for v in option] for option in prereq[u]] for u in range(n_nodes)}
    return build_instance(width, height, cells, start, dag,
                          {names[u]: loc[u] for u in range(n_nodes)}, names[goal],
                          alpha=p["alpha"], seed=int(seed), presets=p,
                          generator_version=p["generator_version"])


# --- DAG ---------------------------------------------------------------------------------------
def sample_count(rng: random.Random, probs: list[list[float]]) -> int:
    """Draw a value from [[value, probability], ...]."""
    r = rng.random() * sum(float(q) for _, q in probs)
    acc = 0.0
    for value, q in probs:
        acc += float(q)
        if r < acc:
            return int(value)
    return int(probs[-1][0])


def weighted_sample(rng: random.Random, items: list[int], weights: list[float], m: int) -> list[int]:
    """m distinct items, drawn one by one with probability ∝ weight (without replacement)."""
    items, weights, out = list(items), list(weights), []
    for _ in range(min(m, len(items))):
        r = rng.random() * sum(weights)
        acc, pick = 0.0, len(items) - 1
        for i, w in enumerate(weights):
            acc += w
            if r < acc:
                pick = i
                break
        out.append(items.pop(pick))
        weights.pop(pick)
    return out


def _weight(beta: float, gap: int) -> float:
    return float(f"{math.exp(-beta * gap):.12g}")


def sample_dag(rng: random.Random, p: dict[str, Any]) -> tuple[list[list[list[int]]], int]:
    """Layers, DNF prerequisites and repair (docs/methods/envs.md#grid-map-with-task-dag steps 1–3). Node ids: layers first, goal last."""
    n_nodes, beta, max_layer = p["num_nodes"], float(p["beta"]), p["max_layer_size"]
    layers: list[list[int]] = []
    remaining, next_id = n_nodes - 1, 0
    while remaining > 0:
        k = rng.randint(1, min(max_layer, remaining))
        layers.append(list(range(next_id, next_id + k)))
        next_id += k
        remaining -= k
    goal = next_id
    depth = {v: d for d, layer in enumerate(layers) for v in layer}
    depth[goal] = len(layers)

    def draw(m: int, child_depth: int) -> list[int]:
        cand = [v for v in range(goal) if depth[v] < child_depth]
        weights = [_weight(beta, (child_depth - 1) - depth[v]) for v in cand]
        return sorted(weighted_sample(rng, cand, weights, m))

    prereq: list[list[list[int]]] = [[] for _ in range(n_nodes)]
    for d in range(1, len(layers)):
        for u in layers[d]:
            options: list[list[int]] = []
            for _ in range(sample_count(rng, p["option_count_probs"])):
                option = draw(sample_count(rng, p["dependency_count_probs"]), d)
                if option not in options:  # drop duplicate option sets
                    options.append(option)
            prereq[u] = options
    prereq[goal] = [draw(sample_count(rng, p["goal_dependency_count_probs"]), depth[goal])]

    # repair: every non-goal sink joins the goal's (single) option.
    has_child = {v for opts in prereq for o in opts for v in o}
    for v in range(goal):
        if v not in has_child and v not in prereq[goal][0]:
            prereq[goal][0].append(v)
    prereq[goal][0].sort()
    return prereq, goal


def sample_names(rng: random.Random, count: int) -> list[str]:
    """Distinct [A-Z0-9]{4} tokens with at least one letter and one digit."""
    names: list[str] = []
    while len(names) < count:
        token = "".join(rng.choice(_NAME_CHARS) for _ in range(4))
        if (any(c.isdigit() for c in token) and any(c.isalpha() for c in token)
                and token not in names):
            names.append(token)
    return names


# --- map ---------------------------------------------------------------------------------------
def grid_size(p: dict[str, Any], n_nodes: int) -> tuple[int, int]:
    """(W, H) from the node density and aspect ratio, or the fixed size."""
    if p["fixed_size"] is not None:
        return int(p["fixed_size"][0]), int(p["fixed_size"][1])
    cells = math.ceil(Fraction(n_nodes) / Fraction(str(p["density"])))
    need = max(cells, n_nodes + 1)
    aspect = Fraction(str(p["aspect"]))
    best: tuple[tuple[Fraction, int, int], tuple[int, int]] | None = None
    for h in range(1, need + 1):
        # for this h, the best feasible w is the smallest feasible one or the one nearest h·aspect
        w_min = -(-need // h)
        for w in {w_min, max(w_min, math.floor(aspect * h)), max(w_min, math.ceil(aspect * h))}:
            key = (abs(Fraction(w, h) - aspect), w * h, h)
            if best is None or key < best[0]:
                best = (key, (w, h))
    assert best is not None
    return best[1]


def carve_layout(rng: random.Random, width: int, height: int, n_nodes: int, widths: list[int],
                 min_spacing: int = 0, min_open: float = 0.0,
                 ) -> tuple[Cell, list[Cell], frozenset[Cell]]:
    """Place start and nodes, carve L-shaped w×w corridors start→node; then, while
    fewer than ``min_open``·W·H cells are open, a corridor from the start to a random blocked
    cell (version 2's floor; 0 draws nothing more, which is version 1)."""
    box = [(x, y) for x in range(width) for y in range(height)]
    for _ in range(10_000):
        start = rng.choice(box)
        loc = rng.sample([c for c in box if c != start], n_nodes)
        if min_spacing <= 0 or _spaced([start, *loc], min_spacing):
            break
    else:
        raise ValueError(f"gridmap generator: could not place {n_nodes} nodes with "
                         f"min_spacing={min_spacing} on a {width}x{height} grid")
    carved: set[Cell] = {start, *loc}
    order = list(range(n_nodes))
    rng.shuffle(order)
    for u in order:
        _corridor(rng, carved, start, loc[u], widths, width, height)
    need = math.ceil(min_open * width * height - 1e-9)
    while len(carved) < need:
        blocked = [c for c in box if c not in carved]
        _corridor(rng, carved, start, rng.choice(blocked), widths, width, height)
    cells = frozenset(carved)
    reached = bfs(cells, start)
    assert reached.keys() == cells, "carving left a disconnected cell"  # by construction
    return start, loc, cells


def _corridor(rng: random.Random, carved: set[Cell], a: Cell, b: Cell, widths: list[int],
              width: int, height: int) -> None:
    """Carve one L-shaped a→b corridor with a w×w brush, w drawn from ``widths``."""
    w = min(rng.choice(widths), width, height)
    x_first = rng.random() < 0.5
    for (x, y) in l_path(a, b, x_first):
        cx, cy = min(x, width - w), min(y, height - w)
        carved.update((cx + i, cy + j) for i in range(w) for j in range(w))


def l_path(a: Cell, b: Cell, x_first: bool) -> list[Cell]:
    """Cells of the L-shaped path a→b, moving along x first or along y first."""
    path = [a]
    x, y = a
    for axis in ("x", "y") if x_first else ("y", "x"):
        if axis == "x":
            while x != b[0]:
                x += 1 if b[0] > x else -1
                path.append((x, y))
        else:
            while y != b[1]:
                y += 1 if b[1] > y else -1
                path.append((x, y))
    return path


def _spaced(cells: list[Cell], k: int) -> bool:
    return all(abs(a[0] - b[0]) + abs(a[1] - b[1]) >= k
               for i, a in enumerate(cells) for b in cells[i + 1:])
