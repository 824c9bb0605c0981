"""Run configuration: YAML + ``key=value`` overrides, validated before any work
(docs/architecture.md).

Errors name the field: ``config error: concurrency: Input should be greater than 0``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class ConfigError(ValueError):
    """A config that cannot be used; the message names the field and the file."""


class EvalConfig(BaseModel):
    """What ``clew eval`` / ``clew search`` run."""

    model_config = ConfigDict(extra="forbid")

    agent: str
    agent_options: dict[str, Any] = Field(default_factory=dict)
    suite: str
    out: str | None = None
    repeats: int = Field(1, ge=1)
    concurrency: int = Field(4, ge=1)
    max_steps: int | None = Field(None, ge=1)
    max_invalid_streak: int | None = Field(
        None, ge=0, description="stop after N invalid actions in a row; unset = env default, 0 = off")
    repeat_limit: int | None = Field(
        None, ge=0, description="stop after N identical actions in a row; unset = env default "
                                "(5 where the env applies the repeat rule), 0 = off")
    env_options: dict[str, Any] = Field(default_factory=dict)
    resume: bool = False
    shard: str | None = None
    limit: int | None = Field(None, ge=1, description="run only the first N tasks")
    parse_failure_rate: float | None = Field(
        0.5, ge=0, le=1, description="stop the run when a role fails to parse more than this "
                                     "share of its outputs; null = never (docs/methods/parsing.md)")
    parse_failure_min_outputs: int = Field(
        50, ge=1, description="outputs a role must have read before parse_failure_rate applies")

    @field_validator("suite")
    @classmethod
    def _suite_has_split(cls, v: str) -> str:
        if ":" not in v and not v.endswith(".jsonl"):
            raise ValueError(f"{v!r} needs a split, e.g. {v}:test")
        return v

    @field_validator("shard")
    @classmethod
    def _shard_form(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            i, n = (int(x) for x in v.split("/"))
        except ValueError:
            raise ValueError(f"{v!r} is not of the form i/n (e.g. 0/4)") from None
        if not 0 <= i < n:
            raise ValueError(f"shard {v!r}: need 0 <= i < n")
        return v


def parse_override(text: str) -> tuple[list[str], Any]:
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form key=value")
    key, _, raw = text.partition("=")
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def merge_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for part in path[:-1]:
            nxt = node.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"override {text!r}: {part!r} is not a mapping")
            node = nxt
        node[path[-1]] = value
    return data


def load_yaml(path: str | Path | None) -> dict[str, Any]:
    if not path:
        return {}
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return data


def validate(model: type[BaseModel], data: dict[str, Any], source: str = "config") -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            lines.append(f"  {where}: {err['msg']}")
        raise ConfigError(f"{source} error:\n" + "\n".join(lines)) from None


def load_config(model: type[BaseModel], path: str | None, overrides: list[str],
                base: dict[str, Any] | None = None) -> Any:
    data = {**load_yaml(path), **(base or {})}  # command-line flags win over the file
    data = merge_overrides(data, overrides)
    return validate(model, data, f"config {path}" if path else "config")
