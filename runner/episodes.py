"""The episode runner (docs/architecture.md): agents act, envs step, records land on disk.

``run_episode`` plays one task with one agent and returns its record. ``run_suite`` plays many
concurrently (asyncio, ``concurrency`` at once), appends each finished episode to the run
directory as soon as it ends, and skips finished ones on resume. With ``waves=True`` (agents that
learn across episodes through a reflection memory) the (task, repeat) list is cut into waves of
``concurrency`` episodes that run one wave after the other; each episode carries its place
(:class:`~clew.agents.base.EpisodeOrder`), so it sees exactly the reflections of the waves
before its own, whatever the timing (docs/methods/reflection-memory.md#memory-order).

The episode rules (the step limit, ``max_invalid_streak`` invalid actions in a row, the repeat
rule) are the :class:`~clew.envs.wrappers.EpisodeRules` wrapper around the env: ``None`` follows
what the env declares, ``0`` turns a rule off. A rule that fires ends the episode with
``outcome.stopped_by`` naming it; search agents simulate in a copy of the same wrapped env, so
their trees stop where the runner would.

Runner steps: two decisions are carried out by the runner, not by ``env.step``, and each costs
one step, valid or not: the episode rules count it and the env's clock advances by one (the
clock rule: docs/methods/exploratory-learning.md#backtrack-turns).

* BACKTRACK: an agent returns ``Decision(action="backtrack S<k>", info={"backtrack": k})``; the
  runner restores the snapshot of state ``k`` on the current path with ``keep_clock=True`` and
  cuts the path back to it. A target that is not on the path, or an env without
  ``supports_backtrack``, makes an invalid step that changes nothing else.
* No action (``info["no_action"]``, a search's NONE edge: nothing in the completion parsed): an
  invalid step; the env is not stepped with any text (docs/methods/mcts.md#stop-and-none-edges).

Both are recorded as executed interactions.

Charged simulation (``flags.simulation_mode == "charged"``,
docs/methods/mcts.md#free-and-charged-simulation): a search agent's new
simulated queries are asked for real while it searches (``Episode.charge``) and appear among the
executed steps; the query it then commits is not asked twice when the search already paid for it.
A search that charges nothing new and commits a known query ends the episode
(``stopped_by = "no_new_queries"``).

Failures that are not the run's (docs/methods/parsing.md#context-length): a request that does not
fit the model's context even with its history elided raises
:class:`~clew.agents.lm.base.ContextLengthError`; the episode ends there with ``stopped_by =
"context_length"`` and ``outcome.failure`` naming the step and the request, and is recorded like
any finished episode (``--resume`` keeps it rather than failing again). A model that is down
(:class:`LMError`) or a role whose parse-failure rate passes the run's threshold
(:class:`~clew.agents.parsing.ParseFailureRate`) aborts the run; finished episodes are kept.
Parse outcomes per role are in each record (``parses``) and, for the run, in the progress line.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from clew.agents.base import CURRENT_RUN, Agent, Decision, Episode, EpisodeOrder
from clew.agents.lm.base import ContextLengthError, LMError
from clew.agents.lm.recording import (
    EPISODE,
    Recorder,
    RecordingError,
    Replay,
    ReplayMismatch,
)
from clew.agents.parsing import ParseFailureRate, ParseTally
from clew.envs.base import Env, Observation, Step, Task
from clew.envs.registry import make_for
from clew.envs.wrappers import EpisodeRules
from clew.metrics import score_episode
from clew.records import RunDir
from clew.search.nodes import gather_all
from tqdm import tqdm

DEFAULT_MAX_STEPS = 1000


class RunAborted(RuntimeError):
    """The run cannot go on (a dead model server, ...); finished episodes are kept."""


def episode_key(task: Task, repeat: int) -> str:
    return f"{task.id}#{repeat}"


def _runner_step(env: EpisodeRules) -> None:
    """The clock rule of runner steps: the env's clock advances by one, valid or not."""
    env.set_clock(env.clock() + 1)


def _no_action(env: EpisodeRules) -> Step:
    _runner_step(env)
    obs = env.observation()
    return Step(Observation(f"Invalid action: the reply held no action that could be read.\n"
                            f"{obs.text}", obs.info), 0.0, env.done, False, {"no_action": True})


def _backtrack(env: EpisodeRules, episode: Episode, snapshots: dict[int, Any],
               target: Any) -> Step:
    _runner_step(env)
    try:
        k = int(target)
    except (TypeError, ValueError):
        k = None
    obs = env.observation()
    if not env.flags.supports_backtrack:
        reason = f"backtrack is not available in {env.name}"
    elif k is None or k not in episode.path[:-1] or k not in snapshots:
        reason = (f"cannot backtrack to S{target}: not an earlier state on the current path "
                  f"({', '.join(f'S{s}' for s in episode.path)})")
    else:
        env.restore(snapshots[k], keep_clock=True)
        del episode.path[episode.path.index(k) + 1:]
        back = env.observation()
        text = f"You backtracked to state S{k}.\n{back.text}"
        return Step(Observation(text, back.info), 0.0, env.done, True, {"backtrack": k})
    return Step(Observation(f"Invalid action: {reason}.\n{obs.text}", obs.info), 0.0, env.done,
                False, {"backtrack_error": reason})


def _flush_trees(episode: Episode, on_tree: Callable[[int, dict[str, Any]], None] | None) -> None:
    for t, tree in episode.trees:
        if on_tree:
            on_tree(t, tree)
    episode.trees.clear()


async def run_episode(
    agent: Agent,
    task: Task,
    *,
    key: str | None = None,
    env_options: dict[str, Any] | None = None,
    max_steps: int | None = None,
    max_invalid_streak: int | None = None,
    repeat_limit: int | None = None,
    on_tree: Callable[[int, dict[str, Any]], None] | None = None,
    parses: ParseTally | None = None,
    order: EpisodeOrder | None = None,
) -> dict[str, Any]:
    """Play one episode; return its record (what ``episodes.jsonl`` holds). ``parses``: the
    run's tally, which also counts this episode's parse outcomes (and may stop the run). Its
    LM calls are made under its key (:data:`~clew.agents.lm.recording.EPISODE`), so a recording
    keeps them per episode."""
    token = EPISODE.set(key or episode_key(task, 0))
    try:
        return await _play(agent, task, key=key, env_options=env_options, max_steps=max_steps,
                           max_invalid_streak=max_invalid_streak, repeat_limit=repeat_limit,
                           on_tree=on_tree, parses=parses, order=order)
    finally:
        EPISODE.reset(token)


async def _play(agent: Agent, task: Task, *, key: str | None,
                env_options: dict[str, Any] | None, max_steps: int | None,
                max_invalid_streak: int | None, repeat_limit: int | None,
                on_tree: Callable[[int, dict[str, Any]], None] | None,
                parses: ParseTally | None, order: EpisodeOrder | None) -> dict[str, Any]:
    start = time.perf_counter()
    env = EpisodeRules(make_for(task, **(env_options or {})), max_steps or DEFAULT_MAX_STEPS,
                       max_invalid_streak, repeat_limit)
    episode = Episode(task, env, env.reset(task), key or episode_key(task, 0), order)
    episode.usage.parses.parent = parses
    failure: dict[str, Any] | None = None
    # Snapshots only for agents that may backtrack: other agents should not pay for them.
    keep_snaps = env.flags.supports_backtrack and getattr(agent, "backtracks", False)
    snapshots = {0: env.snapshot()} if keep_snaps else {}
    next_id = 1
    stopped_by = None
    while not env.done:
        stopped_by = env.truncated_by
        if stopped_by:
            break
        charged_before = episode.charged
        try:
            decision = await agent.act(episode)
        except ContextLengthError as exc:
            _flush_trees(episode, on_tree)
            stopped_by = "context_length"
            failure = {"reason": "context_length", "t": episode.t, "detail": str(exc)}
            break
        if not isinstance(decision, Decision):
            decision = Decision(str(decision))
        if env.done or env.truncated_by:  # charged simulation spent the budget during the search
            _flush_trees(episode, on_tree)
            stopped_by = env.truncated_by
            break
        # Only agents that simulate are charged; any other agent meets the env's own rule on
        # repeated queries.
        if episode.charged and "backtrack" not in decision.info and \
                not env.is_stop(decision.action) and episode.knows(decision.action):
            _flush_trees(episode, on_tree)
            if episode.charged == charged_before:
                stopped_by = "no_new_queries"  # the search asks nothing new any more
                break
            continue  # the search already asked (and paid for) the chosen query
        if "backtrack" in decision.info:
            step = env.account(decision.action,
                               _backtrack(env, episode, snapshots, decision.info["backtrack"]))
        elif decision.info.get("no_action"):
            step = env.account(decision.action, _no_action(env))
        else:
            step = env.step(decision.action)
            if step.valid:
                episode.path.append(next_id)
                if keep_snaps:
                    snapshots[next_id] = env.snapshot()
                next_id += 1
        episode.record(decision, step)
        _flush_trees(episode, on_tree)
        if decision.info.get("end_episode") and not env.done:
            stopped_by = "agent_ended"  # e.g. episode.on_value_one = commit_path_and_end
            break
    # Agents may finish asynchronously (R-MCTS writes its reflections here): wait, so their
    # token usage is in the record and nothing is cancelled when the loop closes.
    try:
        finishing = agent.on_episode_end(episode)
        if inspect.isawaitable(finishing):
            await finishing
    except ContextLengthError as exc:   # the episode stands; what it would have taught is lost
        failure = failure or {"reason": "context_length", "t": episode.t, "detail": str(exc),
                              "during": "on_episode_end"}
    if stopped_by != "context_length":
        stopped_by = "done" if env.done else (stopped_by or "max_steps")
    record = _record(agent, episode, env, stopped_by, time.perf_counter() - start)
    if failure is not None:
        record["outcome"]["failure"] = failure
    record["parses"] = episode.usage.parses.to_dict()
    record["env_options"] = dict(env_options or {})
    try:
        record["metrics"] = score_episode(task, record)
    except Exception as exc:  # noqa: BLE001 (a metric bug must not lose the episode)
        record["metrics"] = {"error": f"{type(exc).__name__}: {exc}"}
    return record


def _record(agent: Agent, episode: Episode, env: Env, stopped_by: str, wall: float) -> dict:
    executed = sum(1 for i in episode.interactions if i.kind == "executed")
    simulated = len(episode.interactions) - executed
    grade = float(env.grade())
    return {
        "key": episode.key,
        "agent": getattr(agent, "name", type(agent).__name__),
        "agent_kind": getattr(agent, "kind", "unknown"),
        "task": episode.task.to_dict(),
        "actions": episode.actions(),
        "steps": [asdict(s) for s in episode.steps],
        "interactions": {"executed": executed, "simulated": simulated},
        "usage": episode.usage.to_dict(),
        "outcome": {
            "success": grade >= 1.0 if env.flags.outcome_mode == "terminal_success" else None,
            "grade": grade,
            "return": sum(s.reward for s in episode.steps),
            "steps": len(episode.steps),
            "invalid": sum(1 for s in episode.steps if not s.valid),
            "stopped_by": stopped_by,
            "charged_simulation": episode.charged,
            "peeked_states": episode.peeked_states(),
            **({} if episode.success_est is None else {"success_est": episode.success_est}),
            # agents that may backtrack (EL-distilled): accepted backtracks, a headline column
            **({"backtracks": sum(1 for s in episode.steps if "backtrack" in s.info)}
               if getattr(agent, "backtracks", False) else {}),
        },
        **({} if episode.memory is None else {"memory": episode.memory}),
        "wall_s": round(wall, 4),
        # engine time, busy share, GPU-seconds, cache hits per role: they vary between runs
        # (docs/methods/recording.md#compute-accounting)
        **({"compute": compute} if (compute := episode.usage.compute()) else {}),
    }


class GroupWriter:
    """Appends finished episodes off the event loop, one fsync per batch (group commit).

    ``append`` returns once the record is durable. While one batch is being written, records
    that finish meanwhile wait and go in the next batch, so K concurrent episodes cost about one
    fsync per batch instead of K serial fsyncs blocking the loop (benchmarks/bench_concurrency).
    """

    def __init__(self, write_batch: Callable[[list[dict[str, Any]]], None]):
        self.write_batch = write_batch
        self.pending: list[tuple[dict[str, Any], asyncio.Future]] = []
        self.flushing = False

    async def append(self, record: dict[str, Any]) -> None:
        done = asyncio.get_running_loop().create_future()
        self.pending.append((record, done))
        if not self.flushing:
            self.flushing = True
            try:
                while self.pending:
                    batch, self.pending = self.pending, []
                    try:
                        await asyncio.to_thread(self.write_batch, [r for r, _ in batch])
                    except Exception as exc:  # noqa: BLE001 (handed to every waiting writer)
                        for _, fut in batch:
                            fut.set_exception(exc)
                    else:
                        for _, fut in batch:
                            fut.set_result(None)
            finally:
                self.flushing = False
        await done


#: the root task of each suite being played (what :func:`cancel_runs` stops)
_RUNNING: set[asyncio.Task] = set()


def cancel_runs() -> bool:
    """Cancel every suite being played (SIGTERM, from the CLI's signal handler): each root
    task unwinds with its episode tasks through their ``finally`` blocks, rather than an
    exception landing in whichever task the signal hit. False when none is running."""
    for task in list(_RUNNING):
        task.cancel()
    return bool(_RUNNING)


async def run_suite(
    agent_factory: Callable[[], Agent],
    tasks: list[Task],
    run: RunDir,
    *,
    repeats: int = 1,
    concurrency: int = 4,
    env_options: dict[str, Any] | None = None,
    max_steps: int | None = None,
    max_invalid_streak: int | None = None,
    repeat_limit: int | None = None,
    progress: bool = True,
    parse_stop: tuple[float, int] | None = None,
    waves: bool = False,
    wave_size: int | None = None,
    lm_session: Recorder | Replay | None = None,
) -> dict[str, int]:
    """Play every (task, repeat) not yet finished in ``run``; return counts.

    One agent per episode (``agent_factory``) keeps episodes independent; agents that learn
    across tasks (reflection memory) share state through their factory on purpose. The run is
    ``CURRENT_RUN`` while it plays, so such state can be kept per run. ``waves``: run in a fixed
    order of waves (see the module docstring); a wave starts when the one before has finished.
    ``parse_stop = (rate, min_outputs)`` stops the run once a role that has read at least
    ``min_outputs`` completions in this session failed to parse more than ``rate`` of them.
    ``wave_size``: episodes per wave (default ``concurrency``; a replay keeps the recorded
    run's). ``lm_session``: the recording (or replay) of the run's LM calls; a finished episode's
    calls are written before its record (docs/methods/recording.md).
    """
    token = CURRENT_RUN.set(str(run.path.resolve()))
    root = asyncio.current_task()
    _RUNNING.add(root)
    done = run.finished_keys()
    order = [(t, r) for t in tasks for r in range(repeats)]
    todo = [(i, t, r) for i, (t, r) in enumerate(order) if episode_key(t, r) not in done]
    counts = {"skipped": len(tasks) * repeats - len(todo), "finished": 0, "failed": 0,
              "context_length": 0}
    parses = ParseTally(limit=parse_stop)
    sem = asyncio.Semaphore(max(1, concurrency))
    bar = _progress(len(todo), progress)
    aborted = False
    writer = GroupWriter(run.append_episodes)

    size = max(1, wave_size or concurrency)

    async def one(position: int, task: Task, repeat: int) -> None:
        nonlocal aborted
        key = episode_key(task, repeat)
        place = EpisodeOrder(CURRENT_RUN.get(), position // size, position) if waves else None
        async with sem:
            if aborted:
                return
            run.clear_trees(key)
            try:
                if lm_session is not None:
                    lm_session.begin(key)
                record = await run_episode(
                    agent_factory(), task, key=key, env_options=env_options,
                    max_steps=max_steps, max_invalid_streak=max_invalid_streak,
                    repeat_limit=repeat_limit,
                    on_tree=lambda t, tree: run.write_tree(key, t, tree), parses=parses,
                    order=place)
            except ParseFailureRate as exc:
                aborted = True
                _forget(lm_session, key)
                raise RunAborted(
                    f"parse failures: {exc}\n{counts['finished']} episode(s) finished in this "
                    f"session are kept in {run.path}; fix the model or its prompts and rerun "
                    "with --resume (parse_failure_rate sets the threshold)") from exc
            except RecordingError as exc:   # a damaged recording: no episode can be replayed
                aborted = True
                raise RunAborted(f"{exc}; {counts['finished']} episode(s) finished in this "
                                 f"session are kept in {run.path}") from exc
            except LMError as exc:
                aborted = True
                _forget(lm_session, key)
                run.append_error({"key": key, "task_id": task.id, "error": str(exc),
                                  "kind": "model"})
                mismatch = _cause(exc, ReplayMismatch)
                if mismatch is not None:   # one line: what differs, and what is kept
                    raise RunAborted(f"{mismatch}; {counts['finished']} episode(s) finished "
                                     f"in this session are kept in {run.path}") from exc
                raise RunAborted(
                    f"model failure in episode {key}: {exc}\n{counts['finished']} episode(s) "
                    f"finished in this session are kept in {run.path}; fix the model and rerun "
                    f"with --resume") from exc
            except Exception as exc:  # noqa: BLE001 (one episode's bug fails that episode only)
                counts["failed"] += 1
                _forget(lm_session, key)
                # the innermost frames: where the bug is
                run.append_error({"key": key, "task_id": task.id,
                                  "error": f"{type(exc).__name__}: {exc}",
                                  "traceback": traceback.format_exc(limit=-12)})
                print(f"episode {key} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                _tick(bar, counts, parses)
                return
            except BaseException:   # cancelled (another episode aborted the run, SIGTERM)
                _forget(lm_session, key)
                raise
            if lm_session is not None:   # the calls first: a recorded episode has them all
                await asyncio.to_thread(lm_session.finish, key)
            await writer.append(record)
            counts["finished"] += 1
            if record["outcome"].get("stopped_by") == "context_length":
                counts["context_length"] += 1
            _tick(bar, counts, parses)

    groups = [todo]
    if waves:   # one group per wave, in order; a group starts when the one before has finished
        by_wave: dict[int, list] = {}
        for item in todo:
            by_wave.setdefault(item[0] // size, []).append(item)
        groups = [by_wave[w] for w in sorted(by_wave)]
    try:
        for group in groups:
            await gather_all(*(one(*item) for item in group))   # a RunAborted cancels the rest
    finally:
        _RUNNING.discard(root)
        bar.close()
        CURRENT_RUN.reset(token)
    return counts


def _forget(session: Recorder | Replay | None, key: str) -> None:
    """The calls of an episode that did not finish are not kept."""
    if session is not None:
        session.discard(key)


def _cause(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """``exc`` or the first exception of ``kind`` it was raised from (a value role wraps the
    model's error in its own)."""
    while exc is not None and not isinstance(exc, kind):
        exc = exc.__cause__
    return exc


def progress_note(parses: ParseTally, context_failures: int) -> str:
    """The progress line's note: parse-failure rate per role, context-length failures."""
    rates = " ".join(f"{role} {r.rate:.0%}" for role, r in sorted(parses.items()))
    return f"parse fail: {rates or '-'} | ctx fail: {context_failures}"


def _progress(total: int, enabled: bool):
    return tqdm(total=total, desc="episodes", unit="ep", disable=not enabled or total == 0,
                file=sys.stderr, leave=False)


def _tick(bar, counts: dict[str, int], parses: ParseTally) -> None:
    """One more episode over (recorded, or failed). Redrawn at once: tqdm skips a redraw within
    ``mininterval`` of the last, and the next episode may be minutes away (a slow model), so
    the bar would show fewer episodes than are done."""
    note = progress_note(parses, counts["context_length"])
    if counts["failed"]:
        note += f" | {counts['failed']} failed"
    bar.set_postfix_str(note, refresh=False)
    bar.update(1)
    bar.refresh()
