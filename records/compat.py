"""Configs written for older versions of clew: keys that were renamed are still read, each with
one ``warning:`` line naming the key to write instead (docs/architecture.md#errors).

A renamed key moves to its new place (a dotted path: ``sft.max_steps``), its value converted
where its form changed; given under both names in one mapping, it is an error naming both,
since which one was meant is not clew's guess. A config model lists its renames in ``RENAMED``
(old key -> new path, or (new path, converter)); :func:`clew.runner.config.load_config` applies
them to each layer (file, flags, ``key=value`` overrides) before the layers are merged, so an
old-style override still overrides a preset written the new way.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

#: an old key's new dotted path, or the path and the conversion of its value
Rename = str | tuple[str, Callable[[Any], Any]]

_said: set[tuple[str, str]] = set()


def deprecated(old: str, new: str) -> None:
    """Say once per process that ``old`` is read as ``new``."""
    if (old, new) not in _said:
        _said.add((old, new))
        print(f"warning: {old} is deprecated and read as {new}; write {new}", file=sys.stderr)


def _target(rename: Rename) -> tuple[str, Callable[[Any], Any]]:
    return (rename, lambda v: v) if isinstance(rename, str) else rename


def within(section: str, renames: Mapping[str, Rename]) -> dict[str, Rename]:
    """``renames`` of a config that sits in another's ``section`` (a loop's ``train``)."""
    return {f"{section}.{old}": (f"{section}.{new}" if isinstance(new, str)
                                 else (f"{section}.{new[0]}", new[1]))
            for old, new in renames.items()}


def renamed_path(path: list[str], value: Any, renames: Mapping[str, Rename],
                 where: str = "") -> tuple[list[str], Any]:
    """A ``key=value`` override's path and value, renamed if its path starts with an old key
    (a dotted one names a key inside a section: ``train.max_steps``)."""
    for old, rename in renames.items():
        parts = old.split(".")
        if path[:len(parts)] == parts:
            new, convert = _target(rename)
            deprecated(f"{where}{old}", new)
            rest = path[len(parts):]
            return new.split(".") + rest, value if rest else convert(value)
    return path, value


def move_renamed(data: Any, renames: Mapping[str, Rename], where: str = "") -> Any:
    """``data`` (a config mapping) with each old key of ``renames`` (a dotted one: a key inside a
    section) moved to its new dotted path; ``where`` prefixes the names in messages
    (``train: ``). Anything but a mapping is returned as it is, for the validation to report."""
    if not isinstance(data, Mapping):
        return data
    out: dict[str, Any] | None = None
    for old, rename in renames.items():
        *section, key = old.split(".")
        holder = _at(out if out is not None else data, section)
        if not isinstance(holder, Mapping) or key not in holder:
            continue
        if out is None:
            out = _copy(data)
            holder = _at(out, section)
        new, convert = _target(rename)
        value = convert(holder.pop(key))
        *path, last = new.split(".")
        node = out
        for part in path:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(  # noqa: TRY004 - a config's content, not a caller's type
                    f"{where}{old}: its new place {new} is not a mapping here")
        if last in node:
            raise ValueError(f"{where}{old} and {new} are the same setting (the first is its "
                             f"old name): give it once, as {new}")
        node[last] = value
        deprecated(f"{where}{old}", new)
    return data if out is None else out


def _at(data: Any, path: list[str]) -> Any:
    for part in path:
        data = data.get(part) if isinstance(data, Mapping) else None
    return data


def _copy(data: Mapping[str, Any]) -> dict[str, Any]:
    """Mappings copied all the way down (the renames write into them), other values shared."""
    return {k: _copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}
