"""Typed options of a search agent: the role options plus ``search``, ``value``, ``reflection``,
``memory`` and ``episode`` (``docs/methods/rmcts.md``).

``search`` is the typed config of the algorithm it names (``search.algorithm``, default
``mcts``; :mod:`clew.search.registry`), so an option another algorithm reads (``dfs_order`` for
``mcts``) is an unknown option. Reflection is off unless the section is given (``reflection: {}``
turns it on with its defaults; ``false`` / ``null`` off). The memory is on when reflection is on,
unless ``memory.enabled`` says otherwise; its store options default to the memory's own
(:mod:`clew.agents.memory`). Presets live in ``configs/agents/*.yaml`` only.

``distilled_policy`` (off unless given; a bare spec string is its ``model``) makes the policy a
model fine-tuned by ``clew train`` in the EL/IL chat format
(:class:`~clew.agents.distilled.DistilledPolicy`); the value function and the reflector still
follow ``roles`` (``roles: heuristic`` + ``distilled_policy``: the distilled policy with the
heuristic value). The ``policy`` section and ``role_models.policy`` are then not read, and
policy reflections are off (the distilled model was not trained with them).

``distilled_value`` (likewise) makes the value function a model fine-tuned on ``clew data``'s
``value_sft`` chats (:class:`~clew.agents.distilled_value.DistilledValue`); of the ``value``
section only ``scale`` is read, ``role_models.value`` is not, and value reflections are off.
"""

from __future__ import annotations

from typing import Any, Literal

from clew.agents.options import (
    DistilledPolicyOptions,
    DistilledValueOptions,
    OptionsError,
    ReflectionOptions,
    RoleOptions,
    Section,
    ValueOptions,
    on_off,
    parse_options,
)
from clew.search.algorithm import SearchConfig
from clew.search.registry import DEFAULT_ALGORITHM, search_config
from pydantic import Field, ValidationError, field_validator


class MemoryOptions(Section):
    """``memory``: where the reflections live and how they are retrieved; ``None`` = the
    memory's own default (``min_score``: the cut calibrated for the env family). ``dir`` unset:
    a temporary folder of the run (``clew eval`` puts it in the run directory;
    :mod:`clew.search.build`)."""

    enabled: bool | None = None
    dir: str | None = None
    embedding_model: str | None = None
    score_mode: Literal["cosine", "langchain_compat"] | None = None
    min_score: float | None = None
    policy_top_m: int | None = Field(None, ge=0)
    value_top_m: int | None = Field(None, ge=0)

    def store_options(self) -> dict[str, Any]:
        """What :func:`clew.agents.memory.open_memory` takes."""
        return self.model_dump(exclude={"enabled", "dir"}, exclude_none=True)


class EpisodeOptions(Section):
    """``episode``: what a decision that reached the top of the value scale does next:
    ``commit_path_and_continue`` executes it, then searches again; ``commit_path_and_end``
    also ends the episode after its last action (``docs/methods/mcts.md#value-one-paths``)."""

    on_value_one: Literal["commit_path_and_continue", "commit_path_and_end"] = \
        "commit_path_and_continue"


class AgentOptions(RoleOptions):
    """Everything a search agent reads; see the module docstring."""

    search: SearchConfig = Field(default_factory=lambda: search_config(None))
    value: ValueOptions = Field(default_factory=ValueOptions)
    reflection: ReflectionOptions | None = None
    memory: MemoryOptions = Field(default_factory=MemoryOptions)
    episode: EpisodeOptions = Field(default_factory=EpisodeOptions)
    distilled_policy: DistilledPolicyOptions | None = None
    distilled_value: DistilledValueOptions | None = None

    @field_validator("reflection", mode="before")
    @classmethod
    def _reflection_on_off(cls, v: Any) -> Any:
        return on_off(v)

    @field_validator("distilled_policy", "distilled_value", mode="before")
    @classmethod
    def _distilled_model(cls, v: Any) -> Any:
        return {"model": v} if isinstance(v, str) else on_off(v)

    @field_validator("search", mode="before")
    @classmethod
    def _typed_search(cls, v: Any) -> Any:
        try:
            return search_config(v)
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None

    @property
    def memory_on(self) -> bool:
        return self.memory.enabled if self.memory.enabled is not None else \
            self.reflection is not None

    @property
    def policy_memory(self) -> bool:
        """Retrieve policy reflections at each expansion."""
        if self.distilled_policy is not None:       # it reads none
            return False
        return self.memory_on and (self.reflection is None or self.reflection.policy.enabled)

    @property
    def value_memory(self) -> bool:
        """Retrieve value reflections at each evaluation."""
        if self.distilled_value is not None:        # it reads none
            return False
        return self.memory_on and (self.reflection is None or self.reflection.value.enabled)

    def unread(self) -> list[tuple[str, str]]:
        out = super().unread()
        valued = self.value.model_fields_set
        if self.lm_roles and self.value.kind == "single" and "debate" in valued:
            out.append(("value.debate", "read only when value.kind is debate"))
        if self.lm_roles and self.value.kind == "debate" and "single" in valued:
            out.append(("value.single", "read only when value.kind is single"))
        if not self.memory_on:
            why = "the memory is off (reflection is off and memory.enabled is not true)"
            given = sorted(self.memory.model_fields_set - {"enabled"})
            out += [(f"memory.{k}", why) for k in given]
        if self.reflection is None and "reflection" in self.role_models:
            out.append(("role_models.reflection", "reflection is off"))
        if self.distilled_policy is not None:
            out = [(k, why) for k, why in out if not k.startswith("policy.")]
            out += self._unread_by_distilled_policy()
        if self.distilled_value is not None:
            out = [(k, why) for k, why in out if not k.startswith("value.")]
            out += self._unread_by_distilled_value()
        return out

    def _unread_by_distilled_value(self) -> list[tuple[str, str]]:
        """With ``distilled_value`` the value is the fine-tuned model: of the ``value`` section
        only ``scale`` is read, ``role_models.value`` is not, and it reads no reflections."""
        why = "not read: the value is distilled_value (only value.scale is read)"
        out = [(f"value.{k}", why) for k in sorted(self.value.model_fields_set - {"scale"})]
        if "value" in self.role_models:
            out.append(("role_models.value", why))
        if self.reflection is not None and self.reflection.value.enabled:
            why = ("the distilled value reads no reflections: set it to false (policy "
                   "reflections stay on)")
            out.append(("reflection.value.enabled", why))
        return out

    def _unread_by_distilled_policy(self) -> list[tuple[str, str]]:
        """With ``distilled_policy`` the policy is the fine-tuned model: the ``policy`` section
        (LM or heuristic policy) and ``role_models.policy`` are not read, and the policy reads
        no reflections (its model was not trained with them)."""
        why = "not read: the policy is distilled_policy"
        out = [(f"policy.{k}", why) for k in sorted(self.policy.model_fields_set)]
        if "policy" in self.role_models:
            out.append(("role_models.policy", why))
        if self.reflection is not None and self.reflection.policy.enabled:
            why = ("the distilled policy reads no reflections: set it to false (value "
                   "reflections stay on)")
            out.append(("reflection.policy.enabled", why))
        return out


def parse_agent_options(data: dict[str, Any], agent: str) -> AgentOptions:
    """Validate search agent options; every error line names its option."""
    data = dict(data)
    raw = data.get("search")
    if raw is not None and not isinstance(raw, (dict, SearchConfig)):
        raise OptionsError(f"agent {agent!r} option search: must be a mapping, got "
                           f"{type(raw).__name__}")
    try:
        data["search"] = search_config(raw)
    except KeyError as exc:
        raise OptionsError(f"agent {agent!r} option search.algorithm: {exc.args[0]}") from None
    except ValidationError as exc:
        lines = []
        cfg_name = (raw or {}).get("algorithm", DEFAULT_ALGORITHM)
        for err in exc.errors():
            where = ".".join(str(p) for p in ("search", *err["loc"]))
            msg = (f"unknown option for algorithm {cfg_name!r}"
                   if err["type"] == "extra_forbidden" else err["msg"])
            lines.append(f"agent {agent!r} option {where}: {msg}")
        raise OptionsError("\n".join(lines)) from None
    return parse_options(AgentOptions, data, agent)
