"""One Chromium for BrowserGym, found and started by clew on first use (docs/web.md).

Everything here is lazy: importing this module imports neither Playwright nor BrowserGym. The
first call of :func:`call` starts a worker thread, starts Playwright in it and installs clew's
browser hook into BrowserGym; every later Playwright call runs in that thread.

Why a thread: Playwright's sync API refuses to run in a thread with a running asyncio loop, and
clew's runner steps environments from inside its event loop. Playwright objects belong to the
thread that made them, so all browser work goes to one worker thread (:func:`call` blocks until
the job is done, so an ``Env.step`` stays synchronous).

Decision, how Chromium is found (the issue left the choice between a ``PLAYWRIGHT_BROWSERS_PATH``
folder of links and BrowserGym's ``_set_global_playwright`` hook): the hook. BrowserGym asks its
global Playwright object for every browser it launches (the task page in ``BrowserEnv.reset`` and
its chat window in ``Chat``); clew hands it a thin stand-in whose ``chromium.launch`` returns one
browser per launch configuration, started once per process with ``executable_path`` set, and
whose ``close`` leaves that browser running (the browser contexts, which hold all page state,
are still closed). That gives

* no files written and no dependence on the browser revision a Playwright release expects (the
  links folder must be named after it and breaks silently when Playwright is upgraded);
* one browser kept alive across resets, replays and episodes: BrowserGym's own ``reset`` launches
  two browsers each time (about 0.8 s here), which a search that resets for every replayed
  simulation cannot afford. Pages are isolated by their browser contexts, which BrowserGym
  creates per reset as usual.

Which Chromium: ``CLEW_CHROMIUM`` if set, else the first of ``chromium``, ``chromium-browser``,
``google-chrome`` on ``PATH``; with none of them, Playwright's own download (``playwright install
chromium``) is used if present.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
#: BrowserGym's launch flags that change what a page looks like; they apply to the shared browser.
LAUNCH_ARGS = ["--disable-features=OverlayScrollbars,ExtendedOverlayScrollbars"]


class BrowserSetupError(RuntimeError):
    """No usable Chromium or Playwright; the message says what to install."""


def chromium_path() -> str | None:
    """The Chromium executable clew passes to Playwright (``None``: Playwright's own)."""
    explicit = os.environ.get("CLEW_CHROMIUM")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise BrowserSetupError(f"error: CLEW_CHROMIUM={explicit} is not an executable file")
        return explicit
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


# --- the stand-in BrowserGym launches browsers through ----------------------------------------
class _KeptBrowser:
    """A shared browser as BrowserGym sees it: ``close`` is left to clew (at process exit)."""

    def __init__(self, browser: Any):
        self._browser = browser

    def close(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._browser, name)


class _SharedChromium:
    """``playwright.chromium`` with one browser per (headless, slow_mo), started on demand."""

    def __init__(self, chromium: Any, executable: str | None):
        self._chromium = chromium
        self._executable = executable
        self.browsers: dict[tuple, Any] = {}
        self.launches = 0

    def launch(self, headless: bool = True, slow_mo: float | None = None, **_: Any) -> _KeptBrowser:
        # Other launch options BrowserGym passes (window size of the chat, scrollbar flags) do not
        # change headless pages beyond LAUNCH_ARGS, so one browser serves them all.
        key = (bool(headless), slow_mo or 0)
        browser = self.browsers.get(key)
        if browser is None or not browser.is_connected():
            kwargs: dict[str, Any] = {"headless": key[0], "slow_mo": key[1], "args": LAUNCH_ARGS,
                                      "ignore_default_args": ["--hide-scrollbars"]}
            if self._executable:
                kwargs["executable_path"] = self._executable
            try:
                browser = self._chromium.launch(**kwargs)
            except Exception as exc:  # noqa: BLE001 - Playwright's error names what is missing
                where = self._executable or "Playwright's own Chromium"
                raise BrowserSetupError(
                    f"error: cannot start Chromium ({where}) for BrowserGym: "
                    f"{str(exc).splitlines()[0]}\nInstall Debian's chromium (apt-get install "
                    "chromium), point CLEW_CHROMIUM at a Chromium executable, or run "
                    "`playwright install chromium`.") from None
            self.browsers[key] = browser
            self.launches += 1
        return _KeptBrowser(browser)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._chromium, name)


class _Playwright:
    """The Playwright object handed to ``browsergym.core._set_global_playwright``."""

    def __init__(self, playwright: Any, executable: str | None):
        self._playwright = playwright
        self.chromium = _SharedChromium(playwright.chromium, executable)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._playwright, name)

    def stop(self) -> None:
        for browser in self.chromium.browsers.values():
            with contextlib.suppress(Exception):  # already gone at exit
                browser.close()
        self._playwright.stop()


# --- the worker thread ----------------------------------------------------------------------------
class _Worker:
    """A daemon thread running browser jobs in order (see the module docstring)."""

    def __init__(self) -> None:
        self.jobs: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="clew-browser", daemon=True)
        self.thread.start()
        self.playwright: _Playwright | None = None

    def _loop(self) -> None:
        while True:
            fn, fut = self.jobs.get()
            if fn is None:
                return
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                fut.set_exception(exc)

    def submit(self, fn: Callable[[], T]) -> Future:
        fut: Future = Future()
        self.jobs.put((fn, fut))
        return fut

    def start_playwright(self) -> None:
        """Runs in the worker: start Playwright and install the hook (once)."""
        import browsergym.core
        from playwright.sync_api import sync_playwright

        executable = chromium_path()
        self.playwright = _Playwright(sync_playwright().start(), executable)
        browsergym.core._set_global_playwright(self.playwright)

    def shutdown(self) -> None:
        if self.playwright is not None:
            self.submit(self.playwright.stop).exception(timeout=10)
        self.jobs.put((None, None))
        self.thread.join(timeout=10)


_worker: _Worker | None = None
_lock = threading.Lock()


def _get_worker() -> _Worker:
    global _worker
    with _lock:
        if _worker is None:
            worker = _Worker()
            err = worker.submit(worker.start_playwright).exception()
            if err is not None:
                worker.shutdown()
                raise err
            atexit.register(worker.shutdown)
            _worker = worker
    return _worker


def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` in the browser thread and return its result (or raise)."""
    worker = _get_worker()
    if threading.current_thread() is worker.thread:
        return fn(*args, **kwargs)
    return worker.submit(lambda: fn(*args, **kwargs)).result()


def call_later(fn: Callable[..., Any], *args: Any) -> None:
    """Queue ``fn(*args)`` in the browser thread without waiting (cleanup of finished pages)."""
    if _worker is not None:
        _worker.submit(lambda: fn(*args))


def launches() -> int:
    """Browsers started in this process so far (tests check that replays start none)."""
    worker = _worker
    return 0 if worker is None or worker.playwright is None else \
        worker.playwright.chromium.launches
