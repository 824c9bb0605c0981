"""``clew view TREE.json.gz [--out FILE.html]``: a search tree as one HTML page (issue 7)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("tree", help="a tree file written by a search (trees/EPISODE/STEP.json.gz)")
    p.add_argument("--out", help="HTML file to write (default: next to the tree, .html)")


def run(args: argparse.Namespace) -> int:
    from clew.eval.tree_view import write_view
    from clew.search.tree import TreeFormatError

    try:
        out = write_view(Path(args.tree), Path(args.out) if args.out else None)
    except TreeFormatError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"tree view written to {out}")
    return 0
