"""clew.records.DirLock: one process at a time in a directory; a dead holder's lock is taken
over with a warning; the refusal names the holder's pid and host."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from clew.records import DirLock, LockedError

HOLD = """
import sys, time
from clew.records import DirLock
DirLock(sys.argv[1], what="run directory").acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_second_holder_is_refused_with_pid_and_host(tmp_path):
    with DirLock(tmp_path / "run", what="run directory"), pytest.raises(LockedError) as err:
        DirLock(tmp_path / "run", what="run directory").acquire()
    msg = str(err.value)
    assert f"pid {os.getpid()}" in msg and socket.gethostname() in msg
    assert "run directory" in msg and str(tmp_path / "run") in msg
    # released: the file is gone and the lock can be taken again
    assert not (tmp_path / "run" / ".lock").exists()
    DirLock(tmp_path / "run").acquire().release()


def test_lock_of_a_killed_process_is_taken_over_with_a_warning(tmp_path, capsys):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "held"
    with pytest.raises(LockedError, match=f"pid {proc.pid} on host"):
        DirLock(tmp_path).acquire()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    lock = DirLock(tmp_path, what="run directory").acquire()
    err = capsys.readouterr().err
    assert f"taking over the lock of run directory {tmp_path} left by pid {proc.pid}" in err
    assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
    lock.release()


def test_waiting_holder_gets_the_lock_when_it_is_released(tmp_path):
    first = DirLock(tmp_path).acquire()
    timer = threading.Timer(0.2, first.release)
    timer.start()
    t0 = time.monotonic()
    second = DirLock(tmp_path).acquire(timeout=10)
    assert second.held and time.monotonic() - t0 >= 0.15
    second.release()
    timer.join()


def test_file_only_protocol_where_flock_is_missing(tmp_path, capsys):
    """Filesystems without flock: the file is the lock; a dead local holder is taken over, a
    live one or one on another host is not."""
    def file_only():
        lock = DirLock(tmp_path, what="reflection memory")
        lock._file_only = True
        return lock

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(dead.stdout)
    host = socket.gethostname()
    (tmp_path / ".lock").write_text(json.dumps({"pid": pid, "host": host}))
    lock = file_only().acquire()
    assert f"left by pid {pid} on host {host}" in capsys.readouterr().err
    with pytest.raises(LockedError, match=f"pid {os.getpid()}"):
        file_only().acquire()
    lock.release()
    (tmp_path / ".lock").write_text(json.dumps({"pid": pid, "host": "elsewhere"}))
    with pytest.raises(LockedError, match=r"pid \d+ on host elsewhere.*delete .*\.lock"):
        file_only().acquire()
