"""Evaluate an agent on a suite split into a run directory (``clew eval`` / ``clew search``).

An agent with a reflection memory runs in a fixed order of waves of ``concurrency`` episodes
(:func:`~clew.runner.episodes.run_suite` with ``waves``), so what each episode retrieves does not
depend on timing (docs/methods/reflection-memory.md#memory-order); its memory lives in the run
directory unless the config names another, and is released when the run ends.

The run's LM calls are recorded in ``RUN/lm/`` unless ``record`` is off; with ``replay`` they
are answered from another run's recording and no model is loaded; the waves then keep the
recorded run's size, whatever the concurrency (docs/methods/recording.md).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from clew.agents.lm.base import LMError
from clew.agents.lm.recording import (
    SESSION,
    Recorder,
    RecordingError,
    Replay,
    recording_size,
)
from clew.agents.lm.spec import experiment_options, loaded_engine_settings
from clew.agents.memory import close_memory
from clew.envs.registry import env_class
from clew.envs.suites import resolve
from clew.metrics.summary import aggregate, metrics_document, summary_table
from clew.records import RunDir
from clew.runner.config import ConfigError, EvalConfig
from clew.runner.episodes import run_suite
from clew.runner.provenance import clew_version, git_commit
from clew.runner.registry import (
    build_agent,
    check_fit,
    merge_options,
    search_memory,
    search_memory_dir,
)
from clew.runner.registry import resolve as resolve_agent
from clew.search.options import parse_agent_options

MAX_TASK_ROWS = 12  # summaries list tasks one by one for suites this small

# Fields that must not change when a run is resumed.
RESUME_KEYS = ("agent", "agent_options", "suite", "repeats", "env_options", "max_episode_steps",
               "max_invalid_streak", "repeat_limit", "shard", "limit")


def comparable(config: dict[str, Any], key: str) -> Any:
    """A config field as resume and merge compare it: engine-only model options (tensor-parallel
    size, memory fraction, batch limits, ...) do not make another experiment."""
    old = {new: old for old, new in EvalConfig.RENAMED.items()}.get(key)
    value = config.get(key, config.get(old) if old else None)   # runs recorded before a rename
    return experiment_options(value) if key == "agent_options" else value


def check_resume(run: RunDir, old: dict[str, Any], config: dict[str, Any]) -> None:
    """Refuse to resume ``run`` (recorded with ``old``) with a config that differs in a field
    that defines the run. Called by :meth:`RunDir.open` under the directory's lock."""
    for key in RESUME_KEYS:
        if comparable(old, key) != comparable(config, key):
            raise ConfigError(f"cannot resume {run.path}: config field {key!r} was "
                              f"{old.get(key)!r}, now {config.get(key)!r} (leave it out to use "
                              f"the run's, or choose another --out)")


def default_out(cfg: EvalConfig) -> str:
    suite = cfg.suite.replace(":", "-").replace("/", "_")
    shard = f"-shard-{cfg.shard.replace('/', '-of-')}" if cfg.shard else ""
    return str(Path("runs") / f"{cfg.agent}-{suite}{shard}")


def select_tasks(cfg: EvalConfig):
    try:
        tasks = resolve(cfg.suite)
    except FileNotFoundError as exc:
        raise ConfigError(f"suite: {exc.filename or cfg.suite}: no such file") from None
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"suite: {exc.args[0] if isinstance(exc, KeyError) else exc}") from None
    # Episodes are keyed by task id: two tasks with one id would share records and trees.
    repeated = sorted(i for i, n in Counter(t.id for t in tasks).items() if n > 1)
    if repeated:
        shown = ", ".join(map(repr, repeated[:5])) + (" ..." if len(repeated) > 5 else "")
        raise ConfigError(f"suite: {cfg.suite}: task id(s) {shown} appear more than once; every "
                          f"task needs its own id")
    if cfg.limit:
        tasks = tasks[: cfg.limit]
    if cfg.shard:
        i, n = (int(x) for x in cfg.shard.split("/"))
        tasks = tasks[i::n]
    return tasks


def check_agent(cfg: EvalConfig, tasks=(), run: Path | None = None) -> None:
    """Before any work: the agent plays the suite's env families and has the model it needs
    (:func:`~clew.runner.registry.check_fit`), and it builds (a bad name, option or model spec
    fails here). A reflection memory the check would open in the run directory ``run`` (or in
    no named place) is opened in a throwaway folder: the check leaves nothing behind."""
    try:
        families = {env_class(t.env).family for t in tasks}
    except KeyError as exc:
        raise ConfigError(f"suite: {exc.args[0]}") from None
    try:
        check_fit(cfg.agent, cfg.agent_options, families)
        with tempfile.TemporaryDirectory(prefix="clew-check-") as tmp:
            options = cfg.agent_options
            on, where = search_memory(cfg.agent, options)
            if on and (where is None or (run is not None and _inside(Path(where), run))):
                options = merge_options(options, {"memory": {"dir": tmp}})
            try:
                build_agent(cfg.agent, **options)
            finally:
                if on:  # the memory is opened once per process, with its lock: let it go
                    close_memory(tmp if options is not cfg.agent_options else where)
    except (KeyError, ValueError, TypeError) as exc:
        text = str(exc.args[0] if exc.args else exc)
        raise ConfigError(text if text.startswith(("agent ", "unknown agent", "model "))
                          else f"agent {cfg.agent!r}: {text}") from None
    except LMError as exc:  # the model cannot be loaded (missing package, folder, server)
        raise ConfigError(f"agent_options.model: {exc}") from None


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


MEMORY = "memory"  # the reflection memory's folder in a run (unless the config names another)


def stored_options(cfg: EvalConfig, run: RunDir) -> dict[str, Any]:
    """``agent_options`` as the run records them: a ``memory.dir`` given by the user (relative
    to the working directory) becomes relative to the run when it lies inside it, and is left
    out when it is the run's own ``memory/`` (the default), so the record does not depend on how
    ``--out`` was spelled, where clew ran, or where the run was moved to."""
    options = dict(cfg.agent_options)
    memory = options.get("memory")
    if isinstance(memory, dict) and isinstance(memory.get("dir"), str):
        memory = dict(memory)
        where = run.relative(memory["dir"])
        if where == MEMORY:
            del memory["dir"]
        else:
            memory["dir"] = where
        options["memory"] = memory
        if not memory:
            del options["memory"]
    return options


def live_options(name: str, stored: dict[str, Any], run: RunDir) -> dict[str, Any]:
    """The stored options with the memory folder as a path to use now (the run's ``memory/``
    for a search agent whose config names none): a resumed run keeps learning from it."""
    memory = stored.get("memory")
    if isinstance(memory, dict) and isinstance(memory.get("dir"), str):
        where = str(run.resolve(memory["dir"]).resolve())
    elif search_memory_dir(name, stored):
        where = str((run.path / MEMORY).resolve())
    else:
        return stored
    return merge_options(stored, {"memory": {"dir": where}})


def memory_dir(cfg: EvalConfig) -> str | None:
    """The reflection-memory folder of the agent ``cfg`` names, or None when it has none."""
    factory, merged, preset = resolve_agent(cfg.agent, cfg.agent_options)
    if factory != "search":
        return None
    opts = parse_agent_options(merged, preset or factory)
    return opts.memory.dir if opts.memory_on else None


def lm_session(cfg: EvalConfig, run: RunDir) -> Recorder | Replay | None:
    """The recording of the run's LM calls, the replay it answers from, or None."""
    if cfg.replay:
        if Path(cfg.replay).resolve() == run.path.resolve():
            raise ConfigError(f"replay: {cfg.replay} is the run being written; replay it into "
                              f"another --out")
        try:
            return Replay(cfg.replay)
        except RecordingError as exc:
            raise ConfigError(f"replay: {exc}") from None
    return Recorder(run.path, wave_size=cfg.concurrency) if cfg.record else None


def evaluate(cfg: EvalConfig, *, progress: bool = True) -> tuple[RunDir, dict[str, Any]]:
    tasks = select_tasks(cfg)
    run = RunDir(cfg.out or default_out(cfg))
    session = lm_session(cfg, run)
    token = SESSION.set(session)   # the models the agent loads are recorded, or replayed
    try:
        run, agg = _evaluate(cfg, tasks, run, session, progress)
    finally:
        SESSION.reset(token)
    files, size = recording_size(run.path)
    if files:
        agg["recording"] = {"episodes": files, "bytes": size}
    return run, agg


def _evaluate(cfg: EvalConfig, tasks, run: RunDir, session: Recorder | Replay | None,
              progress: bool) -> tuple[RunDir, dict[str, Any]]:
    check_agent(cfg, tasks, run.path)
    record = cfg.model_dump()
    record["agent_options"] = stored_options(cfg, run)
    record["out"] = str(run.path)
    record["clew_version"] = clew_version()
    record["git_commit"] = git_commit()
    engines = loaded_engine_settings()  # check_agent built the models: what they run with
    if engines:
        record["engines"] = engines
    run.open(record, resume=cfg.resume, check=lambda old: check_resume(run, old, record))
    try:
        if session is not None:
            session.start()
        options = live_options(cfg.agent, record["agent_options"], run)
        mem_dir = memory_dir(cfg.model_copy(update={"agent_options": options}))
        try:
            counts = asyncio.run(run_suite(
                lambda: build_agent(cfg.agent, **options), tasks, run,
                repeats=cfg.repeats, concurrency=cfg.concurrency, env_options=cfg.env_options,
                max_steps=cfg.max_episode_steps, max_invalid_streak=cfg.max_invalid_streak,
                repeat_limit=cfg.repeat_limit, progress=progress, waves=mem_dir is not None,
                parse_stop=(None if cfg.parse_failure_rate is None else
                            (cfg.parse_failure_rate, cfg.parse_failure_min_outputs)),
                wave_size=session.wave_size if isinstance(session, Replay) else None,
                lm_session=session,
            ))
        finally:
            if session is not None:
                session.close()
            if mem_dir is not None:
                close_memory(mem_dir)
        agg = finalize(run)
    finally:
        run.close()
    agg["counts"] = counts
    return run, agg


def finalize(run: RunDir) -> dict[str, Any]:
    """Write metrics.json and summary.md from the episodes on disk; return the aggregate.

    Episodes are taken in key order, not in the order they finished: floating-point sums depend
    on their order, and metrics.json is then the same whatever the concurrency (a replay's
    matches its recorded run's byte for byte)."""
    records = sorted(run.episodes(), key=lambda r: str(r.get("key", "")))
    doc = metrics_document(records)
    run.write_json("metrics.json", doc)
    text = summary_table([(run.path.name, doc["aggregate"])])
    if 1 < len(doc["by_task"]) <= MAX_TASK_ROWS:
        text += "\nPer task (repeats pooled):\n\n" + summary_table(list(doc["by_task"].items()),
                                                                  label="task")
    run.write_text("summary.md", text)
    agg = aggregate(records)
    agg["by_task"] = doc["by_task"]
    return agg
