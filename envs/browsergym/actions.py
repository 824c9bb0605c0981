"""BrowserGym's high-level action set as clew's action grammar (docs/web.md).

An action is one Python-style call of BrowserGym's action set (``HighLevelActionSet``), e.g.
``click('13')`` or ``fill('14', 'Myron')``. Parsing is as tolerant as clew's other envs: BrowserGym's
own call parser finds the first call anywhere in a model's answer (prose, code fences and
"Action:" prefixes around it are skipped), names are matched without regard to case, arguments are
bound to the function's signature, and an element id written as a number (``click(13)``) becomes
the string BrowserGym expects. The canonical text, the merge key of identical actions, writes the
call back with Python literals and leaves out arguments equal to their defaults, so
``click("13", button='left')`` and ``click('13')`` are one action.

Decision: one action per step (BrowserGym's ``multiaction=False``), like every other clew env;
with several calls in an answer the first one counts.
"""

from __future__ import annotations

import inspect
from functools import cached_property
from typing import Any

#: parameters that name an element: an int there is an id written without quotes
ID_PARAMS = frozenset({"bid", "from_bid", "to_bid"})


class ActionGrammar:
    """Parse and describe the actions of BrowserGym subsets (``"bid"``, ``"webarena"``, ...)."""

    def __init__(self, subsets: tuple[str, ...] = ("bid",)):
        self.subsets = tuple(subsets)

    @cached_property
    def action_set(self) -> Any:
        from browsergym.core.action.highlevel import HighLevelActionSet

        try:
            return HighLevelActionSet(subsets=list(self.subsets), multiaction=False)
        except ValueError as exc:
            raise ValueError(f"browsergym option action_subsets={list(self.subsets)!r}: {exc}") \
                from None

    @cached_property
    def signatures(self) -> dict[str, inspect.Signature]:
        from browsergym.core.action import functions

        return {name: inspect.signature(getattr(functions, name))
                for name in self.action_set.action_set}

    @cached_property
    def _lower(self) -> dict[str, str]:
        return {name.lower(): name for name in self.signatures}

    def describe(self) -> str:
        return self.action_set.describe(with_long_description=False, with_examples=True).strip()

    def to_python_code(self, action: str) -> str:
        """BrowserGym's own translation of an action into the code it executes."""
        return self.action_set.to_python_code(action)

    def parse(self, text: str) -> str | None:
        """The canonical text of the first well-formed action in ``text``, or ``None``."""
        from browsergym.core.action.parsers import NamedArgument, highlevel_action_parser

        try:
            found = highlevel_action_parser.search_string(text or "").as_list()
        except Exception:  # noqa: BLE001 - pyparsing may raise on odd input: nothing parsed
            return None
        for group in found:
            for call in group:
                name = self._lower.get(str(call[0]).lower())
                if name is None:
                    continue
                args = [a for a in call[1] if not isinstance(a, NamedArgument)]
                kwargs = {a.name: a.value for a in call[1] if isinstance(a, NamedArgument)}
                canonical = self._canonical(name, args, kwargs)
                if canonical is not None:
                    return canonical
        return None

    def _canonical(self, name: str, args: list, kwargs: dict) -> str | None:
        sig = self.signatures[name]
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return None
        parts, keyword = [], False
        for pname, param in sig.parameters.items():
            if pname not in bound.arguments:
                keyword = True
                continue
            value = bound.arguments[pname]
            if pname in ID_PARAMS and isinstance(value, int) and not isinstance(value, bool):
                value = str(value)
            if param.default is not inspect.Parameter.empty and value == param.default:
                keyword = True
                continue
            parts.append(f"{pname}={value!r}" if keyword else repr(value))
        return f"{name}({', '.join(parts)})"
