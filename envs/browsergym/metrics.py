"""Metrics of a web episode, read from its record without a browser (docs/web.md).

Replaying a web episode costs seconds per step, so these metrics come from what the env wrote
while it ran: each executed step's ``info["browser"]`` holds the episode's browser counters so far
(:meth:`clew.envs.browsergym.session.BrowserEpisode.summary`), and the last one holds them all.

* ``success``, ``steps`` (executed), ``executed_steps`` / ``simulated_steps`` (interactions);
* ``page_states``: distinct pages the executed trajectory showed, the start included (coverage);
  ``page_states_all``: the same with the pages simulation reached; ``peeked_states``: pages only
  simulation reached (the runner's count);
* ``sim_browser_steps``: simulated steps run in the browser; ``sim_known_steps``: simulated
  steps answered from a transition already seen (no browser);
* ``replays`` / ``replayed_steps`` / ``replay_s``: resets with the task seed followed by a replay
  of an action prefix, the steps they re-ran and their seconds (real and simulation pages);
  ``replay_s_per_sim_step``: replay seconds per simulated step;
* ``browser_s``: all seconds spent in the browser (resets, steps, replays).
"""

from __future__ import annotations

import math
from typing import Any

from clew.envs.base import Task


def episode_metrics(task: Task, record: dict[str, Any]) -> dict[str, Any]:
    steps = record.get("steps") or []
    browser: dict[str, Any] = {}
    for step in reversed(steps):
        browser = (step.get("info") or {}).get("browser") or {}
        if browser:
            break
    outcome = record.get("outcome") or {}
    inter = record.get("interactions") or {}
    simulated = inter.get("simulated", 0)

    def count(key: str) -> float:
        return browser.get(key, 0) if browser else math.nan

    replay_s = count("sim_replay_s") + count("real_replay_s")
    out = {
        "success": float(bool(outcome.get("success"))) if "success" in outcome else math.nan,
        "steps": len(steps),
        "executed_steps": inter.get("executed", len(steps)),
        "simulated_steps": simulated,
        "page_states": count("real_states"),
        "page_states_all": count("all_states"),
        "peeked_states": outcome.get("peeked_states", math.nan)
        if outcome.get("peeked_states") is not None else math.nan,
        "sim_browser_steps": count("sim_steps"),
        "sim_known_steps": count("sim_cached"),
        "replays": count("sim_replays") + count("real_replays"),
        "replayed_steps": count("sim_replayed_steps") + count("real_replayed_steps"),
        "replay_s": replay_s,
        "replay_s_per_sim_step": replay_s / simulated if simulated else math.nan,
        "browser_s": sum(count(k) for k in ("reset_s", "real_s", "sim_s"))
        + replay_s,
    }
    return out
