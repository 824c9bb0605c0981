"""`scripts/slurm/search_array.sbatch` on a real scheduler: the local one-node SLURM cluster
(docs/scale-out.md#cpu-partitions-and-a-local-slurm-cluster), driven with sbatch, squeue, scancel
and sacct.

The cluster is started once for this module and stopped at its end; without SLURM (and no root to
install it) the tests skip with the reason. Finished jobs are read with `sacct --completion` (the
cluster keeps job completion records in a text file, no accounting database), which knows the
array tasks by their plain job ids: squeue maps an array's indexes to them.

Two kinds of search run here. The heuristic MCTS agent gives real, deterministic episodes, so a
merged array equals one unsharded run. A cancel or a time limit must land while a task is running
on a busy 2-core machine: there the search's model is `fake:` with a fixed latency per call, so
a task's length is wall-clock time spent waiting, not CPU.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[1]
LOCAL_CLUSTER = ROOT / "scripts" / "slurm" / "local_cluster.sh"
SCRIPT = ROOT / "scripts" / "slurm" / "search_array.sbatch"
# the script's #SBATCH lines ask for a GPU, 16 CPUs and 128 GB; the command line wins
CPU_ONLY = ["--gpus-per-node=0", "--cpus-per-task=1", "--mem=500M"]
SUITE = "gridmap-mini:train"
TASK_KEYS = ["gridmap-low-easy-s5", "gridmap-medium-easy-s6", "gridmap-low-medium-s5",
             "gridmap-medium-medium-s7"]           # its 4 tasks, in suite order
# MCTS whose policy and value read one scripted answer (no rubric: it has no rubric's form),
# each model call 0.25 s: about 1.5 s an episode, almost all of it waiting
PACED = """\
agent: mcts
max_steps: 3
repeats: {repeats}
agent_options:
  model: "fake:Thoughts: fine. STATUS CODE: C\\nAction: down"
  search: {{n_simulations: 2}}
  value: {{single: {{rubric: false, n: 2}}}}
  model_options: {{latency: 0.25}}
"""


class Cluster:
    """The SLURM commands, pointed at the local cluster's configuration."""

    def __init__(self, conf: Path):
        self.env = {**os.environ, "SLURM_CONF": str(conf)}

    def run(self, *cmd: str, cwd: Path | None = None) -> str:
        proc = subprocess.run(cmd, check=False, env=self.env, cwd=cwd, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, f"{' '.join(cmd)}: {proc.stderr}"
        return proc.stdout

    def sbatch(self, *options: str, cwd: Path, **variables) -> str:
        """Submit the array script (variables as `--export=ALL,NAME=value,...`); the job id."""
        assert not any("," in str(v) for v in variables.values())
        export = ",".join(["ALL", *(f"{k}={v}" for k, v in variables.items())])
        out = self.run("sbatch", "--parsable", *CPU_ONLY, *options, f"--export={export}",
                       str(SCRIPT), cwd=cwd)
        return out.strip().split(";")[0]

    def queued(self, job: str) -> list[str]:
        """The job's lines in the queue (pending, running or completing)."""
        return self.run("squeue", "-h", "-r", "-j", job, "-o", "%i %T").splitlines()

    def wait(self, job: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while self.queued(job):
            assert time.monotonic() < deadline, f"job {job} still queued: {self.queued(job)}"
            time.sleep(0.5)

    def tasks(self, array: str) -> dict[int, str]:
        """Array index -> the task's own job id (what sacct names it by)."""
        lines = self.run("squeue", "-h", "-r", "-t", "all", "-j", array, "-o", "%K %A")
        return {int(k): a for k, a in (line.split() for line in lines.splitlines())}

    def sacct(self, *jobs: str, timeout: float = 30) -> dict[str, str]:
        """Job id -> 'STATE exit:signal' from the job completion records."""
        deadline = time.monotonic() + timeout
        while True:
            # stderr: 22.05's reader of the records does not know their ArrayJobId fields
            proc = subprocess.run(["sacct", "--completion", "-n", "-P", "-j", ",".join(jobs),
                                   "-o", "JobID,State,ExitCode"], check=False,
                                  env=self.env, capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, proc.stderr
            rows = dict(line.split("|", 1) for line in proc.stdout.splitlines() if line)
            found = {j: rows[j].replace("|", " ") for j in jobs if j in rows}
            if len(found) == len(jobs) or time.monotonic() > deadline:
                return found
            time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("slurm")
    proc = subprocess.run(["bash", str(LOCAL_CLUSTER), "start", str(root)], check=False,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode == 2:                     # no SLURM here, and no root to install it
        pytest.skip(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    try:
        yield Cluster(root / "slurm.conf")
    finally:
        subprocess.run(["bash", str(LOCAL_CLUSTER), "stop", str(root)], check=False,
                       capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def common():
    """Variables every submission here passes: the venv of this test run."""
    venv = Path(sys.prefix)
    if not (venv / "bin" / "activate").exists() or not (venv / "bin" / "clew").exists():
        pytest.skip(f"the tests run from a venv with clew installed ({venv} is not one)")
    return {"CPU": 1, "VENV": venv}


@pytest.fixture(scope="module", autouse=True)
def time_limited(cluster, common, tmp_path_factory):
    """A one-minute task submitted before the other tests, so that its minute passes while they
    run: SLURM counts limits in whole minutes and ends a job up to about 30 s after its limit.
    Its search is 160 episodes one at a time, about four minutes."""
    tmp = tmp_path_factory.mktemp("time-limit")
    (tmp / "paced.yaml").write_text(PACED.format(repeats=40))
    run_vars = {"CONFIG": tmp / "paced.yaml", "SUITE": SUITE, "OUT": tmp / "run", "DOCTOR": 0,
                **common}
    array = cluster.sbatch("--array=0", "--time=1", cwd=tmp, CONCURRENCY=1, **run_vars)
    return {"tmp": tmp, "array": array, "vars": run_vars}


def merge_job(output: Path) -> str:
    """The merge job the first task queued, from its output file."""
    m = re.search(r"^Submitted batch job (\d+)$", output.read_text(), re.MULTILINE)
    assert m, output.read_text()
    return m.group(1)


def episodes(run: Path) -> list[dict]:
    path = run / "episodes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def without_wall(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k != "wall_s"}


def wait_for_episodes(run: Path, n: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(episodes(run)) < n:
        assert time.monotonic() < deadline, f"{run}: fewer than {n} episodes after {timeout} s"
        time.sleep(0.2)


def test_array_merged_equals_one_unsharded_run(cluster, common, tmp_path):
    """Three tasks of the heuristic MCTS agent, the merge queued behind them: the merged run
    holds the episodes of one unsharded run, and its report is written."""
    out = tmp_path / "sharded"
    array = cluster.sbatch("--array=0-2", cwd=tmp_path, AGENT="mcts-heuristic", SUITE=SUITE,
                           OUT=out, **common)
    cluster.wait(array)
    tasks = cluster.tasks(array)
    assert sorted(tasks) == [0, 1, 2]
    merge = merge_job(tmp_path / f"slurm-clew-search-{array}_0.out")
    cluster.wait(merge)
    states = cluster.sacct(*tasks.values(), merge)
    assert states == {j: "COMPLETED 0:0" for j in [*tasks.values(), merge]}, states
    for i in range(3):
        log = (tmp_path / f"slurm-clew-search-{array}_{i}.out").read_text()
        assert "driver " in log                  # the CPU preflight: `clew doctor`, no GPU needed
        assert f"shard {i}/3 on the CPUs" in log

    single = tmp_path / "single"
    proc = subprocess.run([str(Path(common["VENV"]) / "bin" / "clew"), "search", "--agent",
                           "mcts-heuristic", "--suite", SUITE, "--out", str(single)],
                          check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    merged = episodes(out / "merged")
    assert [r["key"] for r in merged] == [f"{k}#0" for k in TASK_KEYS]
    # a run's file is in the order episodes finished; the merge's in suite order
    assert {r["key"]: without_wall(r) for r in merged} == \
        {r["key"]: without_wall(r) for r in episodes(single)}
    assert len({r["outcome"]["success"] for r in merged}) == 2    # not four equal episodes
    merge_log = (tmp_path / f"slurm-clew-merge-{merge}.out").read_text()
    assert "merged 3 shard(s): 4 episode(s)" in merge_log
    report = (out / "merged" / "report.md").read_text()
    assert "| merged | mcts-heuristic |" in report and (out / "merged" / "report.html").exists()


def test_cancelled_task_resumes_by_its_index(cluster, common, tmp_path):
    """scancel of task 1 mid-run: it keeps its finished episodes and the merge is cancelled;
    resubmitted alone (--array=1, TASKS=3) it resumes, and its merge holds every episode once."""
    (tmp_path / "paced.yaml").write_text(PACED.format(repeats=4))
    out = tmp_path / "run"
    run_vars = {"CONFIG": tmp_path / "paced.yaml", "SUITE": SUITE, "OUT": out, "CONCURRENCY": 1,
                "DOCTOR": 0, **common}
    # shards 0, 1, 2 hold tasks 0 and 3, task 1, task 2: 8, 4 and 4 episodes
    array = cluster.sbatch("--array=0-2", cwd=tmp_path, **run_vars)
    shard = out / "shard-1-of-3"
    wait_for_episodes(shard, 1)
    cluster.run("scancel", f"{array}_1")
    cluster.wait(array)
    kept = episodes(shard)
    assert 1 <= len(kept) < 4, "the cancel should land mid-run"
    log = (tmp_path / f"slurm-clew-search-{array}_1.out").read_text()
    assert f"terminated (SIGTERM): stopped; {len(kept)} finished episode(s) are kept" in log
    assert "Traceback" not in log
    tasks = cluster.tasks(array)
    merge = merge_job(tmp_path / f"slurm-clew-search-{array}_0.out")
    cluster.wait(merge)
    assert cluster.sacct(tasks[0], tasks[1], tasks[2], merge) == {
        tasks[0]: "COMPLETED 0:0", tasks[1]: "CANCELLED 0:0", tasks[2]: "COMPLETED 0:0",
        merge: "CANCELLED 0:0"}
    assert not (out / "merged").exists()

    rerun = cluster.sbatch("--array=1", cwd=tmp_path, TASKS=3, **run_vars)
    cluster.wait(rerun)
    merge = merge_job(tmp_path / f"slurm-clew-search-{rerun}_1.out")
    cluster.wait(merge)
    assert cluster.sacct(cluster.tasks(rerun)[1], merge) == {
        cluster.tasks(rerun)[1]: "COMPLETED 0:0", merge: "COMPLETED 0:0"}
    log = (tmp_path / f"slurm-clew-search-{rerun}_1.out").read_text()
    assert f"{4 - len(kept)} episode(s) run, {len(kept)} already finished" in log
    merged = episodes(out / "merged")
    assert sorted(r["key"] for r in merged) == sorted(f"{k}#{i}" for k in TASK_KEYS
                                                      for i in range(4))
    by_key = {r["key"]: r for r in merged}
    assert all(by_key[r["key"]] == r for r in kept)        # kept as they were, not rerun


def test_failing_task_leaves_one_error_line_and_no_merge(cluster, common, tmp_path):
    """A bad option: every task fails with one `error:` line in its output file, and the
    merge queued behind them is cancelled rather than left pending for ever."""
    array = cluster.sbatch("--array=0-1", cwd=tmp_path, AGENT="mcts-heuristic", SUITE=SUITE,
                           OUT=tmp_path / "bad", DOCTOR=0, EXTRA="max_stepz=3", **common)
    cluster.wait(array)
    tasks = cluster.tasks(array)
    merge = merge_job(tmp_path / f"slurm-clew-search-{array}_0.out")
    cluster.wait(merge)
    assert cluster.sacct(tasks[0], tasks[1], merge) == {
        tasks[0]: "FAILED 2:0", tasks[1]: "FAILED 2:0", merge: "CANCELLED 0:0"}
    for i in range(2):
        log = (tmp_path / f"slurm-clew-search-{array}_{i}.out").read_text()
        errors = [line for line in log.splitlines() if "error" in line.lower()]
        assert len(errors) == 1 and errors[0].startswith("error: max_stepz"), log
        assert "Traceback" not in log
    assert not (tmp_path / "bad" / "merged").exists()


def test_time_limit_then_a_rerun_completes(cluster, time_limited):
    """A one-minute limit on a longer task: SLURM signals it, it keeps the episodes it
    finished; the rerun with a longer limit (and every episode at once) completes the run."""
    tmp, array, run_vars = time_limited["tmp"], time_limited["array"], time_limited["vars"]
    cluster.wait(array, timeout=300)
    task = cluster.tasks(array)[0]
    merge = merge_job(tmp / f"slurm-clew-search-{array}_0.out")
    cluster.wait(merge)
    assert cluster.sacct(task, merge) == {task: "TIMEOUT 0:0", merge: "CANCELLED 0:0"}
    kept = episodes(run_vars["OUT"] / "shard-0-of-1")
    log = (tmp / f"slurm-clew-search-{array}_0.out").read_text()
    assert "DUE TO TIME LIMIT" in log
    assert f"terminated (SIGTERM): stopped; {len(kept)} finished episode(s) are kept" in log
    assert 1 <= len(kept) < 160

    rerun = cluster.sbatch("--array=0", "--time=10", cwd=tmp, CONCURRENCY=160, **run_vars)
    cluster.wait(rerun)
    merge = merge_job(tmp / f"slurm-clew-search-{rerun}_0.out")
    cluster.wait(merge)
    assert cluster.sacct(cluster.tasks(rerun)[0], merge) == {
        cluster.tasks(rerun)[0]: "COMPLETED 0:0", merge: "COMPLETED 0:0"}
    merged = episodes(run_vars["OUT"] / "merged")
    assert sorted(r["key"] for r in merged) == sorted(f"{k}#{i}" for k in TASK_KEYS
                                                      for i in range(40))
    by_key = {r["key"]: r for r in merged}
    assert all(by_key[r["key"]] == r for r in kept)
