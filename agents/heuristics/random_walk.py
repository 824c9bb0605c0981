"""Uniform random agent over the env's legal actions: the universal no-skill baseline.

Envs whose action space is not a short list (HillSearch's continuous x, MaxSatSearch's 2^n
assignments) expose no ``legal_actions``; there the agent asks uniformly random valid queries
(:class:`~clew.agents.heuristics.query_baselines.RandomQuery`), so one agent covers every suite.
"""

from __future__ import annotations

from clew.agents.base import BaseAgent, Decision, Episode
from clew.agents.heuristics.query_baselines import RandomQuery
from clew.agents.seeds import keyed_rng


class RandomAgent(BaseAgent):
    """Picks uniformly among ``env.legal_actions()``; seeded per episode for reproducibility."""

    name = "random"
    kind = "heuristic"

    def __init__(self, seed: int = 0):
        self.seed = seed

    async def act(self, episode: Episode) -> Decision:
        rng = episode.scratch.get("rng")
        if rng is None:
            rng = episode.scratch["rng"] = keyed_rng(self.seed, episode.task.seed, episode.key)
        actions = episode.env.legal_actions()
        if not actions:
            query = episode.scratch.get("random_query")
            if query is None:
                query = episode.scratch["random_query"] = RandomQuery(seed=self.seed)
            return await query.act(episode)
        return Decision(rng.choice(actions))
