"""clew.agents: LM backends, prompts, parsing, policies, values, reflection, memory, ReAct and
heuristic baselines. Imports clew.envs only."""

from clew.agents.base import Agent, BaseAgent, Decision, Episode, StepRecord

__all__ = ["Agent", "BaseAgent", "Decision", "Episode", "StepRecord"]
