"""One process at a time in a directory: :class:`DirLock` (docs/architecture.md, Records).

A run directory (and a reflection-memory directory) is written by one process at a time; a
second ``clew eval --out X`` or ``--resume`` on the same directory would interleave appends and
leave records twice. ``DirLock(directory, what="run directory")`` holds ``directory/.lock``:

* The lock is an ``flock`` on that file, so the kernel releases it when its holder dies, even by
  SIGKILL; nothing stale can keep a directory locked. The file names its holder (pid, host,
  start time, command) so that the refusal says who holds it.
* A file that still names a holder when the lock is free was left by a process that died holding
  it: it is taken over with a warning naming that process.
* Where the filesystem has no ``flock`` (some cluster filesystems answer ENOSYS or ENOLCK), the
  file alone is the lock: created exclusively, and taken over only when its holder ran on this
  host and is gone; a holder on another host is never guessed dead, the message says how to
  remove the file.
* ``timeout`` > 0 waits that many seconds for the holder to finish (for short critical sections
  such as a memory write); 0 refuses at once.

Release deletes the file while still holding the lock; a waiter that then locks the deleted
file notices (its inode is no longer the path's) and tries again.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

LOCK_NAME = ".lock"

try:
    import fcntl
except ImportError:  # not POSIX: the file-only protocol below
    fcntl = None


class LockedError(RuntimeError):
    """The directory is in use by another process; the message names it (pid and host)."""


def _describe(holder: dict[str, Any] | None) -> str:
    if not holder:
        return "another process"
    since = holder.get("started")
    when = f", since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))}" \
        if isinstance(since, (int, float)) else ""
    return f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}{when}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


class DirLock:
    """An exclusive, process-wide lock on ``directory`` (see the module docstring).

    Use as a context manager or with :meth:`acquire` / :meth:`release`. ``what`` names the
    directory in messages ("run directory", "reflection memory").
    """

    def __init__(self, directory: str | Path, *, what: str = "directory", name: str = LOCK_NAME):
        self.directory = Path(directory)
        self.path = self.directory / name
        self.what = what
        self._fd: int | None = None
        self._file_only = False

    @property
    def held(self) -> bool:
        return self._fd is not None

    def holder(self) -> dict[str, Any] | None:
        """What the lock file says about its holder (None when there is no readable file)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "null")
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _me(self) -> bytes:
        return json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                           "started": round(time.time(), 3),
                           "command": " ".join(sys.argv)[:300]}).encode()

    def _refuse(self, holder: dict[str, Any] | None, hint: str = "") -> LockedError:
        return LockedError(
            f"{self.what} {self.directory} is in use by {_describe(holder)}; wait for it to "
            f"finish or stop it{hint}")

    def acquire(self, timeout: float = 0.0) -> DirLock:
        if self.held:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            try:
                if self._try():
                    return self
            except LockedError:
                if time.monotonic() >= deadline:
                    raise
            time.sleep(0.05)

    def _try(self) -> bool:
        """One attempt: True when held, False to retry at once, LockedError when busy."""
        if self._file_only or fcntl is None:
            return self._try_file_only()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise self._refuse(self.holder()) from None
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                self._file_only = True
                return False
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # the holder released (deleted) the file we locked: try the new one
            os.close(fd)
            return False
        left = os.read(fd, 4096)
        if left.strip():
            try:
                old = json.loads(left)
            except ValueError:
                old = None
            print(f"warning: taking over the lock of {self.what} {self.directory} left by "
                  f"{_describe(old if isinstance(old, dict) else None)}, which is no longer "
                  f"running", file=sys.stderr)
        os.ftruncate(fd, 0)
        os.pwrite(fd, self._me(), 0)
        os.fsync(fd)
        self._fd = fd
        return True

    def _try_file_only(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            holder = self.holder()
            here = holder and holder.get("host") == socket.gethostname()
            pid = holder.get("pid") if holder else None
            if here and isinstance(pid, int) and not _alive(pid):
                print(f"warning: taking over the lock of {self.what} {self.directory} left by "
                      f"{_describe(holder)}, which is no longer running", file=sys.stderr)
                self.path.unlink(missing_ok=True)
                return False
            raise self._refuse(holder, hint=f" (if it is gone, delete {self.path})") from None
        os.write(fd, self._me())
        os.fsync(fd)
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            self.path.unlink(missing_ok=True)  # while still holding it; see the module docstring
        finally:
            os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self) -> DirLock:  # noqa: PYI034 - Self needs Python 3.11
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
