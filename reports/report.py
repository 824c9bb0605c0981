"""``clew report RUN... [--out DIR] [--react RUN]``: tables and plots comparing runs (docs/scale-out.md#reading-results).

Reads run directories (layout in :mod:`clew.records.rundir`), aggregates their episode records with
:mod:`clew.metrics.summary` (per-episode values first, then means ignoring undefined values, with
standard errors; docs/methods/metric-explore-exploit-error.md#aggregation) and writes into ``DIR``::

    report.md            every table in markdown, links to the plots
    report.html          one self-contained page: tables inline, plots as base64 PNG
    report.json          the tables' raw numbers and the regression fits
    tables/NAME.csv      one CSV per table (means and standard errors as separate columns)
    plots/NAME.png       success vs log error with OLS fit and R², compute scaling, gap bars

Tables: ``summary`` (success, exploration/exploitation error, normalised best-found reward, tokens
per task absolute and relative to a ReAct run, LM calls, interactions executed and simulated, wall
time), ``gaps`` (docs/methods/envs.md#dark-treasure-rooms gap decomposition), ``by_level`` (success by difficulty level),
``usage_by_role`` (LM calls, tokens, engine time and cache hits per role), ``compute`` (nodes
per tree and tokens against success), ``cost`` (per run: LM calls, tokens, cache hits, engine and
GPU seconds and, with prices, cost, per episode and per success; docs/methods/recording.md#cost).
The plot ``success_vs_compute`` draws each agent as a curve over its runs (budgets): success
against cost per episode when prices are given, else tokens per episode, with standard errors on
both axes.

Decisions:

* ``DIR`` defaults to the run directory itself for one run (docs/architecture.md#data-on-disk puts ``report.md`` and
  ``plots/`` there) and to ``report/`` next to the first run for several.
* Runs on different suites are still reported, with a warning at the top of the report: a
  comparison across suites is sometimes wanted (seen vs unseen splits), rarely by accident.
* The ReAct run given with ``--react`` is added to the comparison when it is not already one of
  the runs; "tokens vs ReAct" is the ratio of mean tokens per task.
* Difficulty levels: the task parameters each env family declares as levels in its registry
  entry (``EnvEntry.levels``, dotted one dict deep: ``layout.size``), with scalar values and at
  least two distinct values over all episodes; rows follow the families' declaration order
  (families by name).
* Nodes per tree: the search budget from ``agent_options`` (first key of :data:`NODE_KEYS`
  found, nested dicts searched too); without one, measured on the run's saved trees (an even
  sample of at most :data:`MAX_TREES_READ` files): the mean of their ``simulations`` counter
  (the budget units every algorithm counts alike; best-of-N makes several nodes per unit), else
  their mean node count.
* Gap shares are ratios of the mean gaps, one pair of columns (the per-run averaging of
  docs/methods/envs.md#dark-treasure-rooms needs several runs per agent; the metric's own per-episode shares stay in
  ``metrics.json``: four share columns side by side read as a puzzle).
* HTML tables fit a 1400 px window for the usual column set: headers wrap, a standard error
  sits under its mean, one shared suite is named once; a wider table scrolls inside its own
  box, so nothing is cut off.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clew.agents.lm.recording import recording_size
from clew.envs import registry
from clew.envs.measures import mean_and_stderr
from clew.metrics.summary import aggregate, episode_numbers
from clew.records import RunDir, atomic_write_bytes, atomic_write_text, clean_json
from clew.reports import plots
from clew.reports.diagnose import load as load_diagnosis
from clew.search.tree import TreeFormatError, load_tree_dict

#: agent_options keys read as "nodes per tree", first found wins
NODE_KEYS = ("nodes", "n_nodes", "max_nodes", "n_simulations", "num_simulations", "simulations",
             "budget")
#: natural order of level names (anything else sorts after, alphabetically)
LEVEL_ORDER = ("trivial", "very-easy", "easy", "small", "low", "medium", "mid", "high", "large",
               "hard", "very-hard", "super-hard", "very_hard", "super_hard")
#: (metric key, column label, digits) in the summary table when any run has the metric
METRIC_COLUMNS = (
    ("exploration_error", "explore err", 3),
    ("exploitation_error", "exploit err", 3),
    ("normalized_reward", "norm. best reward", 3),
    ("coverage", "coverage", 3),
)
GAP_KEYS = ("gap_total", "gap_exploration", "gap_exploitation")
#: at most this many tree files are read to measure nodes per tree
MAX_TREES_READ = 500


class ReportError(ValueError):
    """Runs that cannot be reported; the message names the run directory."""


@dataclass(frozen=True)
class Prices:
    """What compute costs (docs/methods/recording.md#cost): per million prompt and completion
    tokens, per GPU-hour; ``gpus``: the GPUs a model ran on where the run could not know them
    (a server), which turns its busy seconds into GPU-seconds."""

    prompt: float | None = None
    completion: float | None = None
    gpu_hour: float | None = None
    gpus: int | None = None

    def __post_init__(self) -> None:
        for name in ("prompt", "completion", "gpu_hour", "gpus"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ReportError(f"price {name}: must be a number >= 0, got {value!r}")

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.prompt, self.completion, self.gpu_hour))

    def gpu_seconds(self, numbers: dict[str, float]) -> float:
        """An episode's GPU-seconds: as recorded, else its busy seconds times ``gpus``."""
        gpu = numbers.get("gpu_s", math.nan)
        if not math.isfinite(gpu) and self.gpus is not None:
            gpu = numbers.get("busy_s", math.nan) * self.gpus
        return gpu

    def cost(self, numbers: dict[str, float]) -> float:
        """An episode's cost; undefined (NaN) when a price applies to an unknown quantity."""
        total = 0.0
        if self.prompt is not None:
            total += numbers.get("prompt_tokens", math.nan) * self.prompt / 1e6
        if self.completion is not None:
            total += numbers.get("completion_tokens", math.nan) * self.completion / 1e6
        if self.gpu_hour is not None:
            total += self.gpu_seconds(numbers) / 3600 * self.gpu_hour
        return total


# --- data ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stat:
    """A mean with its standard error and count (docs/methods/metric-explore-exploit-error.md#aggregation: undefined values left out)."""

    mean: float
    se: float = math.nan
    n: int = 0

    @classmethod
    def of(cls, values: list[float]) -> Stat:
        return cls(*mean_and_stderr(values))

    @classmethod
    def ratio(cls, num: list[float], den: list[float]) -> Stat:
        """sum(num) / sum(den) over the episodes where both are defined (cost per success: the
        costs over the successes), with the delta-method standard error of a ratio of means."""
        pairs = [(a, b) for a, b in zip(num, den) if math.isfinite(a) and math.isfinite(b)]
        n, total = len(pairs), sum(b for _, b in pairs)
        if not n or total <= 0:
            return cls(math.nan, math.nan, n)
        r = sum(a for a, _ in pairs) / total
        if n < 2:
            return cls(r, math.nan, n)
        resid = sum((a - r * b) ** 2 for a, b in pairs)
        return cls(r, math.sqrt(resid / (n * (n - 1))) / (total / n), n)


@dataclass
class Run:
    name: str
    path: Path
    config: dict[str, Any]
    records: list[dict[str, Any]]
    agg: dict[str, Any] = field(default_factory=dict)
    per_episode: list[dict[str, float]] = field(default_factory=list)
    nodes: tuple[float, str] | None = None   # nodes per tree and its source, once measured

    @property
    def suite(self) -> str:
        return str(self.config.get("suite", "?"))

    def mean(self, key: str) -> float:
        return float(self.agg["mean"].get(key, math.nan))

    def stat(self, key: str) -> Stat:
        return Stat(self.mean(key), float(self.agg["stderr"].get(key, math.nan)),
                    int(self.agg["n"].get(key, 0)))


def load_run(path: str | Path, name: str | None = None) -> Run:
    run_dir = RunDir(path)
    if not run_dir.path.is_dir():
        raise ReportError(f"{run_dir.path}: no such run directory")
    try:
        config = run_dir.config()
        records = run_dir.episodes()
    except (FileNotFoundError, ValueError) as exc:
        raise ReportError(str(exc)) from None
    run = Run(name or run_dir.path.name, run_dir.path, config, records)
    run.agg = aggregate(records)
    run.per_episode = [episode_numbers(r) for r in records]
    return run


def _unique_names(paths: list[Path]) -> list[str]:
    """Directory names; parent/name where two runs share a name."""
    names = [p.name for p in paths]
    return [f"{p.parent.name}/{p.name}" if names.count(p.name) > 1 else p.name for p in paths]


# --- tables ----------------------------------------------------------------------------------
Cell = Any  # str | int | float | Stat | None


@dataclass
class Table:
    """One table: ``rows`` hold raw values; formatting happens per output format."""

    key: str
    title: str
    header: list[str]
    rows: list[list[Cell]]
    digits: list[int] = field(default_factory=list)
    note: str = ""

    def _digits(self, j: int) -> int:
        return self.digits[j] if j < len(self.digits) else 3

    def formatted(self) -> list[list[str]]:
        return [[fmt(c, self._digits(j)) for j, c in enumerate(row)] for row in self.rows]

    def markdown(self) -> str:
        lines = [f"### {self.title}", ""]
        if self.note:
            lines += [self.note, ""]
        lines.append("| " + " | ".join(self.header) + " |")
        lines.append("|" + "---|" * len(self.header))
        for row in self.formatted():
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
        return "\n".join(lines) + "\n"

    def csv(self) -> str:
        stat_cols = {j for row in self.rows for j, c in enumerate(row) if isinstance(c, Stat)}
        header = []
        for j, h in enumerate(self.header):
            header += [h, f"{h} se", f"{h} n"] if j in stat_cols else [h]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        for row in self.rows:
            out = []
            for j, c in enumerate(row):
                if j in stat_cols:
                    s = c if isinstance(c, Stat) else Stat(math.nan)
                    out += [raw(s.mean), raw(s.se), s.n]
                else:
                    out.append(raw(c))
            w.writerow(out)
        return buf.getvalue()

    def html(self) -> str:
        # headers may break after a slash ("tokens/task"), as well as at spaces
        head = "".join(f"<th>{html.escape(h).replace('/', '/<wbr>')}</th>" for h in self.header)
        body = "".join("<tr>" + "".join(f"<td>{html_cell(c, self._digits(j))}</td>"
                                        for j, c in enumerate(row)) + "</tr>"
                       for row in self.rows)
        note = f"<p class='note'>{html.escape(self.note)}</p>" if self.note else ""
        # the wrapper scrolls sideways when a table is still wider than the window: nothing is
        # cut off (headers wrap and standard errors sit under their means, so it rarely is)
        return (f"<section><h2>{html.escape(self.title)}</h2>{note}<div class='table-wrap'>"
                f"<table class='clew-table' id='table-{self.key}'><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody></table></div></section>")

    def to_json(self) -> dict[str, Any]:
        def cell(c: Cell) -> Any:
            return {"mean": c.mean, "se": c.se, "n": c.n} if isinstance(c, Stat) else c
        return {"title": self.title, "header": self.header,
                "rows": [[cell(c) for c in row] for row in self.rows], "note": self.note}


def fmt(c: Cell, digits: int = 3) -> str:
    if c is None:
        return "-"
    if isinstance(c, Stat):
        if not math.isfinite(c.mean):
            return "-"
        text = f"{c.mean:.{digits}f}"
        return text + (f" ± {c.se:.{digits}f}" if math.isfinite(c.se) else "")
    if isinstance(c, bool):
        return str(c)
    if isinstance(c, float):
        return f"{c:.{digits}f}" if math.isfinite(c) else "-"
    return str(c)


def html_cell(c: Cell, digits: int = 3) -> str:
    """A cell for the HTML page: a standard error goes on its own line under the mean."""
    if isinstance(c, Stat) and math.isfinite(c.mean) and math.isfinite(c.se):
        return (f"{c.mean:.{digits}f}<span class='se'>± {c.se:.{digits}f}</span>")
    return html.escape(fmt(c, digits))


def raw(c: Cell) -> Any:
    """CSV value: numbers at full precision, undefined as an empty cell."""
    if c is None or (isinstance(c, float) and not math.isfinite(c)):
        return ""
    return c


def _present(runs: list[Run], key: str) -> bool:
    return any(math.isfinite(r.mean(key)) for r in runs)


def summary_table(runs: list[Run], react: Run | None) -> Table:
    # one suite for all: named in the note and the run list, not repeated in every row
    suites = sorted({r.suite for r in runs})
    with_suite = len(suites) > 1
    header = ["run", "agent", "kind"] + (["suite"] if with_suite else []) + \
        ["episodes", "success", "steps (succ.)"]
    digits = [0, 0, 0] + ([0] if with_suite else []) + [0, 2, 1]
    metric_cols = [(k, label, d) for k, label, d in METRIC_COLUMNS if _present(runs, k)]
    header += [label for _, label, _ in metric_cols]
    digits += [d for _, _, d in metric_cols]
    header += ["tokens/task"] + (["tokens vs ReAct"] if react else [])
    digits += [0] + ([2] if react else [])
    header += ["LM calls/task", "executed/task", "simulated/task", "wall s/task"]
    digits += [1, 1, 1, 2]
    react_tokens = react.mean("tokens") if react else math.nan
    rows = []
    for r in runs:
        row: list[Cell] = [r.name, r.agg["agent"], r.agg["agent_kind"]] + \
            ([r.suite] if with_suite else []) + \
            [r.agg["episodes"], r.stat("success"), r.mean("steps_success")]
        row += [r.stat(k) for k, _, _ in metric_cols]
        row.append(r.stat("tokens"))
        if react:
            ratio = r.mean("tokens") / react_tokens if react_tokens > 0 else math.nan
            row.append(ratio)
        row += [r.mean("lm_calls"), r.mean("interactions_executed"),
                r.mean("interactions_simulated"), r.mean("wall_s")]
        rows.append(row)
    note = " ".join(([] if with_suite else [f"Suite {suites[0]}."]) +
                    ([f"Tokens relative to the ReAct run {react.name!r}."] if react else []))
    return Table("summary", "Summary", header, rows, digits, note)


def gaps_table(runs: list[Run]) -> Table | None:
    """docs/methods/metric-optimal-exploitation-gap.md#gap-decomposition: total = exploration + exploitation gap, each normalised by R^max, and the
    shares of the total that each part is (ratios of the mean gaps, so they add up to 1)."""
    if not any(_present(runs, k) for k in GAP_KEYS):
        return None
    header = ["run", "gap total", "gap exploration", "gap exploitation", "exploration share",
              "exploitation share"]
    rows = []
    for r in runs:
        total, ex, xt = (r.mean(k) for k in GAP_KEYS)
        parts = ex + xt if math.isfinite(ex) and math.isfinite(xt) else math.nan
        denom = total if math.isfinite(total) and total != 0 else parts
        shares = (ex / denom, xt / denom) if math.isfinite(denom) and denom != 0 else (
            math.nan, math.nan)
        rows.append([r.name, r.stat("gap_total"), r.stat("gap_exploration"),
                     r.stat("gap_exploitation"), *shares])
    return Table("gaps", "Gap decomposition (normalised by R^max)", header, rows,
                 [0] + [3] * (len(header) - 1),
                 "exploration / exploitation share: the part of the mean total gap that each "
                 "mean gap is (they add up to 1; undefined where the total gap is 0). Undefined "
                 "values are left out of the means.")


def task_levels(rec: dict[str, Any]) -> dict[str, Any]:
    """The scalar task parameters the record's env family declares as levels."""
    task = rec.get("task") or {}
    params = task.get("params") or {}
    out = {}
    for key in registry.level_keys(str(task.get("env", ""))):
        top, _, sub = key.partition(".")
        value = params.get(top)
        if sub:
            value = value.get(sub) if isinstance(value, dict) else None
        if isinstance(value, (str, int, float, bool)):
            out[key] = value
    return out


def level_keys(runs: list[Run]) -> list[str]:
    envs = sorted({str((rec.get("task") or {}).get("env", "")) for r in runs for rec in r.records})
    values: dict[str, set] = {key: set() for env in envs for key in registry.level_keys(env)}
    for r in runs:
        for rec in r.records:
            for k, v in task_levels(rec).items():
                values[k].add(v)
    return [k for k, vs in values.items() if len(vs) > 1]


_MISSING = object()


def _level_sort(v: Any) -> tuple:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (0, float(v), "")
    s = str(v).lower()
    return (1, LEVEL_ORDER.index(s) if s in LEVEL_ORDER else len(LEVEL_ORDER), s)


def by_level_table(runs: list[Run]) -> Table | None:
    keys = level_keys(runs)
    if not keys:
        return None
    rows = []
    for key in keys:
        levels = sorted({task_levels(rec)[key] for r in runs for rec in r.records
                         if key in task_levels(rec)}, key=_level_sort)
        for level in levels:
            row: list[Cell] = [key, str(level)]
            for r in runs:
                vals = [p.get("success", math.nan) for rec, p in zip(r.records, r.per_episode)
                        if task_levels(rec).get(key, _MISSING) == level]
                row.append(Stat.of(vals))
            rows.append(row)
    header = ["parameter", "level"] + [f"{r.name} success" for r in runs]
    return Table("by_level", "Success by difficulty level", header, rows,
                 [0, 0] + [2] * len(runs), "Mean success ± standard error per level.")


def usage_table(runs: list[Run]) -> Table | None:
    rows = []
    for r in runs:
        for role, u in sorted(r.agg.get("usage_by_role", {}).items()):
            rows.append([r.name, role, u.get("calls", 0.0), u.get("prompt_tokens", 0.0),
                         u.get("completion_tokens", 0.0), u.get("cached_tokens"),
                         u.get("engine_s"), u.get("gpu_s")])
    if not rows:
        return None
    return Table("usage_by_role", "LM calls, tokens and compute per role (per task)",
                 ["run", "role", "calls", "prompt tokens", "completion tokens",
                  "cached prompt tokens", "engine s", "GPU s"], rows, [0, 0, 2, 0, 0, 0, 2, 2],
                 "Cached prompt tokens: served by the engine's prefix cache, where the backend "
                 "tells; GPU s: where the GPUs are known (docs/methods/recording.md).")


def cost_table(runs: list[Run], prices: Prices) -> Table:
    """Compute and cost per episode and per success (docs/methods/recording.md#cost)."""
    header = ["run", "agent", "budget", "episodes", "success", "LM calls/ep", "prompt tok/ep",
              "completion tok/ep", "cache hit share", "engine s/ep", "GPU s/ep", "tokens/success"]
    digits = [0, 0, 1, 0, 2, 1, 0, 0, 2, 2, 2, 0]
    if prices.given:
        header += ["cost/ep", "cost/success"]
        digits += [4, 4]
    header.append("recording kB/ep")
    digits.append(1)
    rows = []
    for r in runs:
        per = r.per_episode
        success = [p.get("success", math.nan) for p in per]
        prompt = sum(p.get("prompt_tokens", 0.0) for p in per)
        cached = [p.get("cached_tokens", math.nan) for p in per]
        share = sum(cached) / prompt if prompt and all(map(math.isfinite, cached)) else math.nan
        files, size = recording_size(r.path)
        row: list[Cell] = [r.name, r.agg["agent"], nodes_per_tree(r)[0], r.agg["episodes"],
                           r.stat("success"), r.stat("lm_calls"), r.stat("prompt_tokens"),
                           r.stat("completion_tokens"), share, r.stat("engine_s"),
                           Stat.of([prices.gpu_seconds(p) for p in per]),
                           Stat.ratio([p.get("tokens", math.nan) for p in per], success)]
        if prices.given:
            costs = [prices.cost(p) for p in per]
            row += [Stat.of(costs), Stat.ratio(costs, success)]
        row.append(size / 1e3 / files if files else None)
        rows.append(row)
    note = ("Per episode: mean ± standard error over episodes; per success: the total over the "
            "successes (delta-method standard error). Budget: nodes per tree. Cache hit share: "
            "prompt tokens served by the prefix cache, where the backend tells.")
    if prices.given:
        parts = [f"{v:g} per million {k} tokens" for k, v in
                 (("prompt", prices.prompt), ("completion", prices.completion)) if v is not None]
        if prices.gpu_hour is not None:
            parts.append(f"{prices.gpu_hour:g} per GPU-hour" +
                         (f" ({prices.gpus} GPU(s) where a run did not know)"
                          if prices.gpus is not None else ""))
        note += " Cost: " + ", ".join(parts) + "."
    return Table("cost", "Compute and cost", header, rows, digits, note)


def failures_table(runs: list[Run]) -> Table:
    """Parse failures per role and context-length failures (docs/methods/parsing.md)."""
    rows: list[list[Cell]] = []
    for r in runs:
        for role, p in r.agg.get("parse_failures", {}).items():
            rows.append([r.name, f"parse: {role}", p.get("model", ""), p["failures"],
                         p["outputs"], p["rate"]])
        n = r.agg["episodes"]
        ctx = r.agg.get("context_length_failures", 0)
        rows.append([r.name, "context length (episodes)", "", ctx, n, ctx / n if n else math.nan])
    return Table("failures", "Parse and context-length failures",
                 ["run", "what", "model", "failures", "of", "rate"], rows, [0, 0, 0, 0, 0, 3],
                 "Parse failures are counted per completion a role read; context-length "
                 "failures per episode (stopped_by = context_length).")


def _find_key(options: Any, keys: tuple[str, ...]) -> float | None:
    """First of ``keys`` found in a (nested) options mapping, breadth first."""
    queue = [options]
    while queue:
        cur = queue.pop(0)
        if not isinstance(cur, dict):
            continue
        for k in keys:
            v = cur.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
        queue += [v for v in cur.values() if isinstance(v, dict)]
    return None


def nodes_per_tree(run: Run) -> tuple[float, str]:
    """The search budget per tree and where it came from (``config`` / ``trees`` / ``-``)."""
    if run.nodes is None:
        run.nodes = _nodes_per_tree(run)
    return run.nodes


def _nodes_per_tree(run: Run) -> tuple[float, str]:
    configured = _find_key(run.config.get("agent_options") or {}, NODE_KEYS)
    if configured is not None:
        return configured, "config"
    files = sorted((run.path / "trees").glob("*/*.json.gz"))
    if len(files) > MAX_TREES_READ:  # an even sample is enough for a mean
        files = files[:: len(files) // MAX_TREES_READ + 1]
    counts = []
    for file in files:
        try:
            data = load_tree_dict(file)
            sims = (data.get("counters") or {}).get("simulations")
            counts.append(sims if isinstance(sims, int) and not isinstance(sims, bool)
                          else len(data.get("nodes", [])))
        except TreeFormatError as exc:
            print(f"warning: {exc}", file=sys.stderr)
    if counts:
        return sum(counts) / len(counts), "trees"
    return math.nan, "-"


def compute_table(runs: list[Run]) -> Table:
    rows = []
    for r in runs:
        nodes, source = nodes_per_tree(r)
        rows.append([r.name, r.agg["agent"], nodes, source, r.stat("success"), r.mean("tokens"),
                     r.mean("interactions_simulated")])
    return Table("compute", "Compute", ["run", "agent", "nodes/tree", "from", "success",
                                        "tokens/task", "simulated/task"], rows,
                 [0, 0, 1, 0, 2, 0, 1],
                 "nodes/tree: search budget from agent_options, else measured from saved trees.")


# --- plots -----------------------------------------------------------------------------------
@dataclass
class Figure:
    key: str
    title: str
    path: Path
    caption: str = ""


def make_plots(runs: list[Run], tables: dict[str, Table], out: Path) -> tuple[list[Figure], dict]:
    figs: list[Figure] = []
    fits: dict[str, Any] = {}
    pdir = out / "plots"
    for key, label in (("exploration_error", "exploration error"),
                       ("exploitation_error", "exploitation error")):
        pts = [plots.Point(r.name, r.mean(key), r.mean("success")) for r in runs]
        path = pdir / f"success_vs_{key}.png"
        fit = plots.success_vs_log_error(pts, path, error_name=label)
        if fit is False:
            continue
        caption = "One point per run; OLS of success on log10 of the mean error."
        if fit is not None:
            fits[key] = {"slope": fit.slope, "intercept": fit.intercept, "r2": fit.r2, "n": fit.n}
            caption += f" slope {fit.slope:.3f}, R² = {fit.r2:.3f} over {fit.n} runs."
        elif sum(1 for p in pts if plots.finite(p.x) and p.x > 0 and plots.finite(p.y)) < \
                plots.MIN_FIT_POINTS:
            caption += (f" No fitted line: a line needs at least {plots.MIN_FIT_POINTS} runs "
                        f"(through 2 or 3 points R² says next to nothing).")
        else:
            caption += " No fitted line: the runs' errors do not differ."
        figs.append(Figure(f"success_vs_{key}", f"Success vs log {label}", path, caption))
    compute = tables["compute"]
    node_pts = [plots.Point(row[0], row[2], row[4].mean, row[1], y_se=row[4].se)
                for row in compute.rows]
    path = pdir / "scaling_nodes.png"
    if plots.scaling(node_pts, path, xlabel="nodes per tree"):
        figs.append(Figure("scaling_nodes", "Success vs nodes per tree", path,
                           "Search budget per tree (log scale); runs of one agent joined."))
    cost = tables["cost"]
    priced = "cost/ep" in cost.header
    col = cost.header.index("cost/ep") if priced else None
    pts = []
    for r, row in zip(runs, cost.rows):
        x = row[col] if priced else r.stat("tokens")
        y = r.stat("success")
        pts.append(plots.Point(r.name, x.mean, y.mean, r.agg["agent"], x.se, y.se))
    xlabel = "cost per episode" if priced else "tokens per episode"
    path = pdir / "success_vs_compute.png"
    if plots.scaling(pts, path, xlabel=xlabel):
        figs.append(Figure("success_vs_compute", f"Success vs {xlabel}", path,
                           "Each agent a curve over its runs (budgets); bars: one standard "
                           "error of the mean over episodes, both axes (log x). " +
                           ("Cost as in the cost table." if priced else
                            "Prompt + completion tokens; give prices for cost.")))
    gap_rows = [(r.name, r.mean("gap_exploration"), r.mean("gap_exploitation"),
                 r.mean("gap_total")) for r in runs]
    path = pdir / "gap_decomposition.png"
    if plots.gap_bars(gap_rows, path):
        figs.append(Figure("gap_decomposition", "Gap decomposition", path,
                           "Mean normalised exploration + exploitation gap; bar = total gap."))
    figs += diagnose_figures(runs, pdir)
    return figs, fits


# --- diagnostics (`clew diagnose`, docs/methods/diagnose.md) ----------------------------------
def diagnose_tables(runs: list[Run]) -> dict[str, Table]:
    """``clew report``'s diagnostics section: tables from each run's ``diagnose.json``."""
    docs = [(r.name, d) for r in runs if (d := load_diagnosis(r.path)) is not None]
    if not docs:
        return {}
    value, depth, policy, refl, search = [], [], [], [], []
    for name, d in docs:
        conf = d.get("configured") or {}
        for kind, v in (d.get("value") or {}).items():
            a = v["all"]
            value.append([name, kind, a["n"], a["unknown"], a["bias"], a["mae"], a["rmse"],
                          a["spearman"], a["noise_fit"],
                          conf.get("noise") if kind == "heuristic" else None, a["brier"],
                          a["ece"], a["parse_fail_share"]])
            for dep, s in v["by_depth"].items():
                depth.append([name, kind, dep, s["n"], s["mae"], s["spearman"], s["brier"]])
            for side in ("with", "without"):
                if "reflections" in v:
                    s = v["reflections"][side]
                    refl.append([name, f"value ({kind})", side, s["n"], s["mae"], s["brier"],
                                 None, None])
        p = (d.get("policy") or {}).get("all") or {}
        if p.get("n"):
            policy.append([name, p["n"], p["recall_at_1"], p["b"], p["recall_at_b"],
                           p["optimal_prior_mass"], p["chance_mass"], p["none_share"]])
        for side in ("with", "without"):
            s = (d.get("policy") or {}).get("reflections", {}).get(side)
            if s:
                refl.append([name, "policy", side, s["n"], None, None, s["recall_at_1"],
                             s["optimal_prior_mass"]])
        s = d.get("search") or {}
        if s.get("n"):
            search.append([name, s["n"], s["differs_share"], s["search_better"],
                           s["policy_better"], s["equal"], s["committed_optimal"]])
    out = {}
    if value:
        out["diagnose_value"] = Table(
            "diagnose_value", "Diagnostics: value calibration against ground truth",
            ["run", "value", "nodes", "unknown", "bias", "MAE", "RMSE", "Spearman", "noise fit",
             "configured noise", "Brier", "ECE", "samples unparsed"], value,
            [0, 0, 0, 0, 3, 3, 3, 3, 3, 2, 3, 3, 3],
            "Each evaluated node's value against its replayed state: bias/MAE/RMSE/Spearman "
            "against progress (normalised optimal value-to-go), Brier/ECE against 'solvable "
            "within the steps left'; noise fit: sigma of a Gaussian error fitted to the clipped "
            "values (docs/methods/diagnose.md).")
        out["diagnose_value_depth"] = Table(
            "diagnose_value_depth", "Diagnostics: value error by depth",
            ["run", "value", "depth", "nodes", "MAE", "Spearman", "Brier"], depth,
            [0, 0, 0, 0, 3, 3, 3])
    if policy:
        out["diagnose_policy"] = Table(
            "diagnose_policy", "Diagnostics: policy proposals against the oracle",
            ["run", "expansions", "recall@1", "b", "recall@b", "prior on optimal",
             "uniform on optimal", "nothing parsed"], policy, [0, 0, 3, 0, 3, 3, 3, 3],
            "Optimal action: its successor needs the fewest steps to success; expansions where "
            "every or no action is optimal are left out. 'uniform': the mass a uniform choice "
            "among the legal actions puts on optimal ones.")
    if refl:
        out["diagnose_reflection"] = Table(
            "diagnose_reflection", "Diagnostics: with and without retrieved reflections",
            ["run", "role", "reflections", "n", "value MAE", "value Brier", "recall@1",
             "prior on optimal"], refl, [0, 0, 0, 0, 3, 3, 3, 3])
    if search:
        out["diagnose_search"] = Table(
            "diagnose_search", "Diagnostics: what search changed",
            ["run", "trees", "committed != top prior", "search better", "policy better",
             "equal", "committed at least as good"], search, [0, 0, 3, 0, 0, 0, 3],
            "Where the committed action differs from the policy's top-prior action, which of "
            "the two needs fewer steps to success by the oracle.")
    return out


def diagnose_figures(runs: list[Run], pdir: Path) -> list[Figure]:
    """The runs' diagnostics plots, copied into the report's ``plots/``."""
    figs = []
    for r in runs:
        d = load_diagnosis(r.path)
        for name in (d or {}).get("plots", []):
            src = Path(r.path) / "diagnose" / name
            if not src.exists():
                continue
            safe = re.sub(r"[^A-Za-z0-9_.-]", "_", r.name)
            dst = pdir / f"diagnose_{safe}_{name}"
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
            title = "Value reliability" if name.startswith("reliability") else "Value error by depth"
            figs.append(Figure(f"diagnose_{safe}_{Path(name).stem}", f"{title} ({r.name})", dst,
                               "From `clew diagnose` (docs/methods/diagnose.md)."))
    return figs


# --- writing ---------------------------------------------------------------------------------
def build_tables(runs: list[Run], react: Run | None,
                 prices: Prices | None = None) -> dict[str, Table]:
    tables = {"summary": summary_table(runs, react)}
    for t in (gaps_table(runs), by_level_table(runs), usage_table(runs)):
        if t is not None:
            tables[t.key] = t
    tables["compute"] = compute_table(runs)
    tables["cost"] = cost_table(runs, prices or Prices())
    tables["failures"] = failures_table(runs)
    tables.update(diagnose_tables(runs))     # runs that `clew diagnose` has read
    return tables


def suite_warning(runs: list[Run]) -> str:
    suites = sorted({r.suite for r in runs})
    if len(suites) <= 1:
        return ""
    return "Warning: the runs are on different suites (" + ", ".join(suites) + ")."


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
.table-wrap{max-width:100%;overflow-x:auto;margin:0.5em 0 1.5em}
table.clew-table{border-collapse:collapse;font-size:0.85em}
.clew-table th,.clew-table td{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap}
.clew-table th{background:#f2f2f2;white-space:normal;max-width:6.5em;vertical-align:bottom}
.clew-table th:first-child{text-align:left}
.clew-table td:first-child{text-align:left;white-space:normal;overflow-wrap:anywhere;min-width:9em;max-width:16em}
.clew-table .se{display:block;color:#666;font-size:0.85em}
figure{display:inline-block;margin:0.5em 1em 1.5em 0;vertical-align:top}
figure img{max-width:560px;border:1px solid #ddd}.note{color:#555;font-size:0.9em}
.warn{color:#a40;font-weight:bold}
"""


def render_html(runs: list[Run], tables: dict[str, Table], figs: list[Figure], warn: str) -> str:
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>clew report</title>",
             f"<style>{_CSS}</style></head><body><h1>clew report</h1>"]
    if warn:
        parts.append(f"<p class='warn'>{html.escape(warn)}</p>")
    parts.append("<ul class='runs'>" + "".join(
        f"<li><b>{html.escape(r.name)}</b>: {html.escape(str(r.path))} "
        f"({r.agg['episodes']} episodes, suite {html.escape(r.suite)})</li>" for r in runs)
        + "</ul>")
    parts += [t.html() for t in tables.values()]
    if figs:
        parts.append("<section><h2>Plots</h2>")
        for f in figs:
            data = base64.b64encode(f.path.read_bytes()).decode()
            parts.append(
                f"<figure><img class='clew-plot' id='plot-{f.key}' alt='{html.escape(f.title)}' "
                f"src='data:image/png;base64,{data}'><figcaption><b>{html.escape(f.title)}"
                f"</b>. {html.escape(f.caption)}</figcaption></figure>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def render_markdown(runs: list[Run], tables: dict[str, Table], figs: list[Figure], warn: str,
                    out: Path) -> str:
    lines = ["# clew report", ""]
    if warn:
        lines += [f"**{warn}**", ""]
    lines += [f"- **{r.name}**: `{r.path}` ({r.agg['episodes']} episodes, suite `{r.suite}`)"
              for r in runs] + [""]
    lines += [t.markdown() for t in tables.values()]
    if figs:
        lines += ["## Plots", ""]
        for f in figs:
            lines += [f"![{f.title}]({f.path.relative_to(out).as_posix()})", "",
                      f"*{f.title}.* {f.caption}", ""]
    return "\n".join(lines)


@dataclass
class Report:
    out: Path
    tables: dict[str, Table]
    figures: list[Figure]
    fits: dict[str, Any]
    warning: str = ""


def default_out(run_paths: list[Path]) -> Path:
    return run_paths[0] if len(run_paths) == 1 else run_paths[0].parent / "report"


def write_report(run_paths: list[str | Path], out: str | Path | None = None,
                 react: str | Path | None = None, prices: Prices | None = None) -> Report:
    if not run_paths:
        raise ReportError("clew report needs at least one run directory")
    paths = [Path(p) for p in run_paths]
    names = _unique_names(paths)
    runs = [load_run(p, n) for p, n in zip(paths, names)]
    react_run = None
    if react is not None:
        rp = Path(react).resolve()
        react_run = next((r for r in runs if r.path.resolve() == rp), None)
        if react_run is None:
            react_run = load_run(react)
            if react_run.name in {r.name for r in runs}:
                react_run.name += " (react)"
            runs.append(react_run)
    out_dir = Path(out) if out else default_out(paths)
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = build_tables(runs, react_run, prices)
    figs, fits = make_plots(runs, tables, out_dir)
    warn = suite_warning(runs)
    if warn:
        print(warn, file=sys.stderr)
    for t in tables.values():
        atomic_write_text(out_dir / "tables" / f"{t.key}.csv", t.csv())
    atomic_write_text(out_dir / "report.md", render_markdown(runs, tables, figs, warn, out_dir))
    atomic_write_text(out_dir / "report.html", render_html(runs, tables, figs, warn))
    doc = {"runs": {r.name: str(r.path) for r in runs}, "warning": warn, "fits": fits,
           "tables": {k: t.to_json() for k, t in tables.items()},
           "plots": [f.path.relative_to(out_dir).as_posix() for f in figs]}
    atomic_write_bytes(out_dir / "report.json",
                       json.dumps(clean_json(doc), indent=1, allow_nan=False).encode())
    return Report(out_dir, tables, figs, fits, warn)
