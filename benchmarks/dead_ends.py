"""Where do distilled grid-map agents go back? (docs/results.md#round-9-dead-ends-and-the-bare-backtrack)

A grid-map **dead end**, as the agent sees it: an observation with one legal move whose cell holds
a state that is not activated by this visit (it cannot be activated yet, or it already was).
Walking out and backtracking cost one step each there; a backtrack from a cell where a state was
just activated would undo it, so such cells are not counted. A **pit** turn (``gridmap-pits``,
docs/methods/envs.md#pits) is one in a pit, where no move leads out and only a backtrack does.

For each eval run folder (``clew eval`` output, or a loop's ``round-R/eval/AGENT/FAMILY``), one
JSON line: episodes, success with its standard error, episodes with a backtrack, the dead-end
turns and how many of them backtracked, how many states each backtrack went back, and how many
backtracks undid an activation. Folders given together are also pooled.

  python benchmarks/dead_ends.py RUN [RUN ...]
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from clew.envs.gridmap.env import IN_PIT, PIT
from clew.envs.trace import StatePath

LEGAL = re.compile(r"Legal moves: ([a-z, ]+)\.")
NOT_ACTIVATED_NOW = ("still not activated", "it is not activated", "already activated")


def is_dead_end(obs: str) -> bool:
    legal = LEGAL.search(obs)
    return bool(legal) and len(legal.group(1).split(", ")) == 1 and \
        any(phrase in obs for phrase in NOT_ACTIVATED_NOW)


def episode_stats(record: dict[str, Any]) -> Counter:
    """Counts of one episode record: its dead-end turns and its backtracks."""
    out: Counter = Counter(episodes=1, success=int(bool(record["outcome"].get("success"))))
    steps = record.get("steps") or []
    ids, reached_by = StatePath(), {0: ""}    # the runner's state ids; the obs that reached each
    for i, step in enumerate(steps):
        if i + 1 < len(steps):      # a turn a decision followed: did it go back?
            back = "backtrack" in (steps[i + 1].get("info") or {})
            if is_dead_end(step["obs"]):
                out["dead_end_turns"] += 1
                out["dead_end_backtracks"] += back
            if PIT in step["obs"] or IN_PIT in step["obs"]:
                out["pit_turns"] += 1
                out["pit_backtracks"] += back
        out["pit_entries"] += PIT in step["obs"]
        target = (step.get("info") or {}).get("backtrack")
        if target is not None and step["valid"]:
            undone = ids.path[ids.path.index(target) + 1:]
            out["backtracks"] += 1
            out[f"back_{min(len(undone), 6)}"] += 1
            out["undid_activation"] += any("now activated" in reached_by[s] for s in undone)
            ids.cut(target)
        elif step["valid"]:
            reached_by[ids.forward()] = step["obs"]
    out["with_backtrack"] = int(out["backtracks"] > 0)
    return out


def summary(name: str, counts: Counter) -> dict[str, Any]:
    n = counts["episodes"]
    rate = counts["success"] / n if n else 0.0
    se = (rate * (1 - rate) / (n - 1)) ** 0.5 if n > 1 else 0.0
    return {"run": name, "episodes": n, "success": round(rate, 3), "se": round(se, 3),
            "episodes_with_backtrack": counts["with_backtrack"],
            "dead_end_turns": counts["dead_end_turns"],
            "dead_end_backtracks": counts["dead_end_backtracks"],
            "pit_entries": counts["pit_entries"], "pit_turns": counts["pit_turns"],
            "pit_backtracks": counts["pit_backtracks"],
            "backtracks": counts["backtracks"],
            "states_back": {("6+" if k == 6 else str(k)): counts[f"back_{k}"]
                            for k in range(1, 7) if counts[f"back_{k}"]},
            "undid_activation": counts["undid_activation"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    pooled: Counter = Counter()
    for run in args.runs:
        counts: Counter = Counter()
        for line in (run / "episodes.jsonl").read_text().splitlines():
            counts += episode_stats(json.loads(line))
        pooled += counts
        print(json.dumps(summary(str(run), counts)))
    if len(args.runs) > 1:
        print(json.dumps(summary("pooled", pooled)))


if __name__ == "__main__":
    main()
