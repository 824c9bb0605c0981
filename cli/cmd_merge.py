"""``clew merge SHARD_DIR... --out DIR``: combine shard run directories into one (docs/scale-out.md)."""

from __future__ import annotations

import argparse
import sys

from clew.metrics.summary import aggregate, summary_table
from clew.runner.shards import MergeError, merge_shards


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("shards", nargs="+", metavar="SHARD_DIR",
                   help="run directories written with --shard i/n")
    p.add_argument("--out", required=True, help="the merged run directory (must be new)")
    p.add_argument("--allow-missing", action="store_true",
                   help="merge even when some shards i/n are absent")


def run(args: argparse.Namespace) -> int:
    try:
        merged, counts = merge_shards(args.shards, args.out, allow_missing=args.allow_missing)
    except MergeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary_table([(merged.path.name, aggregate(merged.episodes()))]), end="")
    print(f"merged {counts['shards']} shard(s): {counts['episodes']} episode(s) "
          f"({counts['duplicates']} duplicate(s) dropped), {counts['trees']} tree(s), "
          f"{counts['recorded']} recorded episode(s), {counts['errors']} failed episode(s) -> "
          f"{merged.path}")
    return 0
