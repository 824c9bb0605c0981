"""Shared cases for the Dark Treasure Rooms tests.

EXAMPLE is the paper's example interaction (docs/methods/metric-optimal-exploitation-gap.md#worked-example) placed on a 3×3 grid:

    R5(0)  -tangerine-  S(1)       (2: no doors)
                        |dodger_blue
    X(3)  -apricot-    R2(4)  -cerulean-  R3(5)
                        |honeydew          |teal
    (6: no doors)       Y(7)  -magenta-   R4(8)

Balls: rosewood 3 in R3, turquoise 2 and khaki 3 in R4, midnight_blue 5 in R5. C = 8.
"""

from __future__ import annotations

import random

from clew.envs.base import Task
from clew.envs.rooms.env import RoomsEnv
from clew.envs.rooms.generator import layout_dict
from clew.envs.rooms.layouts import random_layout

S, R2, R3, R4, R5 = 1, 4, 5, 8, 0

EXAMPLE = {
    "id": "paper-example", "size": 3, "start": S, "door_budget": 8,
    "doors": [
        {"name": "dodger_blue", "rooms": [1, 4]}, {"name": "tangerine", "rooms": [0, 1]},
        {"name": "cerulean", "rooms": [4, 5]}, {"name": "teal", "rooms": [5, 8]},
        {"name": "apricot", "rooms": [3, 4]}, {"name": "honeydew", "rooms": [4, 7]},
        {"name": "magenta", "rooms": [7, 8]},
    ],
    "balls": [
        {"name": "rosewood", "room": R3, "reward": 3},
        {"name": "turquoise", "room": R4, "reward": 2},
        {"name": "khaki", "room": R4, "reward": 3},
        {"name": "midnight_blue", "room": R5, "reward": 5},
    ],
}

EPISODE_1 = ["<dodger_blue door>", "<cerulean door>", "<rosewood ball>", "<teal door>",
             "<turquoise ball>", "<khaki ball>"]
EPISODE_2 = ["<tangerine door>", "<midnight_blue ball>", "<tangerine door>"]


def example_task(n_episodes: int = 20, **params) -> Task:
    return Task("rooms", {"layout": EXAMPLE, "n_episodes": n_episodes, **params}, id="example")


def small_task(seed: int, n_episodes: int = 3, size: int | None = None) -> Task:
    """A random small layout (2×2 or 3×3), sometimes with loops or budget slack."""
    rng = random.Random(seed)
    size = size or rng.choice([2, 3])
    layout = random_layout(
        size, rng, n_balls=rng.randint(0, 6),
        connectivity=rng.choice(["minigrid_connect_all", "tree"]),
        extra_door_prob=rng.choice([0.0, 0.3]), door_budget_slack=rng.randint(0, 2),
    )
    return Task("rooms", {"layout": layout_dict(layout), "n_episodes": n_episodes},
                seed=seed, id=f"small-{seed}")


def random_walk(env: RoomsEnv, seed: int, invalid_prob: float = 0.0) -> list[str]:
    """Play a run to the end with uniform choices (and some junk replies); return actions."""
    rng = random.Random(seed)
    actions = []
    while not env.done:
        if rng.random() < invalid_prob:
            action = rng.choice(["<door>", "no idea", "<purple_haze ball>", ""])
        else:
            action = rng.choice(env.legal_actions())
        actions.append(action)
        env.step(action)
    return actions
