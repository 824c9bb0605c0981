"""MaxSatSearch (docs/methods/envs.md#maxsatsearch): a hidden weighted set of AND-clauses with one heavy gold clause.

A clause is satisfied iff *all* its literals are true (not CNF). The planted assignment x*
satisfies every clause, so OPT = m (clauses counted with multiplicity; the gold clause weighs
``w_gold``). The gold variables appear in no other clause, so nothing but trying their
assignments finds it.

Decisions recorded here:
* [D, docs/methods/envs.md#maxsatsearch] random draws in order: x* bit by bit (x0 first), the gold variables (a uniform
  ``k_gold``-subset), then each of the ``m − w_gold`` other clauses as ``k_other`` distinct
  variables drawn uniformly from the non-gold ones; duplicate clauses are allowed.
* docs/methods/envs.md#maxsatsearch a query is a full assignment; missing, unknown or non-0/1 variables are invalid.
  Keys are read case-insensitively and ``x_3`` is read as ``x3``; the canonical action is the
  bitstring ``bits=b0b1...`` with x0 leftmost (also accepted as input).
* docs/methods/envs.md#maxsatsearch the paper lists no clauses: the fixed instances are generated from published seeds
  (see ``clew.envs.oracle_search.suites``).
"""

from __future__ import annotations

import random
import re
from typing import Any

from clew.envs.base import Task
from clew.envs.oracle_search import prompts
from clew.envs.oracle_search.protocol import (
    OracleSearchEnv,
    find_query,
    finish_task,
    generator_config,
    last_match,
    strip_fences,
)

Clause = list[tuple[int, int]]  # (variable, required value)

#: generator defaults: the main instance M-main (B.2)
DEFAULTS: dict[str, Any] = {"n": 15, "m": 120, "k_gold": 4, "k_other": 2, "w_gold": 80,
                            "budget": 48}

#: docs/methods/envs.md#maxsatsearch the paper's instances
_BITS = re.compile(r"\bbits\s*[=:]\s*\"?([01]+)\b", re.IGNORECASE)

FIXED = {
    "M-main": {"n": 15, "m": 120, "k_gold": 4, "k_other": 2, "w_gold": 80},
    "M-alt1": {"n": 15, "m": 135, "k_gold": 4, "k_other": 2, "w_gold": 90},
    "M-alt2": {"n": 15, "m": 150, "k_gold": 4, "k_other": 2, "w_gold": 100},
    "M-alt3": {"n": 15, "m": 165, "k_gold": 4, "k_other": 2, "w_gold": 110},
}


def build_formula(n: int, m: int, k_gold: int, k_other: int, w_gold: int,
                  rng: random.Random) -> dict[str, Any]:
    """Planted x*, the gold clause (weight ``w_gold``) and ``m − w_gold`` unit-weight clauses."""
    planted = [rng.randint(0, 1) for _ in range(n)]
    gold = sorted(rng.sample(range(n), k_gold))
    rest = [v for v in range(n) if v not in set(gold)]
    clauses = [[[v, planted[v]] for v in gold]]
    weights = [w_gold]
    for _ in range(m - w_gold):
        clauses.append([[v, planted[v]] for v in sorted(rng.sample(rest, k_other))])
        weights.append(1)
    return {"n": n, "clauses": clauses, "weights": weights,
            "planted": "".join(str(b) for b in planted), "gold": gold}


def score(bits: str | list[int], clauses: list[Clause], weights: list[int]) -> int:
    """Total weight of the clauses that ``bits`` satisfies (x0 = bits[0])."""
    vals = [int(b) for b in bits]
    return sum(w for clause, w in zip(clauses, weights)
               if all(vals[v] == want for v, want in clause))


def generate_task(params: dict[str, Any], seed: int = 0) -> Task:
    """MaxSatSearch task. ``params``: ``n, m, k_gold, k_other, w_gold, budget`` (defaults:
    M-main) or ``instance`` (``M-main``, ``M-alt1..3``); ``id``/``split`` name it."""
    cfg, p, task_id, split = generator_config("maxsatsearch", params, DEFAULTS, FIXED)
    for name in DEFAULTS:
        v = cfg[name]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"maxsatsearch: {name} must be a positive integer, got {v!r}")
    n, m, kg, ko, wg = (cfg[k] for k in ("n", "m", "k_gold", "k_other", "w_gold"))
    if kg > n:
        raise ValueError(f"maxsatsearch: k_gold ({kg}) exceeds n ({n})")
    if wg > m:
        raise ValueError(f"maxsatsearch: w_gold ({wg}) exceeds m ({m})")
    if m > wg and ko > n - kg:
        raise ValueError(f"maxsatsearch: k_other ({ko}) exceeds the {n - kg} non-gold variables")
    return finish_task("maxsatsearch", build_formula(n, m, kg, ko, wg, random.Random(seed)), p,
                       cfg, DEFAULTS, seed, task_id, split)


class MaxSatSearchEnv(OracleSearchEnv):
    """docs/methods/envs.md#maxsatsearch: query a full 0/1 assignment; receive the weight of the satisfied clauses."""

    name = "maxsatsearch"
    family = "maxsat"
    memory_min_score = 0.96      # docs/methods/reflection-memory.md#scores

    def random_action(self, rng: random.Random) -> str:
        """A uniformly random assignment."""
        return "bits=" + "".join(rng.choice("01") for _ in range(self.n))

    def _load(self, task: Task) -> None:
        params = task.params
        try:
            self.n = int(params["n"])
            self.clauses = [[(int(v), int(b)) for v, b in c] for c in params["clauses"]]
            self.weights = [int(w) for w in params["weights"]]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"maxsatsearch task {task.id!r}: params need n, clauses "
                             "([[var, value], ...] lists) and weights") from None
        if len(self.weights) != len(self.clauses) or self.n < 1:
            raise ValueError(f"maxsatsearch task {task.id!r}: clauses and weights differ in length")
        for i, c in enumerate(self.clauses):
            if not c or any(not 0 <= v < self.n or b not in (0, 1) for v, b in c):
                raise ValueError(f"maxsatsearch task {task.id!r}: clause {i} is malformed")
        self.m = sum(self.weights)
        self.max_literals = max(len(c) for c in self.clauses)
        self._opt = float(self._best_possible(params))

    def _best_possible(self, params: dict[str, Any]) -> int:
        """OPT = m when the planted assignment satisfies everything (always, for generated
        tasks); otherwise the planted score, or the brute-force optimum for small n."""
        planted = params.get("planted")
        if planted is not None and score(planted, self.clauses, self.weights) == self.m:
            return self.m
        if self.n <= 20:
            return max(score(format(i, f"0{self.n}b"), self.clauses, self.weights)
                       for i in range(2 ** self.n))
        raise ValueError(f"maxsatsearch task {self.task.id!r}: the optimum is unknown "
                         "(no planted assignment satisfying every clause, and n > 20)")

    @property
    def optimum(self) -> float:
        return self._opt

    def oracle(self) -> dict[str, Any]:
        return {"optimum": self._opt, "planted": self.task.params.get("planted"),
                "gold": self.task.params.get("gold")}

    def system_prompt(self) -> str:
        if self.task is None:
            raise ValueError("maxsatsearch: instructions name n and m of the task; reset first")
        return prompts.maxsat_system(self.n, self.m, self.max_literals)

    def answer_format(self) -> str:
        return prompts.maxsat_answer(self.n)

    def action_help(self) -> str:
        return prompts.maxsat_help(self.n)

    def response_schema(self) -> dict[str, Any]:
        return prompts.maxsat_schema(self.n)

    def _first_text(self) -> str:
        return prompts.maxsat_first(self.n_queries, self.m)

    def _feedback(self, bits: str, value: float) -> str:
        return prompts.maxsat_feedback(int(value), self.remaining)

    def handoff_message(self) -> str:
        return prompts.maxsat_handoff([(b, int(s)) for b, s in self.state.history], self.n,
                                      self.remaining)

    # --- queries -------------------------------------------------------------------------
    def _parse(self, text: str) -> tuple[str | None, str | None]:
        text = strip_fences(text)
        q = find_query(text, lambda o: any(_var(k) is not None for k in o) or "bits" in o)
        if q is not None:
            return self._from_object(q)
        m = last_match(_BITS, text) or \
            re.fullmatch(r"\s*([01]+)\s*", text)
        if m is not None:
            return self._from_bits(m.group(1))
        pairs = re.findall(r"\bx_?(\d+)\s*[=:]\s*(\w+)", text, re.IGNORECASE)
        if pairs:
            return self._from_object({f"x{i}": v for i, v in pairs})
        return None, (f'could not read a query; answer with {{"reason": "...", "query": '
                      f'{{"x0": 0|1, ..., "x{self.n - 1}": 0|1}}}}')

    def _from_bits(self, bits: str) -> tuple[str | None, str | None]:
        if len(bits) != self.n:
            return None, f"the assignment has {len(bits)} bits; there are {self.n} variables"
        return bits, None

    def _from_object(self, q: dict[str, Any]) -> tuple[str | None, str | None]:
        if "bits" in q and isinstance(q["bits"], str):
            return self._from_bits(q["bits"].strip())
        values: dict[int, int] = {}
        unknown, bad = [], []
        for key, raw in q.items():
            i = _var(key)
            if i is None or i >= self.n:
                unknown.append(str(key))
                continue
            b = _bit(raw)
            if b is None:
                bad.append(f"x{i}={raw!r}")
            values[i] = -1 if b is None else b
        if unknown:
            return None, f"unknown variable(s) {', '.join(unknown)}; use x0..x{self.n - 1}"
        if bad:
            return None, f"values must be 0 or 1: {', '.join(bad)}"
        missing = [f"x{i}" for i in range(self.n) if i not in values]
        if missing:
            return None, f"missing variable(s) {', '.join(missing)}"
        return "".join(str(values[i]) for i in range(self.n)), None

    def _validate(self, bits: str) -> str | None:
        return None

    def _evaluate(self, bits: str) -> float:
        return float(score(bits, self.clauses, self.weights))

    def _canon(self, bits: str) -> str:
        return f"bits={bits}"

    def _shown(self, value: float) -> int:
        return int(value)


def _var(key: Any) -> int | None:
    m = re.fullmatch(r"x_?(\d+)", str(key).strip().lower())
    return int(m.group(1)) if m else None


def _bit(raw: Any) -> int | None:
    if isinstance(raw, bool):
        return int(raw)
    if isinstance(raw, int) and raw in (0, 1):
        return raw
    if isinstance(raw, float) and raw in (0.0, 1.0):
        return int(raw)
    if isinstance(raw, str) and raw.strip().lower() in ("0", "1", "true", "false"):
        return {"0": 0, "1": 1, "true": 1, "false": 0}[raw.strip().lower()]
    return None
