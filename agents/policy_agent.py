"""The search agent's policy without search: one sampled action per step (the "no search, no
memory" reference; with LM roles this is ReAct-style sampling with the search policy's prompt,
``docs/methods/baselines.md#policy-only``). Registered as ``policy-only``.
"""

from __future__ import annotations

from typing import Any

from clew.agents.base import NO_ACTION, BaseAgent, Decision, Episode
from clew.agents.build import Models, build_policy
from clew.agents.options import RoleOptions, parse_options
from clew.agents.prompts import Context, task_context
from clew.agents.roles import Policy
from clew.agents.seeds import derive_seed


class PolicyAgent(BaseAgent):
    """``act`` = one ``policy.act_once`` at the real state."""

    name = "policy-only"

    def __init__(self, policy: Policy, name: str | None = None, seed: int = 0):
        self.policy = policy
        self.kind = policy.kind
        self.uses_oracle = policy.uses_oracle
        self.seed = seed
        if name:
            self.name = name

    async def act(self, episode: Episode) -> Decision:
        env = episode.env
        base: Context = episode.scratch.get("policy-only") or episode.scratch.setdefault(
            "policy-only", task_context(env, episode.task.id))
        ctx = base.at(observations=[o.text for o in episode.observations],
                      actions=[env.canonical(s.action) for s in episode.steps],
                      raws=[s.raw for s in episode.steps], env=env,
                      seed=derive_seed(self.seed, episode.key, episode.t))
        p = await self.policy.act_once(ctx, usage=episode.usage)
        if p.action is None:   # nothing parsed: an invalid step, the env is not stepped
            return Decision(NO_ACTION, raw=p.raw or None, info={"no_action": True})
        return Decision(p.action, raw=p.raw or None)


def make_policy_agent(**options: Any) -> PolicyAgent:
    """``policy-only`` from role options (``model``, ``roles``, ``policy``, ``seed``, ...)."""
    opts = parse_options(RoleOptions, options, "policy-only")
    # act_once samples a single action, so the width of an expansion does not matter here
    policy = build_policy(opts, branching_factor=1, models=Models(opts))
    return PolicyAgent(policy, name=opts.label, seed=opts.seed)
