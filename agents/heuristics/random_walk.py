"""Uniform random agent over the env's legal actions: the universal no-skill baseline."""

from __future__ import annotations

import random
import zlib

from clew.agents.base import BaseAgent, Decision, Episode


class RandomAgent(BaseAgent):
    """Picks uniformly among ``env.legal_actions()``; seeded per episode for reproducibility."""

    name = "random"
    kind = "heuristic"

    def __init__(self, seed: int = 0):
        self.seed = seed

    async def act(self, episode: Episode) -> Decision:
        rng = episode.scratch.get("rng")
        if rng is None:
            key = f"{self.seed}:{episode.task.seed}:{episode.key}"
            rng = episode.scratch["rng"] = random.Random(zlib.crc32(key.encode()))
        actions = episode.env.legal_actions()
        if not actions:
            raise RuntimeError(f"{episode.task.env}: no legal action for the random agent")
        return Decision(rng.choice(actions))
