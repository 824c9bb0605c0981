"""HillSearch (docs/methods/envs.md#hillsearch): find the tall, narrow needle among Gaussian decoys on [0, 10].

``f(x) = Σ h·exp(−(x − c)² / D)`` with ``D = w`` (the paper's literal formula) or ``D = 2w``.
docs/methods/metric-best-found.md#decisions ``denominator`` is a task parameter, default ``"2w"``: only that reading reproduces the
paper's own baseline figures; ``"w"`` is available for the literal formula.

Decisions recorded here:
* docs/methods/envs.md#hillsearch the needle's odd fine-grid index is drawn uniformly; decoy heights uniform on
  {1..5}; random draws in the order: per decoy (centre jitter, height), then the needle (index,
  jitter).
* [D, docs/methods/envs.md#hillsearch] the fixed instances H-B2 and H-E3 are used verbatim; H-E3's missing seventh
  width is 0.1.
* docs/methods/envs.md#hillsearch a query is a real x in [0, 10]; NaN, infinities and out-of-range values are invalid;
  values are printed with 4 decimals; repeats are allowed and cost budget.
* docs/methods/metric-best-found.md#optimum-per-family the optimum: f on a grid whose step is a tenth of the narrowest hill's standard
  deviation (at most 1e-3), all grid local maxima and hill centres as candidates, each refined by
  golden-section search within ±1 grid step; cached per instance.
"""

from __future__ import annotations

import math
import random
import re
from functools import lru_cache
from typing import Any

import numpy as np
from clew.envs.base import Task
from clew.envs.oracle_search import prompts
from clew.envs.oracle_search.protocol import (
    OracleSearchEnv,
    read_number,
)

LO, HI = 0.0, 10.0
DENOMINATORS = {"w": 1.0, "2w": 2.0}
_X = re.compile(r"\bx\s*[=:]\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)", re.IGNORECASE)
Hill = tuple[float, float, float]  # (centre c, width w, height h)

# docs/methods/envs.md#hillsearch: the paper's explicit instances (decoys first, needle last).
H_B2: list[Hill] = [
    (1.33, 0.1, 1), (2.77, 0.2, 5), (4.01, 0.1, 2), (5.31, 0.1, 1), (6.45, 0.1, 2),
    (7.82, 0.2, 3), (8.95, 0.1, 4), (1.3, 0.01, 20),
]
H_E3: list[Hill] = [
    (1.28, 0.1, 1), (2.65, 0.1, 2), (3.83, 0.1, 4), (5.11, 0.1, 1), (6.44, 0.1, 2),
    (7.6, 0.1, 3), (8.77, 0.1, 4), (6.2, 0.01, 20),
]
FIXED = {"H-B2": H_B2, "H-E3": H_E3}

#: generator defaults: the paper's generated settings (E.4/E.5) with k=3, k'=4
DEFAULTS: dict[str, Any] = {
    "k": 3, "k_needle": 4, "j_decoy": 0.1, "j_needle": 0.2, "alpha_decoy": 0.01,
    "alpha_needle": 0.008, "needle_height": 20.0, "decoy_heights": [1, 5],
    "denominator": "2w", "budget": 48,
}


# --- the hidden function ------------------------------------------------------------------------

def hill_value(x: float, hills: list[Hill], denominator: str = "2w") -> float:
    """f(x), the sum of all hills (docs/methods/envs.md#hillsearch)."""
    d = DENOMINATORS[denominator]
    return float(sum(h * math.exp(-((x - c) ** 2) / (d * w)) for c, w, h in hills))


def hill_values(xs: np.ndarray, hills: list[Hill], denominator: str = "2w") -> np.ndarray:
    d = DENOMINATORS[denominator]
    out = np.zeros_like(xs, dtype=float)
    for c, w, h in hills:
        out += h * np.exp(-((xs - c) ** 2) / (d * w))
    return out


def hill_optimum(hills: list[Hill], denominator: str = "2w") -> tuple[float, float]:
    """(argmax x, max f) over [0, 10] (docs/methods/metric-best-found.md#optimum-per-family), cached per instance."""
    key = tuple((float(c), float(w), float(h)) for c, w, h in hills)
    return _optimum(key, denominator)


@lru_cache(maxsize=4096)
def _optimum(hills: tuple[Hill, ...], denominator: str) -> tuple[float, float]:
    d = DENOMINATORS[denominator]
    sigma = min(math.sqrt(d * w / 2.0) for _, w, _ in hills)
    step = min(1e-3, sigma / 10.0)
    n = math.ceil((HI - LO) / step) + 1
    xs = np.linspace(LO, HI, n)
    step = xs[1] - xs[0]
    ys = hill_values(xs, list(hills), denominator)
    # grid local maxima (endpoints compare with their one neighbour)
    left = np.concatenate(([-np.inf], ys[:-1]))
    right = np.concatenate((ys[1:], [-np.inf]))
    cand = list(xs[(ys >= left) & (ys >= right)])
    cand += [min(HI, max(LO, c)) for c, _, _ in hills]
    cand.sort(key=lambda x: -hill_value(x, list(hills), denominator))
    best_x, best_y = LO, -math.inf
    for x0 in cand[:64]:
        x, y = _golden(lambda x: hill_value(x, list(hills), denominator),
                       max(LO, x0 - step), min(HI, x0 + step))
        if y > best_y:
            best_x, best_y = x, y
    return float(best_x), float(best_y)


def _golden(f, a: float, b: float, iters: int = 80) -> tuple[float, float]:
    """Maximise a unimodal ``f`` on [a, b]; also compares the end points."""
    g = (math.sqrt(5) - 1) / 2
    ends = [(a, f(a)), (b, f(b))]
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc >= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    mid = (a + b) / 2
    return max([(mid, f(mid)), *ends], key=lambda p: p[1])


# --- generator (Appendix B.1) -------------------------------------------------------------------

def generate_hills(k: int, k_needle: int, j_decoy: float, j_needle: float, alpha_decoy: float,
                   alpha_needle: float, rng: random.Random, needle_height: float = 20.0,
                   decoy_heights: tuple[int, int] = (1, 5)) -> list[Hill]:
    """2^k − 1 jittered decoys on the interior coarse grid plus one needle at an odd fine index."""
    dk = (HI - LO) / 2 ** k
    hills: list[Hill] = []
    for m in range(1, 2 ** k):
        c = LO + m * dk + rng.uniform(-j_decoy * dk, j_decoy * dk)
        hills.append((c, alpha_decoy * dk, rng.randint(decoy_heights[0], decoy_heights[1])))
    dkn = (HI - LO) / 2 ** k_needle
    m_star = rng.choice(range(1, 2 ** k_needle, 2))
    c = LO + m_star * dkn + rng.uniform(-j_needle * dkn, j_needle * dkn)
    hills.append((c, alpha_needle * dkn, needle_height))
    return hills


def generate_task(params: dict[str, Any], seed: int = 0) -> Task:
    """HillSearch task. ``params``: generator parameters (see ``DEFAULTS``), ``budget``, and
    optionally ``instance`` (``"H-B2"``/``"H-E3"``: the fixed lists) or ``hills`` (an explicit list
    of [c, w, h]); ``id``/``split`` name the task."""
    p = dict(params)
    task_id, split = str(p.pop("id", "")), str(p.pop("split", "test"))
    known = set(DEFAULTS) | {"instance", "hills", "protocol"}
    unknown = set(p) - known
    if unknown:
        raise ValueError(f"hillsearch generator: unknown parameter(s) {sorted(unknown)}; "
                         f"known: {sorted(known)}")
    cfg = {**DEFAULTS, **p}
    denom = cfg["denominator"]
    if denom not in DENOMINATORS:
        raise ValueError(f"hillsearch: denominator must be 'w' or '2w', got {denom!r}")
    out: dict[str, Any] = {"denominator": denom, "budget": cfg["budget"]}
    if "protocol" in p:
        out["protocol"] = p["protocol"]
    if "instance" in p:
        name = p["instance"]
        if name not in FIXED:
            raise ValueError(f"hillsearch: unknown instance {name!r}; known: {sorted(FIXED)}")
        out["instance"], hills = name, FIXED[name]
    elif "hills" in p:
        hills = [tuple(float(v) for v in h) for h in p["hills"]]
    else:
        k, kn = _int(cfg, "k", 1), _int(cfg, "k_needle", 1)
        if kn < k:
            raise ValueError(f"hillsearch: k_needle ({kn}) must be >= k ({k})")
        for name in ("j_decoy", "j_needle"):
            if not 0 <= float(cfg[name]) < 1:
                raise ValueError(f"hillsearch: {name} must be in [0, 1), got {cfg[name]!r}")
        for name in ("alpha_decoy", "alpha_needle", "needle_height"):
            if not float(cfg[name]) > 0:
                raise ValueError(f"hillsearch: {name} must be > 0, got {cfg[name]!r}")
        lo, hi = (int(v) for v in cfg["decoy_heights"])
        if not 0 < lo <= hi:
            raise ValueError("hillsearch: decoy_heights must be [lo, hi] with 0 < lo <= hi")
        hills = generate_hills(k, kn, float(cfg["j_decoy"]), float(cfg["j_needle"]),
                               float(cfg["alpha_decoy"]), float(cfg["alpha_needle"]),
                               random.Random(seed), float(cfg["needle_height"]), (lo, hi))
        out["generator"] = {name: cfg[name] for name in DEFAULTS
                            if name not in ("denominator", "budget")}
    _check_hills(hills)
    out["hills"] = [list(h) for h in hills]
    return Task(env="hillsearch", params=out, seed=seed, id=task_id, split=split)


def _int(cfg: dict[str, Any], name: str, low: int) -> int:
    v = cfg[name]
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"hillsearch: {name} must be an integer >= {low}, got {v!r}")
    return v


def _check_hills(hills: list[Hill]) -> None:
    if not hills:
        raise ValueError("hillsearch: an instance needs at least one hill")
    for i, (c, w, h) in enumerate(hills):
        if not (math.isfinite(c) and w > 0 and h > 0):
            raise ValueError(f"hillsearch: hill {i} (c={c}, w={w}, h={h}) needs w > 0 and h > 0")


# --- the environment ----------------------------------------------------------------------------

class HillSearchEnv(OracleSearchEnv):
    """docs/methods/envs.md#hillsearch: query a real x in [0, 10], receive f(x); score max f(x) / max f."""

    name = "hillsearch"
    family = "hill"
    memory_min_score = 0.93      # docs/methods/reflection-memory.md#scores

    def random_action(self, rng: random.Random) -> str:
        """A uniformly random query, x ~ U[0, 10]."""
        return f"x={rng.uniform(0.0, 10.0)!r}"

    def _load(self, task: Task) -> None:
        params = task.params
        try:
            self.hills = [tuple(float(v) for v in h) for h in params["hills"]]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"hillsearch task {task.id!r}: params.hills must be a list of "
                             "[c, w, h]") from None
        _check_hills(self.hills)
        self.denominator = params.get("denominator", "2w")
        if self.denominator not in DENOMINATORS:
            raise ValueError(f"hillsearch task {task.id!r}: denominator must be 'w' or '2w'")
        self._opt = hill_optimum(self.hills, self.denominator)

    @property
    def optimum(self) -> float:
        return self._opt[1]

    def oracle(self) -> dict[str, Any]:
        return {"optimum": self._opt[1], "argmax": self._opt[0], "hills": self.hills,
                "denominator": self.denominator}

    answer_text = prompts.HILL_ANSWER
    help_text = prompts.HILL_HELP

    def system_prompt(self) -> str:
        return prompts.hill_system()

    def response_schema(self) -> dict[str, Any]:
        return prompts.hill_schema()

    def _first_text(self) -> str:
        return prompts.hill_first(self.n_queries)

    def _parse(self, text: str) -> tuple[float | None, str | None]:
        return read_number(text, "x", _X, r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*",
                           "<number between 0 and 10>")

    def _validate(self, x: float) -> str | None:
        if not LO <= x <= HI:
            return f"x={prompts.format_x(x)} is outside the domain [0, 10]"
        return None

    def _evaluate(self, x: float) -> float:
        return hill_value(x, self.hills, self.denominator)

    def _canon(self, x: float) -> str:
        return f"x={prompts.format_x(x)}"

    def _shown(self, value: float) -> float:
        return round(value, 4)

    def _feedback(self, x: float, value: float) -> str:
        return prompts.hill_feedback(x, value, self.remaining)

    def handoff_message(self) -> str:
        return prompts.hill_handoff(self.state.history, self.remaining)

