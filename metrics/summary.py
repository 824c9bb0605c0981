"""Aggregate episode records into ``metrics.json`` and a plain-text/markdown summary table.

Per-episode ratios first, then means over episodes ignoring undefined (null/NaN) values, with
standard errors and counts (docs/methods/metric-explore-exploit-error.md#aggregation). "Steps" is reported over successful episodes
(docs/methods/metric-explore-exploit-error.md#aggregation) and over all episodes.

No silent failure (docs/methods/parsing.md#reporting): the aggregate holds each role's parse
failures pooled over the run's outputs (``parse_failures``: outputs, failures, rate, model) and
the episodes that ended on the model's context (``context_length_failures``); the summary table
shows both.
"""

from __future__ import annotations

import math
from typing import Any

from clew.agents.parsing import ParseTally
from clew.envs.measures import is_number, mean_and_stderr

# Headline metrics shown in the summary when any run has them, in this order.
HEADLINE = [
    ("exploration_error", "explore err"),
    ("exploitation_error", "exploit err"),
    ("normalized_reward", "norm. reward"),
    ("gap_total", "gap total"),
    ("gap_exploration", "gap explore"),
    ("gap_exploitation", "gap exploit"),
    ("coverage", "coverage"),
    ("backtracks", "backtracks"),  # recorded for agents that may backtrack only (runner/episodes.py)
    ("peeked_states", "peeked states"),  # seen only inside a search's simulator (docs/methods/mcts.md#free-and-charged-simulation)
]


def _numbers(d: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in d.items() if is_number(v) or isinstance(v, bool)}


def episode_numbers(record: dict[str, Any]) -> dict[str, float]:
    """The numeric facts of one episode record: outcome, metrics, usage, interactions."""
    out = _numbers(record.get("outcome", {}))
    out.update(_numbers(record.get("metrics", {})))
    usage = record.get("usage", {})
    out["prompt_tokens"] = float(sum(u.get("prompt_tokens", 0) for u in usage.values()))
    out["completion_tokens"] = float(sum(u.get("completion_tokens", 0) for u in usage.values()))
    out["tokens"] = out["prompt_tokens"] + out["completion_tokens"]
    out["lm_calls"] = float(sum(u.get("calls", 0) for u in usage.values()))
    out.update(compute_numbers(record))
    for kind, n in record.get("interactions", {}).items():
        out[f"interactions_{kind}"] = float(n)
    out["wall_s"] = float(record.get("wall_s", 0.0))
    out["parse_failures"] = float(sum(p.get("failures", 0)
                                      for p in record.get("parses", {}).values()))
    out["context_length_failure"] = float(
        record.get("outcome", {}).get("stopped_by") == "context_length")
    return out


#: per-role compute fields of a record (docs/methods/recording.md#compute-accounting)
COMPUTE_FIELDS = ("engine_s", "busy_s", "gpu_s", "cached_tokens")


def compute_numbers(record: dict[str, Any]) -> dict[str, float]:
    """An episode's compute summed over its roles; a field is left out (undefined) when a role
    that called a model does not know it (a server's GPUs, a backend that does not report
    cache hits, a record written before compute was recorded). No LM call costs nothing."""
    calls = [role for role, u in (record.get("usage") or {}).items() if u.get("calls")]
    compute = record.get("compute") or {}
    out = {}
    for f in COMPUTE_FIELDS:
        values = [(compute.get(role) or {}).get(f) for role in calls]
        if all(is_number(v) for v in values):
            out[f] = float(sum(values))
    return out


def parse_failures(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{role: {outputs, failures, rate, model}}`` pooled over the records' outputs."""
    tally = ParseTally()
    for r in records:
        tally.merge(r.get("parses", {}))
    return {role: {"outputs": p.outputs, "failures": p.failures, "rate": p.rate,
                   "model": p.model} for role, p in sorted(tally.items())}


def aggregate(records: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"episodes": n, "agent": ..., "mean": {...}, "stderr": {...}, "n": {...}}``."""
    per = [episode_numbers(r) for r in records]
    keys = sorted({k for p in per for k in p})
    mean, stderr, count = {}, {}, {}
    for k in keys:
        mean[k], stderr[k], count[k] = mean_and_stderr([p.get(k, math.nan) for p in per])
    succ = [p["steps"] for p in per if p.get("success") == 1.0 and "steps" in p]
    mean["steps_success"], stderr["steps_success"], count["steps_success"] = mean_and_stderr(succ)
    roles: dict[str, dict[str, float]] = {}
    for r in records:
        compute = r.get("compute") or {}
        for role, u in r.get("usage", {}).items():
            acc = roles.setdefault(role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
            for f in ("calls", "prompt_tokens", "completion_tokens"):
                acc[f] += u.get(f, 0)
            for f, v in (compute.get(role) or {}).items():
                if f in COMPUTE_FIELDS and is_number(v):
                    acc[f] = acc.get(f, 0) + v
    agents = sorted({r.get("agent", "?") for r in records})
    kinds = sorted({r.get("agent_kind", "?") for r in records})
    return {
        "episodes": len(records), "agent": ",".join(agents), "agent_kind": ",".join(kinds),
        "mean": mean, "stderr": stderr, "n": count,
        "usage_by_role": {role: {k: v / max(len(records), 1) for k, v in u.items()}
                          for role, u in roles.items()},
        "parse_failures": parse_failures(records),
        "context_length_failures": sum(
            1 for r in records if r.get("outcome", {}).get("stopped_by") == "context_length"),
    }


def by_task(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Aggregates per task id (repeats pooled): suites that mix families or budgets, such as
    ``paper-003-main``, are read per task."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(r.get("task", {}).get("id", "?"), []).append(r)
    return {tid: aggregate(rs) for tid, rs in sorted(groups.items())}


def by_env(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Records grouped by environment (``task.env``): a suite like ``exploration-v1`` mixes envs
    whose metrics mean different things, so comparisons are read per env."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(r.get("task", {}).get("env", "?"), []).append(r)
    return dict(sorted(groups.items()))


def metrics_document(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "aggregate": aggregate(records),
        "by_task": by_task(records),
        "episodes": {r["key"]: episode_numbers(r) for r in records},
    }


def _fmt(mean: float, se: float | None = None, digits: int = 3) -> str:
    if mean is None or not math.isfinite(mean):
        return "-"
    text = f"{mean:.{digits}f}"
    if se is not None and math.isfinite(se):
        text += f" ± {se:.{digits}f}"
    return text


def parse_cell(failures: dict[str, dict[str, Any]]) -> str:
    """``policy 2% (3/150), judge 41% (...)``: every role that read outputs, or ``-``."""
    return ", ".join(f"{role} {p['rate']:.0%} ({p['failures']}/{p['outputs']})"
                     for role, p in failures.items() if p["outputs"]) or "-"


def summary_table(rows: list[tuple[str, dict[str, Any]]], label: str = "run") -> str:
    """Markdown table, one row per ``(name, aggregate)``; ``label`` heads the name column
    (``run``, or ``task`` for the per-task table)."""
    present = [(k, title) for k, title in HEADLINE
               if any(math.isfinite(agg["mean"].get(k, math.nan)) for _, agg in rows)]
    header = [label, "agent", "kind", "episodes", "success", "steps (succ.)"]
    header += [title for _, title in present] + ["tokens/ep", "sim. interactions/ep",
                                                 "parse fail", "ctx fail"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, agg in rows:
        m, se = agg["mean"], agg["stderr"]
        cells = [name, agg["agent"], agg["agent_kind"], str(agg["episodes"]),
                 _fmt(m.get("success", math.nan), se.get("success"), 2),
                 _fmt(m.get("steps_success", math.nan), None, 1)]
        cells += [_fmt(m.get(k, math.nan), se.get(k)) for k, _ in present]
        cells += [_fmt(m.get("tokens", math.nan), None, 0),
                  _fmt(m.get("interactions_simulated", math.nan), None, 1),
                  parse_cell(agg.get("parse_failures", {})),
                  str(agg.get("context_length_failures", 0))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
