"""PNG plots for ``clew report`` (docs/methods/metric-explore-exploit-error.md#aggregation, docs/methods/metric-optimal-exploitation-gap.md figure 3).

Each function takes plain points (one per run) and a path, draws with matplotlib's Agg backend
(no display needed) and returns what it drew, or ``None`` with nothing written when there is no
data to draw. The regression of docs/methods/metric-explore-exploit-error.md#aggregation is :func:`fit_line`: ordinary least squares of
success rate on log10 of the mean error, one point per run; R² does not depend on the log base.

Decisions:

* A run whose mean error is 0 (or undefined) cannot go on a log axis: it is left out of the plot
  and the fit, and the figure says how many were left out.
* A fit needs two distinct x values; R² is undefined (NaN) when every y is the same.
* The report draws a fitted line only through at least :data:`MIN_FIT_POINTS` runs: a line
  through two points has R² = 1 whatever the data, and three points hardly say more; with fewer
  runs the plot shows the points and says why there is no line.
* Compute-scaling points of the same agent name are joined by a line in x order, so a sweep of
  ``n_simulations`` reads as one curve.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MIN_FIT_POINTS = 4  # runs needed before a fitted line is drawn (see the module docstring)


@dataclass(frozen=True)
class Fit:
    """y = intercept + slope * x over ``n`` points; ``r2`` is NaN when y has no variance."""

    slope: float
    intercept: float
    r2: float
    n: int


@dataclass(frozen=True)
class Point:
    """One run in a plot: its label, the agent (series), x and y, and their standard errors
    (NaN: none drawn)."""

    label: str
    x: float
    y: float
    series: str = ""
    x_se: float = math.nan
    y_se: float = math.nan


def finite(x: float | None) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> Fit | None:
    """Ordinary least squares with R² = 1 - SS_res / SS_tot; None with < 2 distinct x."""
    n = len(xs)
    if n != len(ys) or n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 1e-12 * max(1.0, mx * mx) * n:  # x equal up to rounding: no slope to fit
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    intercept = my - slope * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else math.nan
    return Fit(slope, intercept, r2, n)


def pyplot():
    """matplotlib's pyplot on the headless Agg backend (reports are written on clusters and in
    CI), imported on first use: the ``clew`` command starts without it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path: Path) -> Path:
    """``fig`` written to ``path`` (its folder made) and closed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


def _annotate(ax, points: Sequence[Point], xs: Sequence[float]) -> None:
    for p, x in zip(points, xs):
        ax.annotate(p.label, (x, p.y), textcoords="offset points", xytext=(4, 4), fontsize=8)


def success_vs_log_error(points: Sequence[Point], path: Path, *, error_name: str
                         ) -> Fit | None | bool:
    """Success rate against log10(mean error), one point per run, with the OLS line and R².

    Returns the fit (``None`` when no fit was possible but the plot was drawn), or ``False`` when
    there was nothing to plot and no file was written.
    """
    usable = [p for p in points if finite(p.x) and p.x > 0 and finite(p.y)]
    dropped = len(points) - len(usable)
    if not usable:
        return False
    xs = [math.log10(p.x) for p in usable]
    ys = [p.y for p in usable]
    fit = fit_line(xs, ys) if len(usable) >= MIN_FIT_POINTS else None
    fig, ax = pyplot().subplots(figsize=(6, 4.2))
    ax.scatter(xs, ys, color="tab:blue", zorder=3)
    _annotate(ax, usable, xs)
    title = f"success vs log10 {error_name}"
    if fit is not None:
        lo, hi = min(xs), max(xs)
        ax.plot([lo, hi], [fit.intercept + fit.slope * lo, fit.intercept + fit.slope * hi],
                color="tab:red", label=f"OLS: slope {fit.slope:.3f}, R² = {fit.r2:.3f}")
        ax.legend(loc="best", fontsize=8)
    if dropped:
        title += f" ({dropped} run(s) with zero/undefined error left out)"
    if len(usable) < MIN_FIT_POINTS:
        title += f"\nno fitted line: {len(usable)} run(s), a line needs {MIN_FIT_POINTS}"
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(f"log10 mean {error_name}")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)
    save(fig, path)
    return fit


def scaling(points: Sequence[Point], path: Path, *, xlabel: str) -> bool:
    """Success against a compute measure (log x axis); series joined in x order, with error
    bars where the points carry standard errors."""
    usable = [p for p in points if finite(p.x) and p.x > 0 and finite(p.y)]
    if not usable:
        return False
    from matplotlib import ticker

    fig, ax = pyplot().subplots(figsize=(6, 4.2))
    series: dict[str, list[Point]] = {}
    for p in usable:
        series.setdefault(p.series or p.label, []).append(p)
    for name, pts in sorted(series.items()):
        pts = sorted(pts, key=lambda p: p.x)
        # a bar reaching 0 or below cannot be drawn on a log axis: cut it just above 0
        x_lo = [min(p.x_se, 0.999 * p.x) if finite(p.x_se) else 0.0 for p in pts]
        x_hi = [p.x_se if finite(p.x_se) else 0.0 for p in pts]
        y_err = [p.y_se if finite(p.y_se) else 0.0 for p in pts]
        ax.errorbar([p.x for p in pts], [p.y for p in pts], xerr=[x_lo, x_hi], yerr=y_err,
                    marker="o", capsize=3, label=name)
    _annotate(ax, usable, [p.x for p in usable])
    ax.set_xscale("log")
    # ticks at 1, 2 and 5 times each power of ten, written as plain numbers: matplotlib's own
    # minor labels (2×10⁻³ 3×10⁻³ ...) run into each other
    ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(f"success vs {xlabel}", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    if len(series) > 1:
        ax.legend(fontsize=8)
    save(fig, path)
    return True


def gap_bars(rows: Sequence[tuple[str, float, float, float | None]], path: Path) -> bool:
    """Stacked bars per run: exploration gap + exploitation gap, total gap marked.

    ``rows`` holds ``(run, gap_exploration, gap_exploitation, gap_total)``; a run without both
    parts is skipped.
    """
    usable = [r for r in rows if finite(r[1]) and finite(r[2])]
    if not usable:
        return False
    names = [r[0] for r in usable]
    explore = [r[1] for r in usable]
    exploit = [r[2] for r in usable]
    fig, ax = pyplot().subplots(figsize=(max(4.5, 1.0 + 0.9 * len(usable)), 4.2))
    idx = list(range(len(usable)))
    ax.bar(idx, explore, color="tab:orange", label="exploration gap")
    ax.bar(idx, exploit, bottom=explore, color="tab:purple", label="exploitation gap")
    totals = [(i, r[3]) for i, r in zip(idx, usable) if finite(r[3])]
    if totals:
        ax.scatter([i for i, _ in totals], [t for _, t in totals], marker="_", s=400,
                   color="black", zorder=3, label="total gap")
    ax.set_xticks(idx)
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("normalised gap (mean over episodes)")
    ax.set_title("return gap decomposition", fontsize=9)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    save(fig, path)
    return True
