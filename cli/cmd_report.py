"""``clew report RUN... [--out DIR] [--react RUN] [prices]``: tables and plots comparing runs
(docs/scale-out.md#reading-results)."""

from __future__ import annotations

import argparse
import sys

from clew.reports.report import Prices, ReportError, write_report


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directories to compare")
    p.add_argument("--out", help="output folder (default: the run itself for one run, else "
                                 "report/ next to the first run)")
    p.add_argument("--react", metavar="RUN",
                   help="a ReAct run: tokens per task are also shown relative to it")
    g = p.add_argument_group("prices (a cost per episode and per success; "
                             "docs/methods/recording.md)")
    g.add_argument("--price-tokens", type=float, metavar="P",
                   help="price per million tokens, prompt and completion alike")
    g.add_argument("--price-prompt", type=float, metavar="P",
                   help="price per million prompt tokens (instead of --price-tokens)")
    g.add_argument("--price-completion", type=float, metavar="P",
                   help="price per million completion tokens (instead of --price-tokens)")
    g.add_argument("--price-gpu-hour", type=float, metavar="P", help="price per GPU-hour")
    g.add_argument("--gpus", type=int, metavar="N",
                   help="GPUs per model where a run could not know them (a model server): its "
                        "busy seconds times N are its GPU-seconds")


def run(args: argparse.Namespace) -> int:
    try:
        prices = Prices(
            prompt=args.price_prompt if args.price_prompt is not None else args.price_tokens,
            completion=(args.price_completion if args.price_completion is not None
                        else args.price_tokens),
            gpu_hour=args.price_gpu_hour, gpus=args.gpus)
        report = write_report(args.runs, args.out, react=args.react, prices=prices)
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.tables["summary"].markdown(), end="")
    print(report.tables["cost"].markdown(), end="")
    for key, fit in report.fits.items():
        print(f"fit success ~ log10 {key}: slope {fit['slope']:.3f}, R² {fit['r2']:.3f} "
              f"({fit['n']} runs)")
    print(f"report written to {report.out}/report.html, report.md, tables/, plots/ "
          f"({len(report.figures)} plot(s))")
    return 0
