"""Any BrowserGym task as a clew environment (docs/web.md).

* **Observation**: the goal and the page's pruned accessibility tree with element ids
  (:mod:`.observation`); after an action that failed in the browser, its error.
* **Actions**: BrowserGym's high-level action set (``action_subsets``, ``"bid"`` by default:
  ``click``, ``fill``, ``select_option``, ``press``, ...), one call per step, parsed tolerantly
  (:mod:`.actions`). An answer with no well-formed call is an invalid step that uses a step of the
  budget and changes nothing. A call the browser cannot carry out (an unknown id, a hidden element)
  is executed by BrowserGym, leaves its error in the observation and counts as invalid too.
* **Reward and end**: the task's own (BrowserGym ``validate``); ``grade`` = the summed reward,
  clipped to [0, 1]; success = grade 1. The step budget is ``params["max_steps"]`` of the task
  (``max_steps`` option overrides it); reaching it ends the episode with ``info["truncated"]``.
* **Snapshots**: a state is the prefix of actions executed in the browser plus its recorded page,
  so ``snapshot``/``restore`` cost nothing; the browser follows when the next action is stepped,
  by a reset with the task seed and a checked replay of the prefix (:mod:`.session`). ``copy()``
  (what search simulates in) shares the episode's pages: copies step the simulation page and
  may answer known transitions from the record; the env the runner holds steps the real page.
* **Metrics**: each real step's ``info["browser"]`` holds the episode's counters so far (resets,
  replays, replayed steps, seconds, distinct page states); ``state_key`` is a digest of the page.

Nothing here imports BrowserGym or Playwright until ``reset``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

from clew.envs.answers import regions
from clew.envs.base import Env, EnvFlags, Observation, Step, Task
from clew.envs.browsergym.actions import ActionGrammar
from clew.envs.browsergym.candidates import candidate_actions
from clew.envs.browsergym.observation import PageRecord
from clew.envs.browsergym.session import BrowserEpisode, BrowserOptions
from clew.envs.browsergym.tasks import DEFAULT_MAX_STEPS


@dataclass
class WebState:
    """A state of the env: actions executed in the browser so far and the page they lead to."""

    actions: tuple[str, ...]
    page: PageRecord
    steps: int = 0                 # the clock: every step, valid or not
    reward: float = 0.0            # summed task reward
    done: bool = False
    truncated: bool = False
    note: str | None = None        # message shown above the page (an invalid action)


class BrowserGymEnv(Env):
    """A BrowserGym task (``task.params["task"]``, seed ``task.seed``) as a clew env.

    Options: ``action_subsets`` (BrowserGym action subsets, default ``["bid"]``; WebArena users pass
    ``["webarena"]``); ``slow_mo_ms`` (Playwright's pause after each browser operation; 0 by
    default, ``None`` keeps the task's own, 100 ms for MiniWoB++); ``observation_delay_s``
    (BrowserGym's wait before reading the page after an action, 0.1 s; its default is 0.5 s);
    ``timeout_ms`` (Playwright's default timeout once the task is set up, which sets up under its
    own; ``None``: the task's own, 5 s for MiniWoB++; BrowserGym's actions bring their own);
    ``soft_reset`` (replays restart the task on the open page, :mod:`.session`); ``visible_only``
    (show visible elements only); ``max_steps`` (overrides the task's budget).
    """

    name = "browsergym"
    family = "browsergym"
    flags = EnvFlags(deterministic=True, supports_backtrack=True,
                     outcome_mode="terminal_success", simulation_mode="free")

    def __init__(self, action_subsets: list[str] | tuple[str, ...] | str = ("bid",),
                 slow_mo_ms: int | None = 0, observation_delay_s: float = 0.1,
                 timeout_ms: int | None = None, soft_reset: bool = True,
                 visible_only: bool = True, max_steps: int | None = None):
        if isinstance(action_subsets, str):
            action_subsets = (action_subsets,)
        if observation_delay_s < 0:
            raise ValueError(f"browsergym option observation_delay_s={observation_delay_s!r}: "
                             "need a number >= 0")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"browsergym option max_steps={max_steps!r}: need an integer >= 1")
        self.options = BrowserOptions(tuple(action_subsets), slow_mo_ms, float(observation_delay_s),
                                      timeout_ms, bool(soft_reset), bool(visible_only))
        self.max_steps_option = max_steps
        self.grammar = ActionGrammar(self.options.action_subsets)
        self.browser: BrowserEpisode | None = None
        self.simulated = False
        self.state: WebState | None = None

    # --- the core loop ---------------------------------------------------------------------------
    def reset(self, task: Task) -> Observation:
        if task.env != self.name:
            raise ValueError(f"task {task.id!r} is for env {task.env!r}, not browsergym")
        name = task.params.get("task")
        if not isinstance(name, str):
            raise ValueError(  # noqa: TRY004 - a bad task file, like every env's task errors
                f"task {task.id!r}: params need 'task' (a BrowserGym task name)")
        self.close()
        self.task = task
        self.browser = BrowserEpisode(name, task.seed, self.options,
                                      self.grammar.to_python_code)
        self.state = WebState((), self.browser.start())
        return self.observation()

    def step(self, action: str) -> Step:
        st = self.state
        if st is None:
            raise RuntimeError("browsergym: step() before reset()")
        if st.done:
            return Step(self.observation("The episode is over; no action was executed."),
                        0.0, True, False, {"error": "episode over"})
        canonical = self.parse_action(action or "")
        if canonical is None:
            self.state = st = replace(st, steps=st.steps + 1, note=(
                "Your last answer held no action of the action set; nothing was done. Answer "
                "with one call such as click('12')."))
            self._budget()
            return Step(self.observation(), 0.0, st.done, False, self._info("unparsable"))
        page = self.browser.step(st.actions, canonical, self.simulated)
        self.state = st = WebState((*st.actions, canonical), page, st.steps + 1,
                                   st.reward + page.reward, page.done)
        self._budget()
        return Step(self.observation(), page.reward, st.done, not page.error,
                    self._info("action failed" if page.error else None))

    def _budget(self) -> None:
        st = self.state
        if not st.done and st.steps >= self.step_budget():
            st.done = st.truncated = True

    def _info(self, error: str | None) -> dict[str, Any]:
        st = self.state
        info: dict[str, Any] = {"page_key": st.page.key, "task_reward": st.page.reward,
                                "truncated": st.truncated}
        if error:
            info["error"] = error
        if not self.simulated:
            info["browser"] = self.browser.summary()
        return info

    def observation(self, note: str | None = None) -> Observation:
        st = self.state
        page = st.page
        note = note or st.note
        text = page.text if note is None else f"{note}\n\n{page.text}"
        info = {"goal": page.goal, "elements": list(page.elements), "page_key": page.key,
                "steps": st.steps, "reward": st.reward, "last_error": page.error}
        if note is not None:
            info["error"] = note
        return Observation(text, info)

    def close(self) -> None:
        """Close this episode's pages (the shared Chromium stays up for the next episode)."""
        if self.browser is not None and not self.simulated:
            self.browser.close()

    # --- snapshots --------------------------------------------------------------------------------
    def snapshot(self) -> WebState:
        return replace(self.state)

    def restore(self, snap: WebState, keep_clock: bool = False) -> None:
        clock = self.clock()
        self.state = replace(snap)
        if keep_clock:
            self.set_clock(clock)

    def set_clock(self, steps: int) -> None:
        self.state.steps = steps
        self._budget()

    def copy(self) -> BrowserGymEnv:
        other = copy.copy(self)
        other.simulated = True
        other.state = replace(self.state) if self.state is not None else None
        return other

    def replay(self) -> Observation:
        """Reset this env's page (the real one, or the simulation page for a copy), replay this
        state's prefix and return the page shown now; a difference from the recorded pages raises
        :class:`~.session.ReplayMismatch`. For tests and checks; stepping replays by itself."""
        page = self.browser.replay(self.state.actions, simulated=self.simulated)
        return Observation(page.text, {"page_key": page.key})

    # --- text for agents --------------------------------------------------------------------------
    def instructions(self, variant: str = "default") -> str:
        goal = self.state.page.goal if self.state else "(reset the env to see the goal)"
        name = self.task.params.get("task", "?") if self.task else "?"
        if variant == "criteria":
            return (f"The web task ({name}) succeeds when the page reports the goal reached: "
                    f"{goal} It fails when the page ends the task otherwise or the "
                    f"{self.step_budget()} actions are used up.")
        return (f"Web task ({name}). Goal: {goal}\n"
                "You act in a web browser. Each observation shows the goal and the page as its "
                "accessibility tree: one element per line, indented under its container, and the "
                "elements you can act on carry an id in brackets, e.g. [12] button 'Submit', "
                "clickable. Act on elements by their id. The task ends when the page reports "
                f"success or failure, or after {self.step_budget()} actions.")

    def action_help(self) -> str:
        return (f"{self.grammar.describe()}\nOne action per turn, e.g. "
                "click('12') or fill('14', 'some text').")

    def answer_format(self) -> str:
        return "one action call, e.g. click('12') or fill('14', 'some text')"

    def parse_action(self, text: str) -> str | None:
        """The shared answer rules first (clew.envs.answers: reasoning dropped, the last answer
        label, the last fence, the whole reply), then the grammar on each region."""
        for region in regions(text):
            action = self.grammar.parse(region)
            if action is not None:
                return action
        return None

    def canonical(self, action: str) -> str:
        return self.grammar.parse(action) or action.strip()

    # --- facts ------------------------------------------------------------------------------------
    def legal_actions(self) -> list[str]:
        """A click on every clickable element of the page (typing has no finite list)."""
        if self.state is None or self.state.done:
            return []
        return [f"click({e['bid']!r})" for e in self.state.page.elements if e["clickable"]]

    def heuristic_candidates(self, previous: str | None = None) -> list[str]:
        """Fills of the goal's quoted strings and the clicks that may make progress, most
        relevant first (:func:`~clew.envs.browsergym.candidates.candidate_actions`)."""
        return candidate_actions(self, previous)

    def step_budget(self) -> int:
        """The task's step limit (``params["max_steps"]``, or the ``max_steps`` option); it ends
        the episode with ``info["truncated"]``. Not :meth:`Env.budget`, which is a query budget
        that interventions divide."""
        if self.max_steps_option is not None:
            return self.max_steps_option
        params = self.task.params if self.task else {}
        return int(params.get("max_steps", DEFAULT_MAX_STEPS))

    @property
    def done(self) -> bool:
        return bool(self.state and self.state.done)

    def grade(self) -> float:
        return max(0.0, min(1.0, self.state.reward)) if self.state else 0.0

    def state_key(self) -> str | None:
        return self.state.page.key if self.state else None

    def clock(self) -> int:
        return self.state.steps if self.state else 0

    def browser_stats(self) -> dict[str, Any]:
        """The episode's browser counters (docs/web.md)."""
        return self.browser.summary() if self.browser else {}
