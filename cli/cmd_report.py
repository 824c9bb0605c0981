"""``clew report RUN... [--out DIR] [--react RUN]``: tables and plots comparing runs (docs/scale-out.md#reading-results)."""

from __future__ import annotations

import argparse
import sys

from clew.reports.report import ReportError, write_report


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directories to compare")
    p.add_argument("--out", help="output folder (default: the run itself for one run, else "
                                 "report/ next to the first run)")
    p.add_argument("--react", metavar="RUN",
                   help="a ReAct run: tokens per task are also shown relative to it")


def run(args: argparse.Namespace) -> int:
    try:
        report = write_report(args.runs, args.out, react=args.react)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.tables["summary"].markdown(), end="")
    for key, fit in report.fits.items():
        print(f"fit success ~ log10 {key}: slope {fit['slope']:.3f}, R² {fit['r2']:.3f} "
              f"({fit['n']} runs)")
    print(f"report written to {report.out}/report.html, report.md, tables/, plots/ "
          f"({len(report.figures)} plot(s))")
    return 0
