"""Kill runs at random points, resume them, and check what is left (issue 19 acceptance).

``python tests/stress_kill.py --runs 200 --seed 1 --out /tmp/stress`` (the test runs 20). Each
run is ``clew search`` (MCTS with heuristic roles on a toy suite, so trees are written) in a
fresh directory:

* ``single``: one process, SIGKILL after a random delay;
* ``race``: a fresh run and a ``--resume`` of the same directory started together (the issue's
  case), or the ``--resume`` started once the first holds the directory, then SIGKILL to both
  after a random delay;
* ``twice``: killed, resumed and killed again.

Then one ``--resume`` runs to the end, and the directory must hold every episode exactly once
(counted on the raw lines of ``episodes.jsonl``), and ``--resume``, ``clew report``'s reader,
``clew merge`` and ``clew data`` must all accept it. Prints one JSON line of counts.

The driver imports clew once and forks each process, so a run costs its work, not the start of a
Python interpreter with torch; children write their output to ``RUN.log``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from collections import Counter
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import toyenv

toyenv.register()

from clew.cli.main import main
from clew.reports import report  # noqa: F401 - imported once, before the forks
from clew.runner import shards  # noqa: F401
from clew.training import datasets  # noqa: F401

N_TASKS, REPEATS = 6, 2
SEARCH = ["agent_options.search.n_simulations=3", "agent_options.search.branching_factor=2"]


def write_suite(path: Path) -> Path:
    path.write_text("".join(toyenv.line_task(i, length=2 + i % 3, budget=8).to_json() + "\n"
                            for i in range(N_TASKS)))
    return path


def fork(job, log: Path) -> int:
    """Fork a child that runs ``job()`` (its exit status) with its output in ``log``."""
    pid = os.fork()
    if pid == 0:  # child
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            code = job()
        except BaseException:  # noqa: BLE001 - a crash must show as a failed exit, in the log
            import traceback

            traceback.print_exc()
            code = 99
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return pid


def spawn(args: list[str], log: Path) -> int:
    """Fork a child that runs ``clew ARGS``; return its pid."""
    return fork(lambda: main(args), log)


def wait(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def reap(pid: int, timeout: float) -> dict[int, int]:
    """``{pid: exit code}`` once ``pid`` has ended within ``timeout`` seconds, else ``{}``."""
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {pid: os.waitstatus_to_exitcode(status)}
        time.sleep(0.005)
    return {}


def run_args(suite: Path, out: Path) -> list[str]:
    return ["search", "--agent", "mcts", "--suite", str(suite), "--out", str(out),
            "--repeats", str(REPEATS), "--concurrency", "2", *SEARCH]


def check(out: Path, scratch: Path, suite: Path) -> list[str]:
    """What is wrong with a resumed run directory (empty: nothing)."""
    from clew.reports.report import build_tables, load_run
    from clew.runner.shards import merge_shards
    from clew.training.datasets import DataConfig, build_datasets

    problems = []
    lines = [x for x in (out / "episodes.jsonl").read_text().splitlines() if x.strip()]
    keys = Counter(json.loads(x)["key"] for x in lines)
    want = {f"line-{i}#{r}" for i in range(N_TASKS) for r in range(REPEATS)}
    if set(keys) != want or any(n != 1 for n in keys.values()):
        problems.append(f"episodes: {dict(keys)}")
    if (out / ".lock").exists():
        problems.append("a lock file is left")
    try:
        build_tables([load_run(out)], None)
    except Exception as exc:  # noqa: BLE001 - any refusal is what this script reports
        problems.append(f"report: {exc}")
    try:
        merge_shards([out], scratch / "merged", allow_missing=True)
    except Exception as exc:  # noqa: BLE001
        problems.append(f"merge: {exc}")
    try:
        _, report = build_datasets(DataConfig(runs=[str(out)], el_max_actions=None))
        if report["episodes"] != len(want):
            problems.append(f"data read {report['episodes']} episodes")
    except Exception as exc:  # noqa: BLE001
        problems.append(f"data: {exc}")
    code = wait(spawn(run_args(suite, out) + ["--resume"], scratch / "again.log"))
    if code != 0:
        problems.append(f"--resume once more exited {code}")
    return problems


def check_into(out: Path, scratch: Path, suite: Path, found: Path) -> int:
    found.write_text(json.dumps(check(out, scratch, suite)))
    return 0


def stress(root: Path, runs: int, seed: int) -> dict:
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    suite = write_suite(root / "tasks.jsonl")
    # how long one whole run takes here: kills land anywhere in it
    t0 = time.monotonic()
    if wait(spawn(run_args(suite, root / "timing"), root / "timing.log")) != 0:
        raise SystemExit(f"the timing run failed: see {root / 'timing.log'}")
    full = time.monotonic() - t0
    stats = Counter()
    failures = {}
    for i in range(runs):
        out, log = root / f"run-{i}", root / f"run-{i}.log"
        mode = rng.choice(["single", "race", "twice"])
        stats[mode] += 1
        kills = 2 if mode == "twice" else 1
        for k in range(kills):
            first = run_args(suite, out) + (["--resume"] if k or mode == "twice" else [])
            pids = [spawn(first, log)]
            if mode == "race":
                if rng.random() < 0.5:   # started together
                    time.sleep(rng.uniform(0, 0.05))
                else:                    # the second comes while the first writes (a requeue)
                    stats["race: late"] += 1
                    until = time.monotonic() + max(2 * full, 2.0)
                    while not (out / ".lock").exists() and time.monotonic() < until:
                        time.sleep(0.005)
                pids.append(spawn(run_args(suite, out) + ["--resume"], log))
            codes: dict[int, int] = {}
            if mode == "race" and len(pids) == 2 and (out / ".lock").exists():
                # a late racer is refused in milliseconds: let it meet the lock before the kill
                codes.update(reap(pids[1], max(2 * full, 2.0)))
            time.sleep(rng.uniform(0, full))
            for pid in pids:
                if pid in codes:
                    continue
                try:
                    os.kill(pid, signal.SIGKILL)
                    stats["kills"] += 1
                except ProcessLookupError:
                    pass
            for pid in pids:
                code = codes[pid] if pid in codes else wait(pid)
                stats["killed" if code == -signal.SIGKILL else f"exit {code}"] += 1
        if (out / "episodes.jsonl").exists():
            stats["episodes before resume"] += len((out / "episodes.jsonl").read_text()
                                                   .splitlines())
        code = wait(spawn(run_args(suite, out) + ["--resume"], log))
        if code != 0:
            failures[str(out)] = [f"resume exited {code} (see {log})"]
            continue
        scratch = root / f"check-{i}"
        scratch.mkdir()
        found = scratch / "problems.json"
        # checked in a child too: the readers start threads, and a process with threads should
        # not fork the next runs
        wait(fork(partial(check_into, out, scratch, suite, found), scratch / "check.log"))
        problems = json.loads(found.read_text()) if found.exists() else \
            [f"the check crashed (see {scratch / 'check.log'})"]
        if problems:
            failures[str(out)] = problems
    logs = [log.read_text() for log in root.glob("run-*.log")]
    stats["stale locks taken over"] = sum(x.count("taking over the lock") for x in logs)
    stats["refused: in use"] = sum(x.count("is in use by pid") for x in logs)
    stats["tracebacks"] = sum(x.count("Traceback") for x in logs)
    return {"runs": runs, "seed": seed, "seconds_per_full_run": round(full, 2),
            **dict(stats), "failures": failures}


def main_cli() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="a new folder for the runs")
    a = p.parse_args()
    t0 = time.monotonic()
    result = stress(Path(a.out), a.runs, a.seed)
    result["wall_s"] = round(time.monotonic() - t0, 1)
    print(json.dumps(result))
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main_cli())
