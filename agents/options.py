"""Typed options of the roles (policy, value function, reflector) and of the models behind them.

Every default of a role is stated here, once; the roles take their section as an object. A
search agent's options (:mod:`clew.search.options`) add the search, memory and episode sections
to these. YAML presets and ``key=value`` overrides are validated against these models: an
unknown key is an error naming it, and so is a key the agent would not read
(:func:`unread_options`, e.g. an LM sampling option given to heuristic roles).

Methods and the reasons behind the defaults: ``docs/methods/mcts.md`` (policy priors),
``docs/methods/debate.md`` (value functions), ``docs/methods/reflection-memory.md``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from clew.agents.lm.base import LanguageModel
from clew.agents.lm.spec import parse_spec
from clew.agents.window import ChatWindow, legacy_window
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class Section(BaseModel):
    """An options section: unknown keys are errors. ``LM_ONLY`` / ``HEURISTIC_ONLY`` name the
    fields only one kind of role reads."""

    model_config = ConfigDict(extra="forbid")

    LM_ONLY: ClassVar[frozenset[str]] = frozenset()
    HEURISTIC_ONLY: ClassVar[frozenset[str]] = frozenset()


class PolicyOptions(Section):
    """``policy``: an LM samples ``max(2b, n_samples_min)`` completions per expansion
    (``constrain``: each ends with one of the env's legal actions,
    docs/methods/parsing.md#constrained-answers); the heuristic policy draws ``n_samples`` legal
    actions (``prior``: uniform | sampled | oracle)."""

    n_samples_min: int = Field(20, ge=1)
    temperature: float = Field(1.0, ge=0)
    top_p: float = Field(0.95, gt=0, le=1)
    max_tokens: int = Field(384, ge=1)
    constrain: bool = False
    prior: Literal["uniform", "sampled", "oracle"] = "sampled"
    n_samples: int = Field(20, ge=1)
    oracle_temperature: float = Field(0.1, gt=0)

    LM_ONLY = frozenset({"n_samples_min", "temperature", "top_p", "max_tokens", "constrain"})
    HEURISTIC_ONLY = frozenset({"prior", "n_samples", "oracle_temperature"})


class DistilledModelOptions(Section):
    """What a search role prompted with the distilled agent's chat reads: ``model`` is required
    (a spec string such as ``hf:runs/loop/round-1/models/el``; ``model_options`` go to its
    backend), ``format`` the chat format it was trained in, ``window``
    (:class:`~clew.agents.window.ChatWindow`) and ``context_tokens`` fit the chat as the
    distilled agent does; ``n_samples`` completions per request at ``temperature`` / ``top_p``;
    ``constrain``: every answer is one of the allowed ones
    (docs/methods/parsing.md#constrained-answers)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    model: str | LanguageModel
    model_options: dict[str, Any] = Field(default_factory=dict)
    format: Literal["el", "il"] = "el"
    n_samples: int = Field(20, ge=1)
    temperature: float = Field(1.0, ge=0)
    top_p: float = Field(0.95, gt=0, le=1)
    max_tokens: int = Field(384, ge=1)
    window: ChatWindow = Field(default_factory=ChatWindow)
    context_tokens: int | None = Field(None, ge=1)
    constrain: bool = False

    #: the option's name in error messages
    WHO: ClassVar[str] = "distilled_policy"

    @model_validator(mode="before")
    @classmethod
    def _old_window(cls, data: Any) -> Any:
        return legacy_window(data, cls.WHO) if isinstance(data, dict) else data

    @field_validator("model")
    @classmethod
    def _spec(cls, v: Any) -> Any:
        if isinstance(v, str):
            parse_spec(v)           # a malformed spec is an error naming this option
        return v

    @property
    def model_spec(self) -> str:
        return self.model.spec if isinstance(self.model, LanguageModel) else self.model


class DistilledPolicyOptions(DistilledModelOptions):
    """``distilled_policy`` (search agents): the policy is a model fine-tuned by ``clew train``
    (EL or IL, ``format``), prompted with the distilled agent's chat at each node
    (:class:`clew.agents.distilled.DistilledPolicy`); ``n_samples`` completions per expansion,
    one request; priors from their frequencies as for the LM policy.
    Sampling defaults are the LM policy's (``temperature`` 1.0, ``top_p`` 0.95): diverse samples
    give the priors. ``constrain``: every answer is one of the env's legal actions.
    ``uniform_mix``: the share of the prior spread evenly over the env's legal actions, so a
    learned prior worse than a uniform one cannot keep the search from the moves it never
    names (:func:`clew.agents.policy.mix_uniform`; 0: the model's priors alone)."""

    uniform_mix: float = Field(0.0, ge=0, le=1)


class DistilledValueOptions(DistilledModelOptions):
    """``distilled_value`` (search agents): the value function is a model fine-tuned by ``clew
    train`` on ``clew data``'s ``value_sft`` chats, prompted with the distilled agent's chat in
    the IL format (the values' prompts) at each evaluated node
    (:class:`clew.agents.distilled_value.DistilledValue`,
    docs/methods/exploratory-learning.md#learned-value). The value is the mean of the
    ``n_samples`` grades read (``temperature`` 0: one greedy answer); ``constrain``: every
    answer is a grade of the data's (a tenth in [0, 1]). The scale is ``value.scale``."""

    format: Literal["el", "il"] = "il"
    n_samples: int = Field(8, ge=1)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(32, ge=1)

    WHO: ClassVar[str] = "distilled_value"


class ActSampling(Section):
    """Sampling of one action per step without search (ReAct, the policy-only and distilled
    agents): ``docs/methods/baselines.md#react``."""

    temperature: float = Field(0.7, ge=0)
    top_p: float = Field(0.9, gt=0, le=1)
    max_tokens: int = Field(384, ge=1)


ACT_SAMPLING = ActSampling()


class SingleValueOptions(Section):
    """``value.single``: one request with ``n`` samples of a status code; ``window`` recent
    steps shown; ``rubric``: a per-task rubric request first."""

    n: int = Field(20, ge=1)
    temperature: float = Field(1.0, ge=0)
    top_p: float = Field(0.95, gt=0, le=1)
    max_tokens: int = Field(256, ge=1)
    window: int = Field(2, ge=0)
    rubric: bool = True


class DebateOptions(Section):
    """``value.debate``: two arguments, then the judge in both orders."""

    argue_temperature: float = Field(0.1, ge=0)
    argue_top_p: float = Field(0.9, gt=0, le=1)
    argue_max_tokens: int = Field(256, ge=1)
    judge_samples_per_order: int = Field(3, ge=1)
    judge_temperature: float = Field(1.0, ge=0)
    judge_top_p: float = Field(0.95, gt=0, le=1)
    judge_max_tokens: int = Field(256, ge=1)
    window: int = Field(4, ge=0)


class ValueOptions(Section):
    """``value``: ``kind`` picks the LM value function (single | debate); ``scale`` the value
    range of every kind; ``constrain``: every grading sample (single, or the debate's judge)
    ends with a status code, ``STATUS CODE: ```X``` `` (docs/methods/parsing.md#constrained-answers).
    Heuristic roles: ``estimate`` ``progress`` is the env's ground-truth progress, ``noise`` /
    ``cap`` shape it (it reads the oracle); ``rollout`` is the env's own outcome after
    ``rollouts`` walks of at most ``horizon`` actions (None: to the episode's end) in the
    simulator, each step a legal action drawn among those leading somewhere the walk has not
    been (``rollout_policy: novel``) or among all (``random``), each walk's grade discounted by
    ``discount`` per action: no oracle
    (docs/methods/baselines.md#heuristic-roles)."""

    kind: Literal["single", "debate"] = "single"
    scale: Literal["unit", "signed"] = "unit"
    parse_failure: Literal["skip", "zero"] = "skip"
    constrain: bool = False
    single: SingleValueOptions = Field(default_factory=SingleValueOptions)
    debate: DebateOptions = Field(default_factory=DebateOptions)
    noise: float = Field(0.2, ge=0)
    cap: float = Field(0.9, ge=0, le=1)
    estimate: Literal["progress", "rollout"] = "progress"
    rollouts: int = Field(8, ge=1)
    horizon: int | None = Field(None, ge=1)
    rollout_policy: Literal["novel", "random"] = "novel"
    discount: float = Field(0.95, gt=0, le=1)
    aggregate: Literal["mean", "max"] = "mean"
    reward_scale: float = Field(10.0, gt=0)

    LM_ONLY = frozenset({"kind", "parse_failure", "single", "debate", "constrain"})
    HEURISTIC_ONLY = frozenset({"noise", "cap", "estimate", "rollouts", "horizon",
                                "rollout_policy", "discount", "aggregate",
                                "reward_scale"})

    @model_validator(mode="after")
    def _estimate_fields(self) -> ValueOptions:
        """The fields of one estimate given with the other are errors naming them."""
        other = {"progress": {"rollouts", "horizon", "rollout_policy", "discount",
                              "aggregate", "reward_scale"},
                 "rollout": {"noise", "cap"}}[self.estimate]
        given = sorted(other & self.model_fields_set)
        if given:
            raise ValueError(f"{', '.join(given)}: not read with estimate: {self.estimate}")
        return self


class ReflectorOptions(Section):
    """``reflection.reflector``: sampling of the LM reflector."""

    temperature: float = Field(0.7, ge=0)
    top_p: float = Field(0.9, gt=0, le=1)
    max_tokens: int = Field(384, ge=1)


class PolicyReflectionOptions(Section):
    """``reflection.policy``: at most ``n_max`` steps whose error score passes ``threshold``;
    the expectation call sees the last ``expect_window`` executed steps."""

    enabled: bool = True
    n_max: int = Field(3, ge=0)
    threshold: float = 0.5
    expect_window: int = Field(2, ge=0)

    LM_ONLY = frozenset({"expect_window"})


class ValueReflectionOptions(Section):
    """``reflection.value``: ``mode`` auto = judge critique for the debate value, expectation
    otherwise; ``error`` forward (the original code) or paper."""

    enabled: bool = True
    n_max: int = Field(1, ge=0)
    threshold: float = 0.5
    mode: Literal["auto", "expectation", "judge_critique"] = "auto"
    error: Literal["forward", "paper"] = "forward"

    def resolve_mode(self, value_method: str) -> str:
        if self.mode == "auto":
            return "judge_critique" if value_method == "debate" else "expectation"
        return self.mode


class ReflectionOptions(Section):
    """``reflection``: the improvement loop after each episode. Success without labels: mean
    executed Q above ``success_threshold`` (``use_gt_success`` reads the ground truth)."""

    use_gt_success: bool = False
    success_threshold: float = 0.7
    reflector: ReflectorOptions = Field(default_factory=ReflectorOptions)
    policy: PolicyReflectionOptions = Field(default_factory=PolicyReflectionOptions)
    value: ValueReflectionOptions = Field(default_factory=ValueReflectionOptions)

    LM_ONLY = frozenset({"reflector"})


RoleName = Literal["policy", "value", "reflection"]


class RoleOptions(Section):
    """What every role-based agent takes: the model and the policy.

    ``roles``: ``lm`` (needs ``model``: a spec string, or from Python a loaded
    :class:`~clew.agents.lm.base.LanguageModel`) or ``heuristic`` (no model; may read the env's
    ground truth); unset = ``lm`` when a model is given. ``role_models`` names another model for
    one role; ``model_options`` go to the backend of ``model``.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    model: str | LanguageModel | None = None
    model_options: dict[str, Any] = Field(default_factory=dict)
    role_models: dict[RoleName, str] = Field(default_factory=dict)
    roles: Literal["lm", "heuristic"] | None = None
    seed: int = 0
    label: str | None = None
    policy: PolicyOptions = Field(default_factory=PolicyOptions)

    LM_ONLY = frozenset({"model", "model_options", "role_models"})

    @property
    def lm_roles(self) -> bool:
        return (self.roles or ("lm" if self.model else "heuristic")) == "lm"

    @property
    def model_spec(self) -> str | None:
        return self.model.spec if isinstance(self.model, LanguageModel) else self.model

    def unread(self) -> list[tuple[str, str]]:
        """(option, why) for every option given that this agent does not read."""
        out = unread_fields(self, self.lm_roles)
        if self.lm_roles and not self.model:
            why = ("required by LM roles (roles: lm): a spec string such as hf:PATH, "
                   "vllm:Qwen/Qwen2.5-7B-Instruct or openai:http://host:8000/v1#NAME")
            out.append(("model", why))
        return out


def unread_fields(model: Section, lm: bool, prefix: str = "") -> list[tuple[str, str]]:
    """Options set in ``model`` (recursively) that the given kind of role does not read."""
    out = []
    other = model.HEURISTIC_ONLY if lm else model.LM_ONLY
    for name in sorted(model.model_fields_set):
        if name in other:
            out.append((prefix + name, "read only by heuristic roles" if lm else
                        "read only by LM roles (give a model, or roles: lm)"))
            continue
        value = getattr(model, name)
        if isinstance(value, Section):
            out += unread_fields(value, lm, f"{prefix}{name}.")
    return out


class OptionsError(ValueError):
    """Agent options that cannot be used; one line per option, each naming it."""


def parse_options(model: type[Section], data: dict[str, Any], agent: str) -> Any:
    """Validate ``data`` as ``model`` and check that the agent reads every option given."""
    try:
        opts = model.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            msg = "unknown option" if err["type"] == "extra_forbidden" else err["msg"]
            lines.append(f"agent {agent!r} option {where}: {msg}")
        raise OptionsError("\n".join(lines)) from None
    unread = opts.unread()
    if unread:
        raise OptionsError("\n".join(f"agent {agent!r} option {where}: {why}"
                                     for where, why in unread))
    return opts


def on_off(value: Any) -> Any:
    """For optional sections: ``false`` / ``null`` = off (None), ``true`` = on with defaults."""
    if value is False:
        return None
    if value is True:
        return {}
    return value
