"""The BabyAI bot playing TextMiniGrid (docs/methods/metric-textminigrid.md#behavioral-difficulty): an oracle baseline.

It reads ``env.oracle()`` (so reports label it ``uses_oracle``): the oracle runs a fresh BabyAI
bot on a copy of the current level and returns the bot's action list; the agent sends it in
chunks of at most m = ``env.max_actions`` actions per decision step, in the reply format the env
parses (``<actions>…</actions><intentions>…</intentions>``).

The plan is computed once and followed while the env's clock is where the plan expects it; if
the clock moved otherwise (a restored snapshot, a plan that ran out without success) the agent
replans from the current state. When the bot has no action to offer (it crashed or gave up at
once), the agent turns left, so the episode still runs to the env's step limit, and records the
bot's failure in the decision info.
"""

from __future__ import annotations

from clew.agents.base import BaseAgent, Decision, Episode

FALLBACK = "Turn Left"


class BabyAIBotAgent(BaseAgent):
    name = "babyai-bot"
    kind = "heuristic"
    uses_oracle = True

    def __init__(self, intentions: bool = True):
        self.intentions = intentions

    async def act(self, episode: Episode) -> Decision:
        env = episode.env
        m = env.max_actions
        clock = env.clock()
        plan = episode.scratch.get("bot_plan")
        info: dict = {}
        if plan is None or plan["clock"] != clock or plan["next"] >= len(plan["actions"]):
            run = env.oracle().bot_run()
            plan = episode.scratch["bot_plan"] = {"actions": run.actions, "next": 0,
                                                  "clock": clock, "failure": run.failure}
            episode.scratch["bot_replans"] = episode.scratch.get("bot_replans", -1) + 1
            if run.failure:
                info["bot_failure"] = run.failure
        chunk = plan["actions"][plan["next"]:plan["next"] + m]
        if not chunk:
            chunk = [FALLBACK]
            info["bot_fallback"] = True
        plan["next"] += len(chunk)
        plan["clock"] = clock + len(chunk)
        text = f"<actions>{','.join(chunk)}</actions>"
        if self.intentions:
            text += "<intentions>Follow the BabyAI bot's plan</intentions>"
        return Decision(text, raw=text, info=info)
