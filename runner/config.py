"""Run configuration: YAML + ``key=value`` overrides, validated before any work
(docs/architecture.md).

Errors name the field, one line each: ``concurrency: Input should be greater than 0``; an
unknown field suggests the one meant (``n_simulatons: unknown field; did you mean
agent_options.search.n_simulations?``).

``--config`` takes a file or the name of a preset shipped with clew (``configs/agents/NAME.yaml``
for runs, ``configs/train/NAME.yaml`` for training); a run's own ``config.yaml`` is a valid
config too (the fields clew records beside the config, :data:`RECORDED`, are ignored).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, ClassVar

import yaml
from clew.records.compat import move_renamed, renamed_path
from clew.search.options import AgentOptions
from clew.search.registry import search_config
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

#: fields a run directory's config.yaml holds beside the config (provenance, merge sources)
RECORDED = ("clew_version", "git_commit", "merged_from")


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
    max_episode_steps: int | None = Field(
        None, ge=1, description="steps an episode may take (the episode rules' step limit); "
                                "unset = the runner's 1000, the env's own budget usually ends "
                                "it first")
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
    record: bool = Field(
        True, description="keep every LM request and its completions in RUN/lm/ for replay "
                          "(docs/methods/recording.md)")
    replay: str | None = Field(
        None, description="answer every LM request from the recording of this run directory, "
                          "with no model (docs/methods/recording.md)")

    #: keys renamed since (read with a warning; docs/architecture.md#errors)
    RENAMED: ClassVar[dict[str, str]] = {"max_steps": "max_episode_steps"}

    @model_validator(mode="before")
    @classmethod
    def _drop_recorded(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k not in RECORDED}
        return move_renamed(data, cls.RENAMED)

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


def merge_overrides(data: dict[str, Any], overrides: list[str],
                    parsed: list[tuple[list[str], Any]] = ()) -> dict[str, Any]:
    """``data`` with each ``key=value`` of ``overrides`` (or each already parsed (path, value)
    of ``parsed``) set at its dotted path."""
    for path, value in [*map(parse_override, overrides), *parsed]:
        node = data
        for part in path[:-1]:
            nxt = node.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"override {'.'.join(path)}={value!r}: {part!r} is not a "
                                  "mapping")
            node = nxt
        node[path[-1]] = value
    return data


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``, nested mappings merged key by key."""
    out = dict(base)
    for k, v in over.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) \
            else v
    return out


#: the YAML presets shipped with clew, by kind (``agents/``, ``train/``, ``loop/``): the
#: repository's ``configs/`` and an installed wheel's ``clew/configs/`` both sit beside this package
PRESETS = Path(__file__).resolve().parents[1] / "configs"


def preset_file(name: str, kind: str) -> Path | None:
    """The preset ``name`` of ``kind`` (agents | train) shipped with clew, if there is one."""
    if not name or "/" in name or name.endswith((".yaml", ".yml")):
        return None
    found = PRESETS / kind / f"{name}.yaml"
    return found if found.is_file() else None


def preset_names(kind: str) -> list[str]:
    return sorted(p.stem for p in (PRESETS / kind).glob("*.yaml"))


def load_yaml(path: str | Path | None, presets: str | None = None) -> dict[str, Any]:
    """The mapping in a config file, or in the preset ``path`` names (``presets``: its kind)."""
    if not path:
        return {}
    path = Path(path)
    if not path.exists():
        found = preset_file(str(path), presets) if presets else None
        if found is None:
            known = f"; presets: {', '.join(preset_names(presets))}" if presets else ""
            raise ConfigError(f"config file {path} does not exist{known}")
        path = found
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ConfigError(f"config file {path}: not valid YAML{at}: {problem}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping")
    return data


def _field_names(model: type[BaseModel], loc: tuple) -> list[str]:
    """Field names of the (nested) model at ``loc``; [] where it is not a model."""
    for part in loc:
        field = model.model_fields.get(str(part))
        ann = field.annotation if field else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return []
        model = ann
    return list(model.model_fields)


def _agent_option_paths() -> list[str]:
    """Dotted option paths of a search agent (for suggestions at the top level)."""
    def walk(model: type[BaseModel], prefix: str) -> list[str]:
        out = []
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                out += walk(ann, f"{prefix}{name}.")
            else:
                out.append(prefix + name)
        return out

    paths = walk(AgentOptions, "")
    paths += walk(type(search_config(None)), "search.")
    return [f"agent_options.{p}" for p in paths]


def did_you_mean(model: type[BaseModel], loc: tuple) -> str:
    """``; did you mean X?`` for an unknown field, or ''."""
    key = str(loc[-1])
    close = difflib.get_close_matches(key, _field_names(model, loc[:-1]), n=1, cutoff=0.6)
    if close:
        return f"; did you mean {'.'.join(map(str, (*loc[:-1], close[0])))}?"
    if len(loc) == 1 and "agent_options" in model.model_fields:
        try:
            paths = _agent_option_paths()
        except Exception:  # noqa: BLE001 - a suggestion must never hide the error
            return ""
        by_last = {p.rsplit(".", 1)[1]: p for p in paths}
        close = difflib.get_close_matches(key, list(by_last), n=1, cutoff=0.75)
        if close:
            return f"; did you mean {by_last[close[0]]}?"
    return ""


def validate(model: type[BaseModel], data: dict[str, Any], source: str | None = None) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            if err["type"] == "extra_forbidden":
                msg = "unknown field" + did_you_mean(model, tuple(err["loc"]))
            elif err["type"] == "missing":
                msg = "required"
            else:
                msg = err["msg"]
            lines.append(f"{where}: {msg}" + (f" (in {source})" if source else ""))
        raise ConfigError("\n".join(lines)) from None


def load_config(model: type[BaseModel], path: str | None, overrides: list[str],
                base: dict[str, Any] | None = None, defaults: dict[str, Any] | None = None,
                presets: str | None = None) -> Any:
    """``defaults`` < the config file (or preset ``presets``/NAME) < ``base`` (command-line
    flags) < ``overrides``; nested mappings merged key by key. Keys the model renamed
    (``model.RENAMED``, :mod:`clew.records.compat`) move to their new places in each layer
    first, so an old name in one layer and the new one in another still override in order."""
    renames = getattr(model, "RENAMED", {})
    data = load_yaml(path, presets)
    if presets == "agents" and path and not Path(path).exists():
        data = {"agent": str(path)}  # --config NAME means --agent NAME (label and all)
    layers = [move_renamed(layer or {}, renames) for layer in (defaults, data, base)]
    data = deep_merge(deep_merge(*layers[:2]), layers[2])
    for text in overrides:
        key, value = parse_override(text)
        key, value = renamed_path(key, value, renames)
        data = merge_overrides(data, [], [(key, value)])
    return validate(model, data, str(path) if path else None)
