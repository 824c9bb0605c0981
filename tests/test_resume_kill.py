"""A run killed in the middle (SIGKILL) and resumed ends with every episode exactly once."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).parent

DRIVER = """
import sys
sys.path.insert(0, {tests!r})
import toyenv
toyenv.register()
from clew.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def write_tasks(path: Path, n: int) -> None:
    from toyenv import line_task

    path.write_text("".join(line_task(i, length=4).to_json() + "\n" for i in range(n)))


def clew(*args: str, **kw) -> subprocess.Popen:
    code = DRIVER.format(tests=str(TESTS))
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_killed_run_resumes_with_every_episode_exactly_once(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    write_tasks(tasks, 24)
    out = tmp_path / "run"
    args = ["eval", "--agent", "toy-scripted", "--suite", str(tasks), "--out", str(out),
            "--concurrency", "3", "agent_options.delay=0.05"]
    proc = clew(*args)
    episodes = out / "episodes.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline:
        if episodes.exists() and len(episodes.read_text().splitlines()) >= 4:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(episodes.read_text().splitlines())
    assert 4 <= done_before < 24, "the kill should land mid-run"

    proc = clew(*args, "--resume")
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    keys = [json.loads(line)["key"] for line in episodes.read_text().splitlines()]
    assert sorted(keys) == sorted(f"line-{i}#0" for i in range(24))
    assert f"{done_before} already finished" in stdout or "already finished" in stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["aggregate"]["episodes"] == 24
