"""Roles from options: the policy, value function and reflector that :class:`RoleOptions` (and the
search agent's sections) describe, LM-backed or heuristic (``docs/methods/baselines.md``).

LM roles share one model unless ``role_models`` names another for a role; the main model is
loaded on first use. Heuristic roles need no model (and may read the env's ground truth). A
search agent's ``distilled_policy`` section replaces the policy by a fine-tuned model prompted in
the distilled agent's format (:class:`clew.agents.distilled.DistilledPolicy`); it loads its own
model, also on first use; its ``distilled_value`` section likewise replaces the value function
(:class:`clew.agents.distilled_value.DistilledValue`).
"""

from __future__ import annotations

from dataclasses import dataclass

from clew.agents.debate import DebateValue
from clew.agents.distilled import DistilledPolicy
from clew.agents.distilled_value import DistilledValue
from clew.agents.heuristics.search_roles import (
    HeuristicPolicy,
    HeuristicValue,
    RolloutValue,
    TemplateReflector,
)
from clew.agents.lm.base import LanguageModel
from clew.agents.lm.spec import load_model
from clew.agents.options import (
    DistilledPolicyOptions,
    DistilledValueOptions,
    ReflectionOptions,
    RoleName,
    RoleOptions,
    ValueOptions,
)
from clew.agents.policy import LMPolicy
from clew.agents.reflection import Reflector as LMReflector
from clew.agents.roles import Policy, Reflector, ValueFunction
from clew.agents.value import SingleValue


@dataclass
class Models:
    """The models of an agent's LM roles, loaded once."""

    options: RoleOptions
    main: LanguageModel | None = None

    def for_role(self, role: RoleName) -> LanguageModel:
        spec = self.options.role_models.get(role)
        if spec and spec != self.options.model:  # the run's own model keeps its options
            return load_model(spec)
        if self.main is None:
            self.main = load_model(self.options.model, **self.options.model_options)
        return self.main


def build_policy(opts: RoleOptions, branching_factor: int, models: Models,
                 distilled: DistilledPolicyOptions | None = None) -> Policy:
    """The LM or heuristic policy of ``opts``; with ``distilled``, the distilled policy
    (a fine-tuned model in its EL/IL chat format) whatever the other roles are."""
    if distilled is not None:
        return DistilledPolicy(distilled, branching_factor)
    if not opts.lm_roles:
        return HeuristicPolicy(branching_factor, opts.policy, seed=opts.seed)
    return LMPolicy(models.for_role("policy"), branching_factor, opts.policy)


def build_value(opts: RoleOptions, value: ValueOptions, models: Models,
                distilled: DistilledValueOptions | None = None) -> ValueFunction:
    """The LM or heuristic value of ``opts``; with ``distilled``, the learned value (a model
    fine-tuned on ``value_sft`` chats) on ``value.scale``, whatever the other roles are."""
    if distilled is not None:
        return DistilledValue(distilled, value.scale)
    if not opts.lm_roles:
        if value.estimate == "rollout":
            return RolloutValue(value, seed=opts.seed)
        return HeuristicValue(value, seed=opts.seed)
    if value.kind == "debate":
        return DebateValue(models.for_role("value"), value)
    return SingleValue(models.for_role("value"), value)


def build_reflector(opts: RoleOptions, reflection: ReflectionOptions, models: Models) -> Reflector:
    if not opts.lm_roles:
        return TemplateReflector()
    return LMReflector(models.for_role("reflection"), reflection, seed=opts.seed)
