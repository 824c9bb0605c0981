"""The ``clew`` command (docs/architecture.md, Command line): one entry point, one subcommand per
job.

Every subcommand that runs work takes ``--config FILE`` (or a preset name) plus ``key=value``
overrides, anywhere on the line, and validates the whole config before doing anything.

Errors a user can fix (a config field, a model spec, a run directory in use or damaged, a
missing file) are one ``error: ...`` line naming the thing, exit status 2, no traceback;
``--debug`` (anywhere on the line, or ``CLEW_DEBUG=1``) adds the traceback. A run stopped by
Ctrl-C or SIGTERM says what was kept; a closed output pipe (``clew score f | head``) ends quietly.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import os
import re
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

from clew.agents.lm.openai_backend import OpenAIModel
from clew.agents.lm.recording import RecordingError
from clew.agents.lm.spec import ModelSpecError
from clew.agents.memory_store import MemoryFormatError
from clew.agents.options import OptionsError
from clew.cli.demo import run_demo
from clew.cli.model_check import check_agent_models
from clew.envs.suites import current_suite, get_suite, suite_builders
from clew.metrics.score import score_lines
from clew.metrics.summary import summary_table
from clew.records import LockedError, RecordError, RunDir, dumps
from clew.reports.report import ReportError
from clew.runner.config import ConfigError, EvalConfig, load_config, load_yaml
from clew.runner.episodes import RunAborted
from clew.runner.evaluate import MAX_TASK_ROWS, RESUME_KEYS, default_out, evaluate
from clew.runner.provenance import clew_version, git_commit
from clew.runner.registry import (
    AGENTS,
    agent_entry,
    load_preset,
    model_need,
    preset_about,
    preset_names,
    resolve,
)
from clew.runner.shards import MergeError
from clew.search.tree import TreeFormatError
from clew.training.config import TrainError

DESCRIPTION = ("clew: agent search (R-MCTS and its baselines) and exploratory learning with "
               "local open-weight language models.")
EPILOG = """\
the loop, on a GPU node (or with --model openai:URL#NAME for a running server):
  clew search --agent rmcts-mad --model vllm:Qwen/Qwen2.5-7B-Instruct \\
      --suite exploration-v1:train --out runs/rmcts-mad
  clew data --out runs/data runs/rmcts-mad
  clew train --config lora-7b data=runs/data/el output_dir=runs/el-lora
  clew eval --agent distilled --model vllm:Qwen/Qwen2.5-7B-Instruct+lora:runs/el-lora \\
      --suite exploration-v1:test --out runs/el
  clew report runs/rmcts-mad runs/el

on a laptop, no GPU and no weights: clew demo --quick
`clew COMMAND --help` describes each command; --debug shows the Python traceback of an error.
"""

# Subcommands that live in their own modules: name -> module with add_arguments(p), run(args).
EXTRA_COMMANDS = {
    "data": ("clew.cli.cmd_data", "turn recorded search trees into EL/IL datasets"),
    "train": ("clew.cli.cmd_train", "LoRA / full SFT with TRL (works under accelerate)"),
    "loop": ("clew.cli.cmd_loop", "search -> data -> train -> evaluate, in rounds"),
    "report": ("clew.cli.cmd_report", "tables and plots comparing runs"),
    "view": ("clew.cli.cmd_view", "render a search tree as an HTML page"),
    "merge": ("clew.cli.cmd_merge", "combine shard run directories into one"),
    "diagnose": ("clew.cli.cmd_diagnose", "measure a run's search roles against ground truth"),
    "doctor": ("clew.cli.doctor", "preflight: GPUs, driver, CUDA, vLLM stack, what is missing"),
}

#: the run directory of the command in progress, for the message when it is stopped
_RUN: dict[str, Any] = {}


def _default(field: str) -> Any:
    return EvalConfig.model_fields[field].default


def _server_options() -> str:
    """The timeout and retry options of model servers, with the backend's own defaults."""
    p = inspect.signature(OpenAIModel).parameters
    return (
        "model servers (openai:URL#NAME): agent_options.model_options.timeout=SECONDS per "
        f"attempt (default {p['timeout'].default:g}), agent_options.model_options.retries=N "
        f"more attempts after a timeout, a lost connection, 429 or 5xx (default "
        f"{p['retries'].default}, with backoff); every retry is logged. A call gives up after "
        f"about (retries + 1) x timeout seconds and the run stops, keeping what finished.")


EVAL_HELP = """\
Run an agent on a suite split into a run directory: episodes.jsonl, metrics.json, summary.md
(and search trees for search agents). Any agent: heuristic, LM, searched or distilled.

examples:
  clew eval --agent frontier --suite gridmap-v1:test --out runs/frontier
  clew eval --agent react --model hf:tiny:runs/models/tiny --suite gridmap-mini:test
  clew eval --agent random --suite tasks.jsonl --out runs/r --concurrency 16 max_episode_steps=50
  clew eval --out runs/frontier --resume          # agent, suite, options read from the run
"""

SEARCH_HELP = """\
Run a search agent (mcts, rmcts, rmcts-mad, tot-bfs, tot-dfs, best-first, ...: `clew agents`)
on a suite split, recording one search tree per real step in RUN/trees/ for `clew data` and
`clew view`. R-MCTS agents keep their reflection memory in RUN/memory/.

examples:
  clew search --agent mcts --suite gridmap-mini:train --out runs/mcts       # heuristic roles
  clew search --agent rmcts-mad --model openai:http://localhost:8000/v1#qwen \\
      --suite exploration-v1:train --out runs/rmcts-mad agent_options.search.n_simulations=20
  clew search --agent rmcts --model vllm:Qwen/Qwen2.5-7B-Instruct --suite gridmap-v1:train \\
      --shard 0/8 --out runs/x/shard-0-of-8     # then: clew merge runs/x/shard-* --out runs/x/all
  clew search --replay runs/rmcts-mad --out runs/again --concurrency 1   # no model: every LM
      # call answered from runs/rmcts-mad/lm/ (recorded by default; --no-record turns it off)
"""


def _plain(doc: str) -> str:
    """A module docstring's first paragraph as help text: without its usage line (argparse
    prints one), reST markup or references to design documents."""
    text = " ".join(doc.split("\n\n")[0].split())
    text = re.sub(r"^``[^`]*``:\s*", "", text)
    text = re.sub(r":\w+:`~?([^`]*)`", r"\1", text).replace("``", "")
    text = re.sub(r"\s*\((?:spec_\d+[^)]*|issue \d+)\)", "", text)
    return text[:1].upper() + text[1:]


def _add_eval_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML config file, or the name of an agent preset "
                                    "(configs/agents/NAME.yaml); a run's config.yaml works too")
    p.add_argument("--agent", help="agent name (see `clew agents`)")
    p.add_argument("--model", help="model spec for LM agents, e.g. hf:PATH, vllm:NAME, "
                                   "openai:http://host:8000/v1#NAME; replay:RUN is --replay RUN")
    p.add_argument("--suite", help="SUITE:SPLIT (see `clew suites`) or FILE.jsonl[:SPLIT]")
    p.add_argument("--out", help="run directory (default: runs/AGENT-SUITE-SPLIT)")
    p.add_argument("--concurrency", type=int, metavar="N",
                   help=f"episodes run at once (default: {_default('concurrency')})")
    p.add_argument("--repeats", type=int, metavar="N",
                   help=f"episodes per task (default: {_default('repeats')})")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N tasks (default: all)")
    p.add_argument("--shard", metavar="I/N", help="run shard I of N of the tasks (tasks[I::N]); "
                                                  "combine the shards with `clew merge`")
    p.add_argument("--no-record", dest="record", action="store_false", default=None,
                   help="do not keep the LM requests and completions in RUN/lm/ (kept by "
                        "default, for replay)")
    p.add_argument("--replay", metavar="RUN",
                   help="answer every LM request from RUN's recording, with no model: the same "
                        "episodes and trees at any concurrency; agent, suite and options not "
                        "given are read from RUN; a request RUN lacks stops the run")
    p.add_argument("--resume", action="store_true", default=None,
                   help="continue a run: skip finished episodes, rerun interrupted ones; the "
                        "agent, suite and options not given are read from the run")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config overrides anywhere on the line, dotted keys for nested fields "
                        "(max_episode_steps=50 agent_options.search.n_simulations=20)")


def _resumed_defaults(out: str | None, replay: bool = False) -> dict[str, Any]:
    """What ``--resume`` reads from the run: every field a resume compares (and the
    concurrency, and whether LM calls are recorded or replayed), with paths the run stores
    relative to itself made usable from here. ``replay``: what a replay of the run reads from
    it instead: the same, except that the replay keeps a reflection memory of its own."""
    run = RunDir(out) if out else None
    if run is None or not run.holds_run():
        return {}
    recorded = run.config()
    carried = ("concurrency",) if replay else ("concurrency", "record", "replay")
    base = {k: recorded[k] for k in (*RESUME_KEYS, *carried) if recorded.get(k) is not None}
    memory = (base.get("agent_options") or {}).get("memory")
    if isinstance(memory, dict) and isinstance(memory.get("dir"), str):
        kept = {k: v for k, v in memory.items() if k != "dir"} if replay else \
            {**memory, "dir": str(run.resolve(memory["dir"]))}
        base["agent_options"] = {**base["agent_options"], "memory": kept}
    return base


def _eval_config(args: argparse.Namespace):
    flags = {k: getattr(args, k) for k in
             ("agent", "suite", "out", "concurrency", "repeats", "limit", "shard", "resume",
              "record", "replay") if getattr(args, k, None) is not None}
    if args.model and args.model.startswith("replay:"):   # the recorded run's own model
        flags["replay"] = args.model.removeprefix("replay:")
    elif args.model:  # a value, not YAML: 'fake:Action: up' stays a string
        flags["agent_options"] = {"model": args.model}
    defaults = {}
    if flags.get("replay"):   # what was recorded, unless the command line says otherwise
        if not (Path(flags["replay"]) / "config.yaml").is_file():
            raise ConfigError(f"replay: {flags['replay']} is not a run directory (no "
                              f"config.yaml)")
        defaults = _resumed_defaults(flags["replay"], replay=True)
    if args.resume:
        given = load_yaml(args.config, "agents")
        defaults = _resumed_defaults(flags.get("out") or given.get("out"))
        agent = flags.get("agent") or given.get("agent")
        if agent and agent != defaults.get("agent"):  # another agent: the run's options are
            defaults.pop("agent_options", None)        # not its; the resume check says so
    return load_config(EvalConfig, args.config, list(args.overrides), base=flags,
                       defaults=defaults, presets="agents")


def cmd_eval(args: argparse.Namespace) -> int:
    cfg = _eval_config(args)
    if args.command == "search":
        _check_search_agent(cfg.agent, cfg.agent_options)
    check_agent_models(cfg.agent, cfg.agent_options)
    _RUN["path"] = cfg.out or default_out(cfg)
    run, agg = evaluate(cfg)
    print(summary_table([(run.path.name, agg)]), end="")
    if 1 < len(agg["by_task"]) <= MAX_TASK_ROWS:
        print("\nPer task (repeats pooled):\n")
        print(summary_table(list(agg["by_task"].items()), label="task"), end="")
    counts = agg["counts"]
    print(f"{counts['finished']} episode(s) run, {counts['skipped']} already finished, "
          f"{counts['failed']} failed -> {run.path}")
    if cfg.replay:
        print(f"LM calls answered from the recording in {cfg.replay}")
    elif "recording" in agg:
        rec = agg["recording"]
        print(f"LM calls recorded in {run.path / 'lm'}: {rec['episodes']} episode(s), "
              f"{rec['bytes'] / 1e3:.1f} kB ({rec['bytes'] / 1e3 / rec['episodes']:.1f} kB per "
              f"episode)")
    if counts["failed"]:
        print(f"see {run.errors_file} for the failures; rerun with --resume to retry them",
              file=sys.stderr)
        return 1
    return 0


def _check_search_agent(name: str, options: dict[str, Any]) -> None:
    try:
        factory = resolve(name, options)[0]
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"agent: {exc.args[0]}") from None
    if factory != "search":
        raise ConfigError(f"agent: {name!r} is not a search agent (it records no trees); run it "
                          f"with `clew eval`, or pick a search agent from `clew agents`")


def cmd_score(args: argparse.Namespace) -> int:
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
    def line(name: str, about: str) -> str:
        entry = agent_entry(resolve(name, {})[0])
        families = ", ".join(entry.families) if entry.families else "all"
        model = {"required": "needed", "optional": "optional", "none": "-"}[model_need(name)]
        return f"{name:20s} {model:9s} {families:19s} {about}"

    print(f"{'agent':20s} {'--model':9s} {'env families':19s} what it is")
    for name in sorted(AGENTS):
        print(line(name, agent_entry(name).about))
    print("\npresets (configs/agents/NAME.yaml; `--agent NAME` or `--config NAME`):")
    for name in preset_names():
        print(line(name, f"{preset_about(name)} [preset of {load_preset(name)['agent']}]"))
    return 0


def cmd_suites(args: argparse.Namespace) -> int:
    for name in sorted(suite_builders()):
        try:
            suite = get_suite(name)
            sizes = ", ".join(f"{k}={len(v)}" for k, v in suite.splits.items())
            now = current_suite(name)
            status = "current" if now == name else f"superseded by {now}"
            print(f"{name:24s} v{suite.version}  {status:36s} {sizes}")
        except Exception as exc:  # noqa: BLE001 - one broken suite must not hide the others
            print(f"{name:24s} (unavailable: {type(exc).__name__}: {exc})")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    _RUN["path"] = args.out
    return run_demo(out=Path(args.out), quick=args.quick)


def _version() -> str:
    commit = git_commit()
    return f"clew {clew_version()}" + (f" (git {commit[:10]})" if commit else "")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs keep their line breaks (examples)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clew", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=_Formatter)
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of an error (anywhere on the line)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for name, help_text, text in (
            ("eval", "run an agent on a suite split", EVAL_HELP),
            ("search", "run a search agent on a suite split, recording its trees", SEARCH_HELP)):
        p = sub.add_parser(name, help=help_text, description=text, formatter_class=_Formatter,
                           epilog=_server_options())
        _add_eval_args(p)
        p.set_defaults(func=cmd_eval)

    p = sub.add_parser("score", help="score trajectories from a JSONL file (one JSON line each)")
    p.add_argument("file", help='JSONL: each line {"task": {...}, "actions": [...]}')
    p.add_argument("--no-labels", action="store_true", help="omit the per-step labels")
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("demo", help="the whole loop on the embedded defaults, on a CPU")
    p.add_argument("--out", default="runs/demo", help="output folder (default: runs/demo)")
    p.add_argument("--quick", action="store_true", help="smallest suites, for a smoke test")
    p.set_defaults(func=cmd_demo)

    sub.add_parser("agents", help="list agents: env families, model, presets") \
        .set_defaults(func=cmd_agents)
    sub.add_parser("suites", help="list suites and their splits").set_defaults(func=cmd_suites)

    for name, (module, help_text) in EXTRA_COMMANDS.items():
        mod = importlib.import_module(module)
        p = sub.add_parser(name, help=help_text, description=_plain(mod.__doc__),
                           formatter_class=_Formatter)
        mod.add_arguments(p)
        p.set_defaults(func=mod.run)
    return parser


def _is_override(token: str) -> bool:
    key, eq, _ = token.partition("=")
    return bool(eq) and bool(key) and not token.startswith("-")


def parse_args(argv: list[str]) -> argparse.Namespace:
    """argparse, except that ``key=value`` overrides may sit between options."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    free = "overrides" if hasattr(args, "overrides") else "items" if hasattr(args, "items") \
        else None
    moved = [t for t in extra if free and _is_override(t)]
    rest = [t for t in extra if t not in moved]
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if moved:
        given = list(getattr(args, free)) + moved
        setattr(args, free, sorted(given, key=argv.index))  # keep the command line's order
    return args


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that report a user's mistake (config, model spec, files, run directories),
    not a bug: one line, no traceback."""
    return (ConfigError, ModelSpecError, OptionsError, MemoryFormatError, MergeError,
            RecordingError, ReportError, RecordError, LockedError, TreeFormatError, TrainError,
            FileExistsError, FileNotFoundError, NotADirectoryError, IsADirectoryError,
            PermissionError)


def _say_error(exc: BaseException, debug: bool) -> None:
    if debug:
        traceback.print_exception(exc)
    text = str(exc) if not isinstance(exc, KeyError) else str(exc.args[0])
    text = text.strip().removeprefix("error: ")  # some messages carry the prefix already
    lines = [x for x in text.strip().splitlines() if x.strip()] or [type(exc).__name__]
    print("error: " + lines[0].strip(), file=sys.stderr)
    for extra in lines[1:]:  # several fields wrong at once: one line each
        print("  " + extra.strip(), file=sys.stderr)


def _stopped(signame: str) -> str:
    where = _RUN.get("path")
    if where is None:
        return f"{signame}; files already written are complete (clew writes atomically)"
    try:
        n = len(RunDir(where).episodes())
    except Exception:  # noqa: BLE001 - the message must not fail
        return f"{signame}; what finished is kept in {where}; rerun with --resume to continue"
    return (f"{signame}; {n} finished episode(s) are kept in {where}; rerun with --resume to "
            f"continue")


_TERMINATED: list[bool] = []   # set by SIGTERM (a cluster's scancel, a timeout)


def _on_sigterm(signum, frame) -> None:
    """SIGTERM unwinds like Ctrl-C. Inside a run's event loop the run's root task is cancelled
    (an exception raised here would land in whichever episode task the signal hit, and other
    tasks would end with it unretrieved); elsewhere KeyboardInterrupt is raised. SIGINT itself
    is not used: a shell starts background jobs with it ignored. A second SIGTERM (SLURM
    signals the job's every process, and its batch script passes the signal on) changes
    nothing: cancelling again would cut short the unwinding that records what finished."""
    if _TERMINATED:
        return
    _TERMINATED.append(True)
    runner = sys.modules.get("clew.runner.episodes")
    if runner is None or not runner.cancel_runs():
        raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("CLEW_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    _RUN.clear()
    _TERMINATED.clear()
    previous = None
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread (an embedding application): leave signals alone
        pass
    try:
        args = parse_args(argv)
        return int(args.func(args) or 0)
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        if _TERMINATED:
            print(f"terminated (SIGTERM): {_stopped('stopped')}", file=sys.stderr)
            return 143
        if isinstance(exc, asyncio.CancelledError):
            raise   # not ours: a bug to see
        print(f"interrupted: {_stopped('stopped')}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`clew score f | head`): stop quietly; point stdout at
        # /dev/null so that the interpreter's final flush does not complain either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:
        if isinstance(exc, RunAborted):
            if debug:
                traceback.print_exception(exc)
            print(f"error: run aborted: {exc}", file=sys.stderr)
            return 3
        if isinstance(exc, _user_errors()):
            _say_error(exc, debug)
            return 2
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)

