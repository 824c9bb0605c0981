"""``clew data [--config FILE] --out DIR RUN... [key=value ...]``: recorded search trees to EL / IL datasets
(docs/methods/exploratory-learning.md; :mod:`clew.training.datasets`).

Writes ``DIR/el``, ``DIR/il_all``, ``DIR/il_matched`` (Hugging Face ``save_to_disk``), the same as
JSONL (``DIR/<subset>.jsonl``, chat format), ``DIR/pairs`` and ``DIR/values`` (preference pairs
and value targets, docs/methods/exploratory-learning.md#preference-pairs-and-dpo; JSONL too) and
``DIR/export_report.json``; with ``subsets`` naming ``value_sft``, ``DIR/value_sft`` (chats that
train a value model, docs/methods/exploratory-learning.md#learned-value).
"""

from __future__ import annotations

import argparse
import sys

from clew.runner.config import ConfigError, load_config
from clew.training.datasets import (
    TREE_SUBSETS,
    DataConfig,
    build_datasets,
    empty_hint,
    empty_subsets,
    save_datasets,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("items", nargs="*", metavar="RUN | key=value",
                   help="run directories with search trees, and config overrides such as "
                        "el_max_actions=30 sample_mode=full allow_empty=true")
    p.add_argument("--config", help="YAML config file (fields of training.datasets.DataConfig)")
    p.add_argument("--out", help="output folder for the datasets")


def _split(items: list[str]) -> tuple[list[str], list[str]]:
    """Free words: ``key=value`` overrides, the others run directories."""
    runs = [x for x in items if "=" not in x]
    return runs, [x for x in items if "=" in x]


def config(args: argparse.Namespace):
    runs, overrides = _split(list(args.items))
    base = {}
    if runs:
        base["runs"] = runs
    if args.out:
        base["out"] = args.out
    cfg = load_config(DataConfig, args.config, overrides, base=base)
    if not cfg.out:
        raise ConfigError("out: required: where to write the datasets (--out DIR)")
    return cfg


def _skipped(kind: str, report: dict) -> None:
    for reason, n in sorted(report[f"{kind}_skipped"].items(), key=lambda kv: -kv[1]):
        print(f"{kind.upper()} skipped {n} episode(s): {reason}")
        for example in report[f"{kind}_skipped_examples"].get(reason, []):
            print(f"    e.g. {example}")


def run(args: argparse.Namespace) -> int:
    cfg = config(args)
    datasets, report = build_datasets(cfg, progress=True)
    out = save_datasets(datasets, report, cfg.out, cfg.formats)
    print(f"{report['episodes']} episode(s) read, {report['selected']} selected; "
          f"EL from {report['el_episodes']}, IL from {report['il_episodes']}")
    for name, n in report["samples"].items():
        print(f"  {name:11s} {n} sample(s) -> {out / name} and {out / name}.jsonl")
    _skipped("el", report)
    _skipped("il", report)
    for reason, n in sorted(report.get("value_sft_skipped", {}).items(), key=lambda kv: -kv[1]):
        print(f"VALUE_SFT skipped {n} value row(s): {reason}")
    for what in ("unreadable_records", "unreadable_trees"):
        if report[what]:
            print(f"{len(report[what])} {what.replace('_', ' ')} skipped, e.g. {report[what][0]}")
    print(f"report: {out / 'export_report.json'}")
    no_rows = empty_subsets(cfg, report, TREE_SUBSETS)
    if no_rows:  # pairs and values are extras of a search's trees: said, not an error
        print(f"note: no rows in {', '.join(no_rows)} (pair_margin, pair_min_visits and "
              f"value_min_visits set what qualifies; counts: {report['tree_rows'] or '-'})",
              file=sys.stderr)
    empty = empty_subsets(cfg, report)
    if empty and not cfg.allow_empty:
        print(f"warning: no samples in {', '.join(empty)}; "
              + (empty_hint(cfg, report) if "el" in empty or "il_matched" in empty else
                 "value_sft needs trees of a search that reads no oracle (mcts-rollout)"
                 if empty == ["value_sft"] and report.get("value_sft_skipped") else
                 "see the skip reasons above")
              + " (allow_empty=true accepts empty subsets)", file=sys.stderr)
        return 1
    return 0
