"""Evaluate an agent on a suite split into a run directory (``clew eval`` / ``clew search``).

An agent with a reflection memory runs in a fixed order of waves of ``concurrency`` episodes
(:func:`~clew.eval.runner.run_suite` with ``waves``), so what each episode retrieves does not
depend on timing (docs/methods/reflection-memory.md#memory-order); its memory lives in the run
directory unless the config names another, and is released when the run ends.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from clew.agents.lm.spec import experiment_options, loaded_engine_settings
from clew.envs.suites import resolve
from clew.eval.agents import build_agent, search_memory_dir
from clew.eval.agents import resolve as resolve_agent
from clew.eval.config import ConfigError, EvalConfig
from clew.eval.provenance import clew_version, git_commit
from clew.eval.runner import run_suite
from clew.eval.summary import aggregate, metrics_document, summary_table
from clew.records import RunDir

MAX_TASK_ROWS = 12  # summaries list tasks one by one for suites this small

# Fields that must not change when a run is resumed.
RESUME_KEYS = ("agent", "agent_options", "suite", "repeats", "env_options", "max_steps",
               "max_invalid_streak", "repeat_limit", "shard", "limit")


def comparable(config: dict[str, Any], key: str) -> Any:
    """A config field as resume and merge compare it: engine-only model options (tensor-parallel
    size, memory fraction, batch limits, ...) do not make another experiment."""
    value = config.get(key)
    return experiment_options(value) if key == "agent_options" else value


def check_resume(run: RunDir, config: dict[str, Any]) -> None:
    """Refuse to resume ``run`` with a config that differs in a field that defines the run."""
    if not (run.path / "config.yaml").exists():
        return
    old = run.config()
    for key in RESUME_KEYS:
        if comparable(old, key) != comparable(config, key):
            raise ConfigError(f"error: cannot resume {run.path}: config field {key!r} was "
                              f"{old.get(key)!r}, now {config.get(key)!r}")


def default_out(cfg: EvalConfig) -> str:
    suite = cfg.suite.replace(":", "-").replace("/", "_")
    shard = f"-shard-{cfg.shard.replace('/', '-of-')}" if cfg.shard else ""
    return str(Path("runs") / f"{cfg.agent}-{suite}{shard}")


def select_tasks(cfg: EvalConfig):
    try:
        tasks = resolve(cfg.suite)
    except (KeyError, ValueError, FileNotFoundError) as exc:
        raise ConfigError(f"config error:\n  suite: {exc}") from None
    if cfg.limit:
        tasks = tasks[: cfg.limit]
    if cfg.shard:
        i, n = (int(x) for x in cfg.shard.split("/"))
        tasks = tasks[i::n]
    return tasks


def check_agent(cfg: EvalConfig) -> None:
    """Build the agent once up front so a bad name or option fails before any work."""
    try:
        build_agent(cfg.agent, **cfg.agent_options)
    except (KeyError, ValueError, TypeError) as exc:
        raise ConfigError(f"config error:\n  agent: {exc}") from None


def memory_dir(cfg: EvalConfig) -> str | None:
    """The reflection-memory folder of the agent ``cfg`` names, or None when it has none."""
    factory, merged, preset = resolve_agent(cfg.agent, cfg.agent_options)
    if factory != "search":
        return None
    from clew.search.options import parse_agent_options

    opts = parse_agent_options(merged, preset or factory)
    return opts.memory.dir if opts.memory_on else None


def evaluate(cfg: EvalConfig, *, progress: bool = True) -> tuple[RunDir, dict[str, Any]]:
    tasks = select_tasks(cfg)
    check_agent(cfg)
    run = RunDir(cfg.out or default_out(cfg))
    if search_memory_dir(cfg.agent, cfg.agent_options):
        # Reflection memory lives in the run directory unless the config names another store
        # (docs/architecture.md#data-on-disk); a resumed run keeps learning from the same memory.
        memory = cfg.agent_options.setdefault("memory", {})
        memory["dir"] = str(run.path / "memory")
    mem_dir = memory_dir(cfg)
    record = cfg.model_dump()
    record["out"] = str(run.path)
    record["clew_version"] = clew_version()
    record["git_commit"] = git_commit()
    engines = loaded_engine_settings()  # check_agent built the models: what they run with
    if engines:
        record["engines"] = engines
    if cfg.resume:
        check_resume(run, record)
    run.open(record, resume=cfg.resume)
    try:
        counts = asyncio.run(run_suite(
            lambda: build_agent(cfg.agent, **cfg.agent_options), tasks, run,
            repeats=cfg.repeats, concurrency=cfg.concurrency, env_options=cfg.env_options,
            max_steps=cfg.max_steps, max_invalid_streak=cfg.max_invalid_streak,
            repeat_limit=cfg.repeat_limit, progress=progress, waves=mem_dir is not None,
            parse_stop=(None if cfg.parse_failure_rate is None else
                        (cfg.parse_failure_rate, cfg.parse_failure_min_outputs)),
        ))
    finally:
        if mem_dir is not None:
            from clew.agents.memory import close_memory

            close_memory(mem_dir)
    agg = finalize(run)
    agg["counts"] = counts
    return run, agg


def finalize(run: RunDir) -> dict[str, Any]:
    """Write metrics.json and summary.md from the episodes on disk; return the aggregate."""
    records = run.episodes()
    doc = metrics_document(records)
    run.write_json("metrics.json", doc)
    text = summary_table([(run.path.name, doc["aggregate"])])
    if 1 < len(doc["by_task"]) <= MAX_TASK_ROWS:
        text += "\nPer task (repeats pooled):\n\n" + summary_table(list(doc["by_task"].items()))
    run.write_text("summary.md", text)
    agg = aggregate(records)
    agg["by_task"] = doc["by_task"]
    return agg
