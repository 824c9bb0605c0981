"""Instance generator: exploration level × task-DAG level (spec_000 §2, decisions D11, D13–D18).

``generate_task(params, seed)`` is a pure function: the same (params, seed) gives the same task
on every platform. It draws from three independent sub-streams (DAG, names, layout), each a
``random.Random`` seeded with a string (Python hashes string seeds with SHA-512, not the salted
``hash()``). The DAG and name streams are keyed by (seed, dag_level) and the layout stream by
(seed, dag_level, exploration_level): a seed gives the same DAG and names on the three map
types of a DAG level (a controlled comparison), and a different map for every configuration.

Decisions taken (spec_000 §7):

* D13 layers: sizes drawn one after another, uniform over 1..min(3, remaining); the goal alone in
  a final layer.
* D14 the goal has a single AND option; duplicate option sets are dropped; repair adds every
  non-goal sink to the goal's option, so every node leads to the goal.
* D11 names: distinct random [A-Z0-9]{4} tokens; we also require at least one letter and one
  digit (every example in the paper has both), which keeps English words such as "DOWN" or
  "LEFT" out of the names, where they would confuse action parsing.
* D15 size: cells = ceil(N/ρ) with N the number of task nodes (start not counted); (W, H)
  minimises |W/H − aspect|, then W·H, subject to W·H ≥ max(cells, N+1). Aspect 1 gives
  W = H = ceil(sqrt(cells)). ``fixed_size=[W, H]`` overrides (Appendix G, D29).
* D16 carving: for each node (random order) an L-shaped start→node corridor (random elbow
  order) with a w×w brush, w drawn per corridor from the preset's width set; every other cell
  blocked. The brush block's corner is clamped into the box, so the block always holds the
  path cell and the carved region is connected.
* D17 start and node cells: uniform random distinct cells; ``min_spacing`` (Manhattan distance
  between any two of start and nodes, default 0 = none) is an option, by rejection sampling.
* D18 presets: exploration_level high/medium/low ↔ (ρ, widths) = (0.10, {2,3}), (0.25, {1,2,3}),
  (0.40, {1}); dag_level easy/medium/hard ↔ 4/6/8 nodes with the §2.1 probabilities. The paper's
  other names are accepted (dag "small"/"large"; ``exploitation_demand`` low/medium/high).
* Parent weights exp(−β·((D−1)−d)) are rounded to 12 significant digits so that a last-ulp
  difference between platforms' ``exp`` cannot change a draw.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any

from clew.envs.base import Task
from clew.envs.gridmap.instance import Cell, Instance, bfs, build_instance

GENERATOR_VERSION = 1

#: dag_level -> node count (goal included) and the §2.1 probability tables, as [value, p] pairs.
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
#: exploration_level -> node density ρ and corridor widths (D18).
MAP_PRESETS: dict[str, dict[str, Any]] = {
    "high": {"density": 0.10, "widths": [2, 3]},
    "medium": {"density": 0.25, "widths": [1, 2, 3]},
    "low": {"density": 0.40, "widths": [1]},
}
EXPLORATION_LEVELS = ("high", "medium", "low")
DAG_LEVELS = ("easy", "medium", "hard")
_DAG_ALIASES = {"small": "easy", "large": "hard"}
_DEMAND_TO_LEVEL = {"low": "high", "medium": "medium", "high": "low"}

_KNOWN_PARAMS = {
    "exploration_level", "exploitation_demand", "dag_level", "alpha", "beta", "aspect",
    "fixed_size", "min_spacing", "num_nodes", "density", "widths", "max_layer_size",
}
_NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def generate_task(params: dict[str, Any], seed: int) -> Task:
    """The registered generator: ``params`` names the presets (and optional overrides)."""
    inst = generate_instance(params, seed)
    p = inst.presets
    return Task(env="gridmap", params=inst.to_params(), seed=seed,
                id=f"gridmap-{p['exploration_level']}-{p['dag_level']}-s{seed}")


def resolve_presets(params: dict[str, Any]) -> dict[str, Any]:
    """Fill in the preset tables for the requested levels; unknown keys are an error."""
    if not isinstance(params, dict):
        raise ValueError(f"gridmap generator params must be an object, got {type(params).__name__}")
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
    for key in ("alpha", "beta", "aspect", "fixed_size", "min_spacing", "num_nodes", "density",
                "widths", "max_layer_size"):
        if key in params and params[key] is not None:
            out[key] = params[key]
    _check_presets(out)
    out["generator_version"] = GENERATOR_VERSION
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
    fs = p["fixed_size"]
    if fs is not None and (not isinstance(fs, (list, tuple)) or len(fs) != 2
                           or not all(isinstance(v, int) and v >= 1 for v in fs)):
        raise bad("fixed_size", "must be [W, H] with positive integers")


def generate_instance(params: dict[str, Any], seed: int) -> Instance:
    """spec_000 §2.3: DAG, names, grid size, placement, carving; B = alpha·|M|."""
    p = resolve_presets(params)
    n_nodes = p["num_nodes"]
    base = f"clew/gridmap/v{GENERATOR_VERSION}/{int(seed)}/{p['dag_level']}"
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
                                     int(p["min_spacing"]))
    dag = {names[u]: [[names[v] for v in option] for option in prereq[u]] for u in range(n_nodes)}
    return build_instance(width, height, cells, start, dag,
                          {names[u]: loc[u] for u in range(n_nodes)}, names[goal],
                          alpha=p["alpha"], seed=int(seed), presets=p,
                          generator_version=GENERATOR_VERSION)


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
    """Layers, DNF prerequisites and repair (§2.3 steps 1–3). Node ids: layers first, goal last."""
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
                if option not in options:  # D14: drop duplicate option sets
                    options.append(option)
            prereq[u] = options
    prereq[goal] = [draw(sample_count(rng, p["goal_dependency_count_probs"]), depth[goal])]

    # D14 repair: every non-goal sink joins the goal's (single) option.
    has_child = {v for opts in prereq for o in opts for v in o}
    for v in range(goal):
        if v not in has_child and v not in prereq[goal][0]:
            prereq[goal][0].append(v)
    prereq[goal][0].sort()
    return prereq, goal


def sample_names(rng: random.Random, count: int) -> list[str]:
    """Distinct [A-Z0-9]{4} tokens with at least one letter and one digit (D11)."""
    names: list[str] = []
    while len(names) < count:
        token = "".join(rng.choice(_NAME_CHARS) for _ in range(4))
        if (any(c.isdigit() for c in token) and any(c.isalpha() for c in token)
                and token not in names):
            names.append(token)
    return names


# --- map ---------------------------------------------------------------------------------------
def grid_size(p: dict[str, Any], n_nodes: int) -> tuple[int, int]:
    """D15: (W, H) from the node density and aspect ratio, or the fixed size."""
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
                 min_spacing: int = 0) -> tuple[Cell, list[Cell], frozenset[Cell]]:
    """D16–D17: place start and nodes, carve L-shaped w×w corridors start→node."""
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
        w = min(rng.choice(widths), width, height)
        x_first = rng.random() < 0.5
        for (x, y) in l_path(start, loc[u], x_first):
            cx, cy = min(x, width - w), min(y, height - w)
            carved.update((cx + i, cy + j) for i in range(w) for j in range(w))
    cells = frozenset(carved)
    reached = bfs(cells, start)
    assert reached.keys() == cells, "carving left a disconnected cell"  # by construction
    return start, loc, cells


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
