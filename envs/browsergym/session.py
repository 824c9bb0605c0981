"""One episode's browser pages, the transitions seen on them, and replays (docs/web.md).

A web page cannot be copied, so search moves between states the way ExACT does with its browser:
**reset with the task seed and replay the action prefix**. A :class:`BrowserEpisode` holds, for one
episode,

* two BrowserGym pages (each a ``BrowserEnv`` with its own browser context, in the one Chromium of
  :mod:`.chromium`): the *real* page, which only the runner's env steps, and the *simulation* page,
  which every copy made for search shares, opened on first use;
* the known transitions: the :class:`~.observation.PageRecord` reached by every action prefix
  either page has executed. A state of the clew env is such a prefix, so snapshots are free;
* counters for the metrics (resets, replays, replayed steps, seconds).

A page remembers the prefix it is at. Stepping from prefix ``p`` first brings the page to ``p``:
nothing to do if it is there, the missing actions if it is at a shorter prefix of ``p``, else a
reset with the task seed and the whole of ``p``. Every replayed page is compared with the record
of its prefix (the **determinism check**); a difference raises :class:`ReplayMismatch` naming the
task, the seed, the step and the action. A simulated step from a prefix whose transition is already
known is answered from the record without touching the browser (the page would be the same, or
the check would have failed); the real page always executes, and its result is checked against
what the simulation recorded.

Decision, how a page is reset for a replay: BrowserGym's ``reset`` opens a new browser context,
chat window and page each time (about 1.5 s here); a replay instead tears the task down and sets a
new task object with the same seed up on the page that is already open (BrowserGym's
``task.setup``, which navigates to the task's start page: about 0.6 s), with the chat history cut
back to what the first reset left. The determinism check compares the result with the first
reset's page, so a task where this differs fails loudly at step 0; ``soft_reset=False`` uses
BrowserGym's full ``reset`` for every replay instead.

Decision: the page after a step that ended the task is checked on its reward and end only. Once a
MiniWoB++ task ends it shows its result and starts over on a timer, so that page depends on timing,
and no action is ever taken from it.

Decision: a MiniWoB++ task's reward is 1 for full credit only. MiniWoB++ scores some tasks in
parts (click-checkboxes: the share of boxes in the right state, so submitting with one wrong box out
of three scores 1/3), and BrowserGym's reward is 1 for any positive score; clew reads the raw score
BrowserGym reports and counts 1 only for a fully correct answer, so its success rates on such tasks
are lower than BrowserGym's own. Other benchmarks keep BrowserGym's reward.

Decision: after each observation the page is set back to its browser context's viewport (the
task's size, 332×214 for MiniWoB++). BrowserGym takes its screenshot through a DevTools session
that overrides the page size and is then detached; with the Chromium and Playwright pinned here
that leaves the page at its window's size, which differs between windows of one browser, so the
next observation would depend on which page it was taken in (elements below the fold turn
invisible on one page and not on the other). Playwright only re-sends a viewport that changed,
hence the one-pixel step out and back (about 20 ms).
"""

from __future__ import annotations

import time
import weakref
from collections import Counter
from dataclasses import dataclass
from typing import Any

from clew.envs.browsergym import chromium
from clew.envs.browsergym.observation import PageRecord, page_record
from clew.envs.browsergym.tasks import make_browser_env


class ReplayMismatch(RuntimeError):
    """A replayed (or re-executed) step gave a different page than the recorded one."""


@dataclass(frozen=True)
class BrowserOptions:
    """How pages are run; see :class:`clew.envs.browsergym.env.BrowserGymEnv` for each option."""

    action_subsets: tuple[str, ...] = ("bid",)
    slow_mo_ms: int | None = 0
    observation_delay_s: float = 0.1
    timeout_ms: int | None = None
    soft_reset: bool = True
    visible_only: bool = True


class _Page:
    """A BrowserGym ``BrowserEnv`` and the action prefix its page is at (browser thread only)."""

    def __init__(self, task: str, options: BrowserOptions, action_mapping: Any):
        self.task, self.options, self.action_mapping = task, options, action_mapping
        self.env: Any = None
        self.at: tuple[str, ...] | None = None     # None: not started
        self.chat_length = 0

    def reset(self, seed: int) -> PageRecord:
        o = self.options
        if self.env is None:
            kwargs: dict[str, Any] = {"headless": True, "action_mapping": self.action_mapping,
                                      "pre_observation_delay": o.observation_delay_s}
            if o.slow_mo_ms is not None:
                kwargs["slow_mo"] = o.slow_mo_ms
            self.env = make_browser_env(self.task, **kwargs)
        if self.env.task is None or not o.soft_reset:
            obs, _ = self.env.reset(seed=seed)
            self.chat_length = len(self.env.chat.messages)
        else:
            obs = self._restart(seed)
        if o.timeout_ms is not None:
            # the actions' timeout, set after the task's setup: a short one (tests use 500 ms)
            # would also bound MiniWoB++'s wait for its page to be ready, which a busy machine
            # can take longer than
            self.env.context.set_default_timeout(o.timeout_ms)
        self.at = ()
        self._keep_viewport()
        return page_record(obs, visible_only=o.visible_only)

    def _keep_viewport(self) -> None:
        """Put the page back to its context's viewport (module docstring, last decision)."""
        page = self.env.page
        size = page.viewport_size
        if size:
            page.set_viewport_size({"width": size["width"] + 1, "height": size["height"]})
            page.set_viewport_size(size)

    def _restart(self, seed: int) -> dict[str, Any]:
        """The task again on the open page: a new task object with ``seed``, set up as BrowserGym's
        ``reset`` does, minus the new browser context and chat window (module docstring)."""
        env = self.env
        env.task.teardown()
        env.task = env.task_entrypoint(seed=seed, **env.task_kwargs)
        for page in list(env.context.pages):
            if page is not env.page:
                page.close()             # tabs the replayed actions opened
        env.page_history = {env.page: None}
        env.context.set_default_timeout(env.task.timeout)   # set up under the task's own
        env.task.setup(page=env.page)
        del env.chat.messages[self.chat_length:]
        env._wait_dom_loaded()
        env._active_page_check()
        env.start_time = time.time()
        env.last_action, env.last_action_error = "", ""
        env.infeasible_message_received = False
        return env._get_obs()

    def step(self, action: str) -> PageRecord:
        obs, reward, terminated, _, info = self.env.step(action)
        self.at = (*self.at, action)
        self._keep_viewport()
        raw = (info.get("task_info") or {}).get("RAW_REWARD_GLOBAL")
        if raw is not None:  # MiniWoB++: full credit only (module docstring)
            reward = 1.0 if raw >= 1.0 - 1e-9 else 0.0
        return page_record(obs, reward, terminated, visible_only=self.options.visible_only)

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


def _close_pages(pages: list[_Page]) -> None:
    for page in pages:
        chromium.call_later(page.close)


class BrowserEpisode:
    """Pages, known transitions and counters of one episode (module docstring)."""

    def __init__(self, task: str, seed: int, options: BrowserOptions, action_mapping: Any):
        self.task, self.seed, self.options = task, seed, options
        self.pages = {"real": _Page(task, options, action_mapping),
                      "sim": _Page(task, options, action_mapping)}
        self.transitions: dict[tuple[str, ...], PageRecord] = {}
        self.stats: Counter = Counter()
        self.real_states: set[str] = set()
        self.sim_states: set[str] = set()
        # closes both pages when the last env sharing this episode is gone
        self._finalizer = weakref.finalize(self, _close_pages, list(self.pages.values()))

    # --- public (any thread) -------------------------------------------------------------------
    def start(self) -> PageRecord:
        """Reset the real page; its page is the root of every prefix."""
        def job() -> PageRecord:
            t0 = time.perf_counter()
            root = self.pages["real"].reset(self.seed)
            self.stats["resets"] += 1
            self.stats["reset_s"] += time.perf_counter() - t0
            return root
        root = chromium.call(job)
        self.transitions = {(): root}
        self.real_states.add(root.key)
        return root

    def step(self, prefix: tuple[str, ...], action: str, simulated: bool) -> PageRecord:
        """The page after ``action`` from the state ``prefix``: executed on the real page, or for
        a simulation known already or executed on the simulation page."""
        key = (*prefix, action)
        if simulated and key in self.transitions:
            self.stats["sim_cached"] += 1
            rec = self.transitions[key]
        else:
            rec = chromium.call(self._execute, prefix, action, "sim" if simulated else "real")
        (self.sim_states if simulated else self.real_states).add(rec.key)
        return rec

    def replay(self, prefix: tuple[str, ...], simulated: bool = True) -> PageRecord:
        """Bring a page to ``prefix`` (checked) and return the page it shows now."""
        which = "sim" if simulated else "real"
        return chromium.call(self._goto, self.pages[which], prefix, which, True)

    def summary(self) -> dict[str, Any]:
        """Counters so far (the ``browser`` entry of each real step's info; docs/web.md)."""
        out = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in sorted(self.stats.items())}
        out["real_states"] = len(self.real_states)
        out["sim_states"] = len(self.sim_states)
        out["all_states"] = len(self.real_states | self.sim_states)
        return out

    def close(self) -> None:
        self._finalizer()

    # --- browser thread ------------------------------------------------------------------------
    def _execute(self, prefix: tuple[str, ...], action: str, which: str) -> PageRecord:
        page = self.pages[which]
        self._goto(page, prefix, which)
        t0 = time.perf_counter()
        rec = page.step(action)
        self.stats[f"{which}_steps"] += 1
        self.stats[f"{which}_s"] += time.perf_counter() - t0
        key = (*prefix, action)
        known = self.transitions.get(key)
        if known is not None:
            self._check(known, rec, len(key), action, "executing")
        else:
            self.transitions[key] = rec
        return rec

    def _goto(self, page: _Page, prefix: tuple[str, ...], which: str,
              live: bool = False) -> PageRecord | None:
        """Put ``page`` at ``prefix``: keep it, step forward, or reset and replay (checked)."""
        if page.at == prefix and not live:
            return None
        t0 = time.perf_counter()
        if page.at is not None and page.at == prefix[:len(page.at)] and not live:
            start = len(page.at)
        else:
            rec = page.reset(self.seed)
            self._check(self.transitions[()], rec, 0, None, "resetting")
            self.stats[f"{which}_replays"] += 1
            start = 0
        for i in range(start, len(prefix)):
            rec = page.step(prefix[i])
            self._check(self.transitions[prefix[:i + 1]], rec, i + 1, prefix[i], "replaying")
            self.stats[f"{which}_replayed_steps"] += 1
        self.stats[f"{which}_replay_s"] += time.perf_counter() - t0
        return rec if live else None

    def _check(self, recorded: PageRecord, now: PageRecord, step: int, action: str | None,
               doing: str) -> None:
        if now == recorded:
            return
        if recorded.done and now.done and recorded.reward == now.reward:
            return  # a finished task's page is in flux (MiniWoB++ restarts it): outcome only
        what = "the reset" if action is None else f"step {step} ({action})"
        old, new = recorded.text.splitlines(), now.text.splitlines()
        i = next((j for j, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        line = lambda xs: xs[i] if i < len(xs) else "(end of page)"
        extra = "" if (recorded.reward, recorded.done) == (now.reward, now.done) else \
            (f"; reward/done recorded {recorded.reward:g}/{recorded.done}, "
             f"now {now.reward:g}/{now.done}")
        raise ReplayMismatch(
            f"error: browsergym task {self.task} (seed {self.seed}) is not deterministic under "
            f"replay: {doing} {what} gave a different page than recorded{extra}\n"
            f"  first difference, line {i + 1}:\n  recorded: {line(old)}\n  now:      {line(new)}")
