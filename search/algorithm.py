"""The contract every search algorithm implements, its result, and the config they all extend.

An algorithm is a class with a typed ``Config`` (a :class:`SearchConfig` subclass) and one
method, ``async plan(hooks, root_obs) -> SearchResult``: build one fresh tree for one real step
from the root observation, moving the simulator and asking the roles only through ``hooks``
(:class:`~clew.search.nodes.SearchHooks`), and say what to execute. The tree is returned with the
decision so callers record it; nothing else survives the call.

Decision kinds (one result shape for all algorithms):

* ``single``: one root edge (MCTS: the most visited);
* ``path``: the edges of one traversal (MCTS stopped early at the top of the value scale);
* ``sequence``: the path to the best node found (BFS / DFS / best-first), not necessarily the
  last traversal.

The caller executes ``decision`` one edge per real step, re-searching when the world differs
from what the tree predicted (``docs/methods/rmcts.md``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from clew.agents.seeds import derive_seed
from clew.search.tree import Edge, Node, Tree
from pydantic import BaseModel, ConfigDict, Field

DecisionKind = Literal["single", "path", "sequence"]


# --- what the core expects from the agent ------------------------------------------------------
class ProposalLike(Protocol):
    """One candidate action of a policy: already merged, counted and ranked."""

    action: str | None
    key: str
    raw: str
    count: int
    prior: float
    is_stop: bool


@dataclass
class Transition:
    """What happened when an edge's action was applied in the simulator.

    ``terminated``: the task ended the episode; ``truncated_by``: the episode rule that cut it
    (``max_steps``, ``invalid_streak``, ``repeated_action``) or None (Gymnasium's split).
    """

    obs: str
    terminated: bool = False
    valid: bool = True
    truncated_by: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Evaluation:
    """A value estimate; ``record`` is the value record as a dict; ``cached`` = no model call."""

    value: float
    record: dict[str, Any] | None = None
    cached: bool = False


class SearchHooks(Protocol):
    """The agent side of the search: model calls and simulator moves."""

    async def expand(self, node: Node) -> Sequence[ProposalLike]:
        """Ranked proposals (prior order) for ``node``; the simulator is at ``node``'s state."""

    async def evaluate(self, node: Node) -> Evaluation:
        """Value of ``node``; the simulator is at ``node``'s state (its parent's for STOP)."""

    def to_root(self) -> None:
        """Put the simulator back in the root (real) state."""

    def apply(self, node: Node, edge: Edge) -> Transition:
        """Step the simulator (at ``node``) with ``edge.action``."""

    def snapshot(self) -> Any: ...

    def restore(self, snap: Any) -> None: ...

    def fork(self) -> SearchHooks:
        """Hooks over an independent copy of the simulator at its current state (same roles,
        same caches), for calls on one node while the search moves the shared simulator on.
        Needed only by algorithms that work on several nodes at once (MCTS waves wider
        than one)."""


class SearchConfig(BaseModel):
    """What every algorithm's config holds: the width of a node and the budget of one tree.

    ``n_simulations`` counts budget units (an MCTS simulation, a frontier pop); the root
    expansion is free. ``max_depth_actions`` makes a node at that depth terminal (``depth``):
    evaluated, never expanded. ``horizon_value`` says what a node cut by the episode rules is
    worth: ``zero`` (not evaluated) or ``evaluate`` (asked of V, for envs graded at the end);
    the search agent sets it from the env's outcome mode when the options leave it unset.
    ``max_expand_attempts`` is how many policy calls an expansion may take when nothing parses.
    ``early_stop_min_parsed``: a leaf at ``early_stop_value`` stops the search only when at least
    this share of its value samples could be read (docs/methods/debate.md#unknown-values).
    """

    model_config = ConfigDict(extra="forbid")

    algorithm: str
    branching_factor: int = Field(5, ge=1)
    n_simulations: int = Field(20, ge=1)
    max_value_calls: int | None = Field(None, ge=1)
    time_budget_s: float | None = Field(None, gt=0)
    max_depth_actions: int = Field(5, ge=1)
    early_stop_value: float = 1.0
    early_stop_min_parsed: float = Field(0.5, ge=0, le=1)
    horizon_value: Literal["zero", "evaluate"] = "zero"
    max_expand_attempts: int = Field(1, ge=1)


@dataclass
class SearchResult:
    """A finished tree and what to execute from it."""

    tree: Tree
    decision: list[Edge]
    kind: DecisionKind
    stopped_by: str | None = None

    @classmethod
    def of(cls, tree: Tree, kind: DecisionKind, decision: list[Edge]) -> SearchResult:
        """The result, with the decision also written into the tree (its JSON keeps it)."""
        tree.decision_kind = kind
        tree.decision_edges = [e.edge_id for e in decision]
        return cls(tree, list(decision), kind, tree.counters.get("stopped_by"))


class SearchAlgorithm(Protocol):
    """One tree per real step; see the module docstring."""

    Config: ClassVar[type[SearchConfig]]
    config: SearchConfig

    async def plan(self, hooks: SearchHooks, root_obs: str | None) -> SearchResult: ...


class Configured:
    """What the built-in algorithm classes share: the typed config and a clock (a test may pass
    a fake one); each sets ``Config`` and writes ``plan`` around its search function."""

    def __init__(self, config: SearchConfig, clock: Callable[[], float] = time.perf_counter):
        self.config = config
        self.clock = clock


def search_rng(hooks: SearchHooks, algorithm: str, root_obs: str | None) -> random.Random:
    """The random generator of an algorithm that draws by itself (best-of-N, AB-MCTS): seeded
    from the hooks' ``seed`` (the search agent derives it from its seed, the episode and the real
    step; hooks without one count as seed 0) and the root observation, so a search is
    reproducible under a seed and two real steps do not share their draws."""
    base = getattr(hooks, "seed", None)     # optional: scripted hooks in tests have none
    return random.Random(derive_seed(0 if base is None else base, algorithm, root_obs))
