"""The model check every command that takes a model runs before any work: ``clew eval``,
``clew search``, ``clew loop`` and ``clew train`` (docs/architecture.md, "Language models").

A missing model or adapter folder, an unknown backend, a folder that holds only a LoRA adapter
(its base not named) or no model at all is one ``error:`` line naming the config field, exit 2,
before a run directory is made or a model loaded. What the check cannot know without loading
(hub ids, servers) is left to the backend.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from clew.agents.lm.spec import LORA_SEP, ModelSpecError, check_model
from clew.runner.registry import resolve

_PREFIX = re.compile(r"^([A-Za-z][\w.-]*):(?!//)")


def model_specs(options: Any, field: str) -> Iterator[tuple[str, str]]:
    """(field, spec) of every model spec in agent options: each ``model`` string and each
    ``role_models`` entry, in nested sections too (``distilled_policy.model``,
    ``inner_options.model``). Specs with a ``{placeholder}`` a loop fills in later are left."""
    if isinstance(options, dict):
        for key, value in options.items():
            where = f"{field}.{key}"
            if key == "model" and isinstance(value, str):
                if "{" not in value:
                    yield where, value
            elif key == "role_models" and isinstance(value, dict):
                yield from ((f"{where}.{role}", spec) for role, spec in value.items()
                            if isinstance(spec, str) and "{" not in spec)
            else:
                yield from model_specs(value, where)
    elif isinstance(options, list):
        for i, value in enumerate(options):
            yield from model_specs(value, f"{field}.{i}")


def check_agent_models(agent: str, options: dict[str, Any], field: str = "agent_options") -> None:
    """Check the model specs of an agent's options, its preset's options included."""
    try:
        options = resolve(agent, options)[1]
    except (KeyError, ValueError):
        pass  # an unknown agent or preset: the agent check names it
    for where, spec in model_specs(options, field):
        try:
            check_model(spec)
        except ModelSpecError as exc:
            raise ModelSpecError(f"{where}: {exc}") from None


def check_base_model(name: str, field: str = "model") -> None:
    """A base model to train from: ``PATH``, a hub id, ``hf:PATH`` or ``tiny:PATH`` (built on
    first use); not base+adapter and no other backend."""
    if name.startswith("tiny:"):
        return
    prefix = _PREFIX.match(name)
    if prefix and prefix.group(1).lower() != "hf":
        raise ModelSpecError(f"{field}: {name!r}: training takes PATH, a hub id, hf:PATH or "
                             f"tiny:PATH, not the {prefix.group(1)!r} backend")
    bare = name.removeprefix("hf:")
    if LORA_SEP in bare:
        raise ModelSpecError(f"{field}: {name!r}: train from a base or merged model, not "
                             f"base+adapter (merge it first with `clew train --merge-only`)")
    spec = f"hf:{bare}"
    try:
        check_model(spec)
    except ModelSpecError as exc:  # say it about the name as given
        reason = str(exc).removeprefix(f"model {spec}: ")
        raise ModelSpecError(f"{field}: {name!r}: {reason}") from None
