"""TextMiniGrid metrics (docs/methods/metric-textminigrid.md#success-and-steps, with the labelled extensions of docs/methods/metric-textminigrid.md#extensions).

``episode_metrics(task, record)`` replays the episode and returns, from the paper (docs/methods/metric-textminigrid.md#success-and-steps):

* ``success`` S ∈ {0, 1}; ``steps`` T (atomic actions); ``decisions`` D (decision steps that
  executed actions); ``actions_per_decision`` T / D; ``steps_to_success`` and
  ``decisions_to_success`` (NaN on failure; "Fail" in the paper's tables);
* ``oracle_length`` L* and the difficulty level (``difficulty``, a label), plus
  ``sr_easy`` … ``sr_super_hard``: S for the task's own level and NaN for the others, so the mean
  over a run of each key is the per-level success rate SR_ℓ (the macro average is the mean of
  the four; the micro average is the mean of ``success``).

Extensions not defined by the paper (docs/methods/metric-textminigrid.md#extensions), prefixed ``ext_``:

* ``ext_revisit_rate`` = 1 − |unique cells stood on| / (successful moves + 1);
* ``ext_coverage`` = |non-wall cells ever inside the visibility mask| / |non-wall cells| (room
  interiors and door cells; all are reachable in principle since ``connect_all`` links every
  room and the locked room's key exists); ``ext_rooms_entered`` = fraction of rooms stood in;
* ``ext_noop_rate``: share of atomic actions that changed nothing (pose, carried object, the
  front cell and its door state all unchanged); ``ext_noop_rate_<action>`` per action type;
* ``ext_format_failure_rate``: share of env steps whose reply was unparsable, truncated to m, or
  had unrecognised pieces;
* ``ext_first_sight`` (atomic step at which the target was first visible, NaN if never) and
  ``ext_sight_to_success``; ``ext_boxes_destroyed``.

Replay: :func:`clew.envs.textminigrid.replay.replay` (exact from the executed atomic actions
when the record has them, else the decision texts through the env).

Backtracks (docs/methods/metric-textminigrid.md#backtracks): ``steps`` counts each as one atomic
step (the clock); a backtrack is not a decision step and not an env step of the format rate; an
accepted one that changes cell counts as a move onto a cell stood on before (a revisit); the
cells seen and stood on, the first sight and the boxes destroyed are those of the whole replay,
abandoned branches included.

``disagreement`` and ``success_by_level`` are the cross-run quantities of docs/methods/metric-textminigrid.md#success-and-steps (items 2, 4, 5).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from clew.envs.base import Task
from clew.envs.textminigrid.bot import LEVELS, difficulty
from clew.envs.textminigrid.replay import Seen, replay

NAN = math.nan


def episode_metrics(task: Task, record: dict[str, Any]) -> dict[str, Any]:
    seen = Seen()
    env, infos = replay(task, record, seen)
    st = env.state
    success = 1.0 if st.success else 0.0
    decisions = sum(1 for i in infos if i.get("executed"))
    length = task.params.get("oracle_length")
    level = task.params.get("difficulty") or difficulty(length)
    out: dict[str, Any] = {
        "success": success,
        "steps": st.steps,
        "decisions": decisions,
        "actions_per_decision": st.steps / decisions if decisions else NAN,
        "steps_to_success": st.steps if st.success else NAN,
        "decisions_to_success": decisions if st.success else NAN,
        "oracle_length": length if length is not None else NAN,
        "difficulty": level,
    }
    for name in LEVELS:
        out["sr_" + name.replace("-", "_")] = success if level == name else NAN

    cells = set(seen.path)
    out["ext_revisit_rate"] = 1.0 - len(cells) / (seen.moves + 1)
    grid = env.level.grid
    free = {(x, y) for x in range(grid.width) for y in range(grid.height)
            if not (grid.get(x, y) is not None and grid.get(x, y).type == "wall")}
    out["ext_coverage"] = len(seen.cells_seen & free) / len(free)
    rooms = {env.level.room_from_pos(x, y) for x, y in cells}
    n_rooms = env.level.num_rows * env.level.num_cols
    out["ext_rooms_entered"] = len(rooms) / n_rooms
    blocked = [b for i in infos for b in i.get("blocked", [])]
    names = [a for i in infos for a in i.get("executed", [])]
    out["ext_noop_rate"] = sum(blocked) / len(blocked) if blocked else NAN
    for action in sorted(set(names)):
        flags = [b for a, b in zip(names, blocked) if a == action]
        out["ext_noop_rate_" + action.lower().replace(" ", "_")] = sum(flags) / len(flags)
    # a reply without an action is a format failure; a backtrack is no env step
    fails = [bool(i.get("error") == "unparsable" or i.get("truncated") or i.get("skipped")
                  or i.get("no_action"))
             for i in infos if "backtrack" not in i and "backtrack_error" not in i]
    out["ext_format_failure_rate"] = sum(fails) / len(fails) if fails else NAN
    seen_at = seen.first_sight
    out["ext_first_sight"] = seen_at if seen_at is not None else NAN
    out["ext_sight_to_success"] = st.steps - seen_at if st.success and seen_at is not None else NAN
    out["ext_boxes_destroyed"] = seen.boxes_destroyed
    return out


# --- cross-run quantities (docs/methods/metric-textminigrid.md#success-and-steps) --------------------------------------------------------------
def disagreement(a: dict[str, bool], b: dict[str, bool]) -> tuple[int, int]:
    """(N(A✓, B✗), N(A✗, B✓)) over the task ids both runs have (Tables 1–2, docs/methods/metric-textminigrid.md#success-and-steps items 4–5)."""
    common = sorted(set(a) & set(b))
    return (sum(1 for t in common if a[t] and not b[t]),
            sum(1 for t in common if b[t] and not a[t]))


def success_by_level(results: Iterable[tuple[str | None, bool]]) -> dict[str, float]:
    """SR per difficulty level, plus micro and macro averages (docs/methods/metric-textminigrid.md#success-and-steps item 2)."""
    by: dict[str, list[bool]] = {name: [] for name in LEVELS}
    every: list[bool] = []
    for level, ok in results:
        every.append(bool(ok))
        if level in by:
            by[level].append(bool(ok))
    out = {name: (sum(v) / len(v) if v else NAN) for name, v in by.items()}
    present = [x for x in out.values() if not math.isnan(x)]
    out["micro"] = sum(every) / len(every) if every else NAN
    out["macro"] = sum(present) / len(present) if present else NAN
    return out
