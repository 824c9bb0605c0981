"""The ``clew`` command (docs/architecture.md#command-line): one entry point, one subcommand per job.

Every subcommand that runs work takes ``--config FILE`` plus ``key=value`` overrides and validates
the whole config before doing anything.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from clew.eval.config import ConfigError

# Subcommands that live in their own modules: name -> module with add_arguments(p), run(args).
EXTRA_COMMANDS = {
    "data": ("clew.scripts.cmd_data", "turn recorded search trees into EL/IL datasets"),
    "train": ("clew.scripts.cmd_train", "LoRA / full SFT with TRL (works under accelerate)"),
    "report": ("clew.scripts.cmd_report", "tables and plots comparing runs"),
    "view": ("clew.scripts.cmd_view", "render a search tree as an HTML page"),
    "merge": ("clew.scripts.cmd_merge", "combine shard run directories into one"),
    "diagnose": ("clew.scripts.cmd_diagnose", "measure a run's search roles against ground truth"),
    "doctor": ("clew.scripts.doctor", "preflight: GPUs, driver, CUDA, vLLM stack, what is missing"),
}


def _add_eval_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML config file")
    p.add_argument("--agent", help="agent name (see `clew agents`)")
    p.add_argument("--model", help="model spec for LM agents, e.g. hf:PATH, vllm:NAME, "
                                   "openai:http://host:8000/v1#NAME")
    p.add_argument("--suite", help="SUITE:SPLIT or FILE.jsonl[:SPLIT]")
    p.add_argument("--out", help="run directory (default runs/AGENT-SUITE-SPLIT)")
    p.add_argument("--concurrency", type=int, help="episodes run at once")
    p.add_argument("--repeats", type=int, help="episodes per task")
    p.add_argument("--limit", type=int, help="only the first N tasks")
    p.add_argument("--shard", help="run shard i of n of the tasks, as i/n")
    p.add_argument("--resume", action="store_true", default=None,
                   help="continue a run: skip finished episodes, rerun interrupted ones")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config overrides, dotted keys allowed (agent_options.temperature=0.7)")


def _eval_config(args: argparse.Namespace):
    from clew.eval.config import EvalConfig, load_config

    flags = {k: getattr(args, k) for k in
             ("agent", "suite", "out", "concurrency", "repeats", "limit", "shard", "resume")
             if getattr(args, k, None) is not None}
    overrides = list(args.overrides)
    if args.model:
        overrides.insert(0, f"agent_options.model={args.model}")
    return load_config(EvalConfig, args.config, overrides, base=flags)


def cmd_eval(args: argparse.Namespace) -> int:
    from clew.eval.evaluate import MAX_TASK_ROWS, evaluate
    from clew.eval.summary import summary_table

    cfg = _eval_config(args)
    run, agg = evaluate(cfg)
    print(summary_table([(run.path.name, agg)]), end="")
    if 1 < len(agg["by_task"]) <= MAX_TASK_ROWS:
        print("\nPer task (repeats pooled):\n")
        print(summary_table(list(agg["by_task"].items())), end="")
    counts = agg["counts"]
    print(f"{counts['finished']} episode(s) run, {counts['skipped']} already finished, "
          f"{counts['failed']} failed -> {run.path}")
    if counts["failed"]:
        print(f"see {run.errors_file} for the failures; rerun with --resume to retry them",
              file=sys.stderr)
        return 1
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from clew.eval.score import score_lines
    from clew.records import dumps

    path = Path(args.file)
    if not path.exists():
        raise ConfigError(f"{path}: no such file")
    failed = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, result, error in score_lines(f):
            if error:
                failed += 1
                print(f"{path}:{lineno}: {error}", file=sys.stderr)
            if args.no_labels:
                result.pop("labels", None)
            print(dumps(result), flush=True)
    return 1 if failed else 0


def cmd_agents(args: argparse.Namespace) -> int:
    from clew.eval.agents import AGENTS, load_preset, preset_names

    for name, path in sorted(AGENTS.items()):
        print(f"{name:24s} {path}")
    for name in preset_names():
        print(f"{name:24s} preset of {load_preset(name)['agent']} (configs/agents/{name}.yaml)")
    return 0


def cmd_suites(args: argparse.Namespace) -> int:
    from clew.envs.suites import SUITES, current_suite, get_suite

    for name in sorted(SUITES):
        try:
            suite = get_suite(name)
            sizes = ", ".join(f"{k}={len(v)}" for k, v in suite.splits.items())
            now = current_suite(name)
            status = "current" if now == name else f"superseded by {now}"
            print(f"{name:24s} v{suite.version}  {status:36s} {sizes}")
        except Exception as exc:  # one broken suite must not hide the others
            print(f"{name:24s} (unavailable: {type(exc).__name__}: {exc})")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from clew.scripts.demo import run_demo

    return run_demo(out=Path(args.out), quick=args.quick)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clew", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    for name, help_text in (("eval", "evaluate an agent on a suite split"),
                            ("search", "run a search agent on a suite split, recording trees")):
        p = sub.add_parser(name, help=help_text)
        _add_eval_args(p)
        p.set_defaults(func=cmd_eval)

    p = sub.add_parser("score", help="score trajectories from a JSONL file (one JSON line each)")
    p.add_argument("file", help='JSONL: each line {"task": {...}, "actions": [...]}')
    p.add_argument("--no-labels", action="store_true", help="omit the per-step labels")
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("demo", help="the whole loop on the embedded defaults")
    p.add_argument("--out", default="runs/demo")
    p.add_argument("--quick", action="store_true", help="smallest suites, for a smoke test")
    p.set_defaults(func=cmd_demo)

    sub.add_parser("agents", help="list agents").set_defaults(func=cmd_agents)
    sub.add_parser("suites", help="list suites").set_defaults(func=cmd_suites)

    for name, (module, help_text) in EXTRA_COMMANDS.items():
        mod = importlib.import_module(module)
        p = sub.add_parser(name, help=help_text)
        mod.add_arguments(p)
        p.set_defaults(func=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except (FileExistsError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished episodes are kept (rerun with --resume)", file=sys.stderr)
        return 130
    except Exception as exc:
        from clew.eval.runner import RunAborted

        if isinstance(exc, RunAborted):
            print(f"error: run aborted: {exc}", file=sys.stderr)
            return 3
        raise


if __name__ == "__main__":
    sys.exit(main())
