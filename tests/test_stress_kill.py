"""Acceptance of issue 19: 20 runs killed with SIGKILL at random points (some while two processes
race for the same directory), each resumed: every episode exactly once, and no directory that
--resume, the report, merge or data refuses. The driver is tests/stress_kill.py (run it by hand
with --runs 200 for the long version)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent


@pytest.mark.slow
def test_twenty_runs_killed_at_random_points_and_resumed(tmp_path):
    proc = subprocess.run([sys.executable, str(TESTS / "stress_kill.py"), "--runs", "20",
                           "--seed", "7", "--out", str(tmp_path / "stress")],
                          check=False, capture_output=True, text=True, timeout=900)
    assert proc.stdout.strip(), proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert proc.returncode == 0 and result["failures"] == {}, result
    assert result["race"] >= 3 and result["twice"] >= 3     # every kind of kill happened
    assert result["killed"] >= 15                           # most processes died mid-run
    assert 0 < result["episodes before resume"] < 20 * 12   # kills landed mid-run
    # both lock paths were taken: a racing process refused, a dead holder's lock taken over
    assert result["refused: in use"] >= 1 and result["stale locks taken over"] >= 1
    assert result["tracebacks"] == 0
