"""Benchmark: score a 100,000-step grid-map trajectory (docs/methods/metric-explore-exploit-error.md#per-step-error).

The trajectory is a seeded random walk on a generated map (exploration high, DAG hard, seed 0)
that never enters the goal cell, so the episode never ends; 5% of its actions are invalid
words. Only the scoring is timed (best of 3); the time ratio of the full trajectory to its
first tenth checks linear scaling. Prints one JSON line.
"""

from __future__ import annotations

import json
import random
import time

from clew.envs.gridmap.generator import generate_task
from clew.envs.gridmap.instance import Instance, step_cell
from clew.envs.gridmap.metrics import score_trajectory

STEPS = 100_000


def build_trajectory(inst: Instance, steps: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    goal_cell = inst.goal_node.cell
    pos, actions = inst.start, []
    for _ in range(steps):
        if rng.random() < 0.05:
            actions.append("jump")
            continue
        moves = [d for d in inst.moves[pos] if step_cell(pos, d) != goal_cell]
        d = rng.choice(moves)
        actions.append(d)
        pos = step_cell(pos, d)
    return actions


def best_time(fn, repeats: int = 3) -> float:
    """Best of ``repeats`` wall times (the machine is shared; the minimum is the least noisy)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    task = generate_task({"exploration_level": "high", "dag_level": "hard"}, 0)
    inst = Instance.from_params(task.params)
    actions = build_trajectory(inst, STEPS)
    tenth = best_time(lambda: score_trajectory(inst, actions[: STEPS // 10],
                                               truncate_at_budget=False))
    seconds = best_time(lambda: score_trajectory(inst, actions, truncate_at_budget=False))
    score = score_trajectory(inst, actions, truncate_at_budget=False)
    assert score.steps == STEPS and not score.success
    print(json.dumps({
        "benchmark": "gridmap_score", "task": task.id, "cells": len(inst.cells),
        "trajectory_length": score.steps, "seconds": round(seconds, 4),
        "steps_per_second": round(score.steps / seconds),
        # linear time: scoring 10x the steps should take about 10x as long
        "time_ratio_full_vs_tenth": round(seconds / tenth, 2),
        "exploration_error": round(score.exploration_error, 4),
        "exploitation_error": round(score.exploitation_error, 4),
    }))


if __name__ == "__main__":
    main()
