"""The role contracts a search agent is built from: policy, value function, reflector.

Each role says what it is: ``kind`` (``lm``: a language model answers; ``heuristic``: code
answers, possibly from the env's ground truth; ``learned``: a model fine-tuned by clew answers, the
distilled policy of :mod:`clew.agents.distilled` or value of :mod:`clew.agents.distilled_value`) and ``uses_oracle`` (it reads ``env.oracle()`` or
the env's ground-truth progress, so reports label the agent accordingly). A value function also
declares its ``method`` (``single`` | ``debate`` | ``heuristic`` | ``rollout`` | ``learned``) and its ``scale`` (``unit``:
values in [0, 1]; ``signed``: [-1, 1]). The implementations: :mod:`clew.agents.policy`,
:mod:`clew.agents.value`, :mod:`clew.agents.debate`, :mod:`clew.agents.reflection` and the
heuristic roles of :mod:`clew.agents.heuristics.search_roles`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from clew.agents.policy import Proposal
    from clew.agents.prompts import Context
    from clew.agents.usage import UsageByRole
    from clew.agents.value import ValueRecord

RoleKind = Literal["lm", "heuristic", "learned"]


class Policy(Protocol):
    """Ranked candidate actions with priors for a state (``docs/methods/mcts.md#expansion``)."""

    kind: RoleKind
    uses_oracle: bool

    async def propose(self, ctx: Context, reflections: Sequence[dict[str, Any]] = (),
                      usage: UsageByRole | None = None) -> list[Proposal]:
        """Merged proposals, highest prior first, at most the branching factor."""

    async def act_once(self, ctx: Context, usage: UsageByRole | None = None) -> Proposal:
        """One action without search (``action`` None when nothing parsed)."""


class ValueFunction(Protocol):
    """The value of the trajectory to a state (``docs/methods/debate.md``)."""

    kind: RoleKind
    uses_oracle: bool
    method: Literal["single", "debate", "heuristic", "rollout", "learned"]
    scale: Literal["unit", "signed"]

    def config_hash(self) -> str:
        """Identifies the settings, so cached values are reused only under the same ones."""

    async def evaluate(self, ctx: Context, reflections: Sequence[dict[str, Any]] = (),
                       usage: UsageByRole | None = None) -> ValueRecord: ...


class Reflector(Protocol):
    """Writes reflections after an episode (``docs/methods/reflection-memory.md``)."""

    kind: RoleKind
    uses_oracle: bool

    async def reflect_policy(self, rec: Any, t: int, success: bool,
                             usage: UsageByRole | None = None) -> tuple[str, str, str]:
        """(expectation, next observation, reflection text) about executed step ``t``."""

    async def reflect_value(self, rec: Any, t: int, success: bool, mode: str,
                            usage: UsageByRole | None = None) -> str | None:
        """A reflection about the state reached by step ``t``; None when the mode has no data."""
