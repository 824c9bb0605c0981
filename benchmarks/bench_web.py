"""Benchmark: what a web step and a replayed simulation cost (docs/web.md).

On a few ``miniwob-v1`` tasks (seed 0), in one process with clew's one Chromium:

* ``reset_s``: BrowserGym's full reset of a page (new context, chat window, task set-up);
* ``step_s``: one executed action on the real page;
* ``replay_reset_s``: the reset a replay starts with (the task restarted on the open page), and
  ``replay_reset_full_s`` with ``soft_reset=False`` (BrowserGym's reset each time);
* ``replayed_sim_s[d]``: one simulated step from a state ``d`` actions deep whose page is not open:
  reset + ``d`` replayed actions + the new action (what one MCTS simulation costs when it expands a
  new node there);
* ``known_sim_s``: a simulated step whose transition is known (no browser).

Ratios to ``step_s`` come from the same run. Prints one JSON line; prints a ``skipped`` line when
the web extra or Chromium is missing (``make bench`` runs every benchmark).
"""

from __future__ import annotations

import json
import statistics
import sys
import time

TASKS = ("enter-text", "login-user", "click-checkboxes")
REPEATS = 3


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _keeps_running(env) -> str:
    """A fill, else a click on a field or box: actions that do not end a MiniWoB++ task."""
    from clew.envs.browsergym.candidates import candidate_actions

    roles = {e["bid"]: e["role"] for e in env.observation().info["elements"]}
    for action in candidate_actions(env):
        bid = action.split("'")[1]
        if action.startswith("fill") or roles.get(bid) in ("textbox", "checkbox", "radio"):
            return action
    raise RuntimeError(f"no action that keeps {env.task.id} running")


def measure(name: str, soft_reset: bool = True) -> dict[str, list[float]]:
    from clew.envs.browsergym.candidates import candidate_actions
    from clew.envs.browsergym.env import BrowserGymEnv
    from clew.envs.registry import generate

    task = generate("browsergym", {"task": f"miniwob.{name}", "max_steps": 50}, 0)
    env = BrowserGymEnv(soft_reset=soft_reset)
    out: dict[str, list[float]] = {"reset_s": [_timed(lambda: env.reset(task))]}
    snaps = [env.snapshot()]
    out["step_s"] = []
    for _ in range(2):                                    # a path of two actions
        action = _keeps_running(env)
        out["step_s"].append(_timed(lambda a=action: env.step(a)))
        snaps.append(env.snapshot())
    sim = env.copy()
    sim.step(_keeps_running(sim))                         # open the simulation page once
    out["replay_reset_s"] = []
    for _ in range(REPEATS):
        sim.restore(snaps[0])
        out["replay_reset_s"].append(_timed(lambda: sim.replay()))
    for depth, snap in enumerate(snaps):
        key = f"replayed_sim_s[{depth}]"
        out[key] = []
        for _ in range(REPEATS):
            sim.restore(snap)
            new = [a for a in candidate_actions(sim)
                   if (*snap.actions, a) not in env.browser.transitions]
            if not new:
                break
            # reset + the prefix replayed (checked), then the new action
            out[key].append(_timed(sim.replay) + _timed(lambda a=new[0]: sim.step(a)))
    sim.restore(snaps[0])
    known = next(a for a in candidate_actions(sim) if (a,) in env.browser.transitions)
    out["known_sim_s"] = [_timed(lambda: sim.step(known))]
    env.close()
    return out


def main() -> int:
    try:
        import browsergym.miniwob  # noqa: F401
        from clew.envs.browsergym.chromium import chromium_path
    except ModuleNotFoundError:
        print(json.dumps({"benchmark": "web", "skipped": "the web extra is not installed"}))
        return 0
    if chromium_path() is None:
        print(json.dumps({"benchmark": "web", "skipped": "no chromium on PATH"}))
        return 0
    pooled: dict[str, list[float]] = {}
    for name in TASKS:
        for key, values in measure(name).items():
            pooled.setdefault(key, []).extend(values)
    full = measure(TASKS[0], soft_reset=False)["replay_reset_s"]
    row: dict = {"benchmark": "web", "tasks": list(TASKS)}
    for key, values in pooled.items():
        row[key] = round(statistics.median(values), 3) if values else None
    row["replay_reset_full_s"] = round(statistics.median(full), 3)
    step = row["step_s"]
    row["ratios_to_step"] = {k: round(v / step, 2) for k, v in row.items()
                             if k.endswith(("_s", "]")) and isinstance(v, float)}
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
