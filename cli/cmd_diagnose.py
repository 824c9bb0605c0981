"""``clew diagnose RUN... [--limit N]``: the search roles of a run against ground truth
(:mod:`clew.reports.diagnose`, docs/methods/diagnose.md).

Writes ``RUN/diagnose/`` (``diagnose.json``, ``nodes.jsonl``, plots) for each run and prints the
main numbers; ``clew report`` then shows them too.
"""

from __future__ import annotations

import argparse
import sys

from clew.reports.diagnose import DiagnoseError, diagnose_run, summary_lines


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directories with search trees")
    p.add_argument("--limit", type=int, help="only the first N episodes of each run")


def run(args: argparse.Namespace) -> int:
    status = 0
    for path in args.runs:
        try:
            doc = diagnose_run(path, limit=args.limit, progress=True)
        except DiagnoseError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 2
            continue
        print("\n".join(summary_lines(doc)))
    return status
