"""Random-walk baseline for Dark Treasure Rooms (docs/methods/baselines.md#heuristic-agents).

"Exploration without any prior information": at each step choose uniformly among the objects
visible in the current room (doors and balls), under the same episode rules, for all E
episodes of a run. It ignores the prompt, so one set of figures serves every instruction
variant.

Seeding (docs/methods/metric-optimal-exploitation-gap.md#runs-and-aggregation): run r of a suite has task seed r; the walk's generator is seeded from
(agent ``seed``, task seed, task id), so runs differ, and a rerun is identical.
"""

from __future__ import annotations

import random

from clew.agents.base import BaseAgent, Decision, Episode
from clew.agents.seeds import keyed_rng


class RoomsRandomWalk(BaseAgent):
    name = "rooms-random-walk"
    kind = "heuristic"
    uses_oracle = False

    def __init__(self, seed: int = 0):
        self.seed = seed

    def rng(self, episode: Episode) -> random.Random:
        rng = episode.scratch.get("rooms_random_walk_rng")
        if rng is None:
            rng = episode.scratch["rooms_random_walk_rng"] = keyed_rng(
                "rooms-random-walk", self.seed, episode.task.seed, episode.task.id)
        return rng

    async def act(self, episode: Episode) -> Decision:
        visible = episode.env.legal_actions()
        if not visible:
            raise RuntimeError(f"{episode.task.id}: the random walk sees no object "
                               "(the run is over or the env is not a rooms env)")
        return Decision(self.rng(episode).choice(visible))
