"""The environment API every clew environment implements (docs/architecture.md#contracts, docs/methods/envs.md#env-capabilities).

Text in, text out, cheap to snapshot. Environments follow Gymnasium's habits (``reset`` then
``step`` until ``done``) but exchange text: an action is a string, an observation carries the text
shown to the agent plus structured ``info`` for metrics and heuristics.

Invariants every implementation keeps:

* ``step`` never raises on a bad action: it returns ``valid=False`` and explains the problem in
  the observation text; how the step counts is the env's own rule (its method page).
* ``restore(snapshot())`` followed by the same actions gives byte-identical observations to a
  fresh ``reset`` followed by the same actions.
* ``restore(snap, keep_clock=True)`` brings the world back but keeps the step counter / budget
  (the ``backtrack`` action of docs/methods/exploratory-learning.md#distilled-agent).

Optional hooks. Everything an agent, a heuristic or a metric may ask of an env beyond the core
loop is declared on :class:`Env` below, once, with a default that is right for an env that does
not care; callers use these names directly (no ``getattr``). An env overrides only what it has:

==================  =========================================================================
``family``          the env family (several registered envs may share one); default ``name``
``max_actions``     actions one step may carry (TextMiniGrid's action sequences); default 1
``history_window``  chat turns a prompting agent keeps; default ``None`` (all)
``parse_retries``   re-asks a prompting agent makes on an unparsable answer; default 0
``prompt_examples`` in-context (user, assistant) pairs for prompts; default none
``task_description`` the task for any role, without a reply format; default ``instructions()``
``answer_format``   how one action is written (notation only); default ``action_help()``
``neutral_observation`` an observation without the env's reply instructions; default as is
``answered``        whether an action's answer is already known (asking again is refused)
``budget``          the query budget the task states to the agent; default ``None``
``progress``        ground-truth progress in [0, 1] for heuristic roles and metrics
``steps_to_goal``   fewest steps to success from here (ground truth for diagnostics)
``state_key``       hashable world state without the clock, for peek counting
``oracle``          ground truth for metrics and heuristic baselines
``memory_min_score`` the reflection memory's calibrated cut for the family; default ``None``
``random_action``   a uniformly random valid action where there is no short list; default none
``heuristic_candidates`` what a model-free policy proposes instead of the legal actions
==================  =========================================================================
"""

from __future__ import annotations

import copy
import json
import random
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal


@dataclass(frozen=True)
class Task:
    """One frozen, JSON-serialisable task instance.

    ``params`` holds everything the env needs to rebuild the instance exactly (generated data
    included, so a task file is self-contained and platform independent).
    """

    env: str
    params: dict[str, Any]
    seed: int = 0
    id: str = ""
    split: str = "test"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        if not isinstance(data, dict):
            # a file's content, not an argument: ValueError like the other task-file errors
            got = type(data).__name__
            raise ValueError(f"a task must be a JSON object, got {got}")  # noqa: TRY004
        missing = [k for k in ("env", "params") if k not in data]
        if missing:
            raise ValueError(f"task is missing field(s): {', '.join(missing)}")
        if not isinstance(data["params"], dict):
            raise ValueError("task field 'params' must be an object")  # noqa: TRY004
        unknown = set(data) - {"env", "params", "seed", "id", "split"}
        if unknown:
            raise ValueError(f"task has unknown field(s): {', '.join(sorted(unknown))}")
        try:
            seed = int(data.get("seed", 0))
        except (TypeError, ValueError):
            raise ValueError(f"task field 'seed' must be an integer, got "
                             f"{data.get('seed')!r}") from None
        return cls(
            env=str(data["env"]),
            params=data["params"],
            seed=seed,
            id=str(data.get("id", "")),
            split=str(data.get("split", "test")),
        )


@dataclass
class Observation:
    """What the agent sees (``text``) plus structured facts for metrics/heuristics (``info``)."""

    text: str
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Step:
    """What one ``step`` returned, with Gymnasium's split: ``terminated``, the task ended the
    episode; ``truncated``, an episode rule cut it (the step limit, the invalid streak, the repeat
    rule; see :mod:`clew.envs.wrappers`), ``truncated_by`` naming the rule. (An episode record
    keeps ``terminated`` under its older name, ``done``, so runs read the same.)"""

    obs: Observation
    reward: float = 0.0
    terminated: bool = False
    valid: bool = True
    info: dict[str, Any] = field(default_factory=dict)
    truncated: bool = False
    truncated_by: str | None = None


@dataclass(frozen=True)
class EnvFlags:
    """Capabilities search, reflection and Exploratory Learning rely on (docs/methods/envs.md#env-capabilities)."""

    deterministic: bool = True
    supports_backtrack: bool = True
    outcome_mode: Literal["terminal_success", "graded_at_end"] = "terminal_success"
    simulation_mode: Literal["free", "charged"] = "free"
    repeat_rule_applies: bool = False


class Env(ABC):
    """Base class of clew environments.

    Subclasses set ``name`` and ``flags`` and implement the abstract methods. ``snapshot`` has a
    deep-copy default that is correct for any env whose whole state lives in ``self.state``.
    """

    name: ClassVar[str] = "env"
    flags: ClassVar[EnvFlags] = EnvFlags()

    #: The env family: reports and family-specific code group by it (HillSearch is family
    #: ``"hill"``). A class that does not set it is its own family, named by ``name``.
    family: ClassVar[str] = "env"

    #: How many actions one step may carry (TextMiniGrid's action sequences); the
    #: env enforces it, prompting agents and bots read it. An instance may set its own.
    max_actions: int = 1

    #: Chat turns (observation, answer pairs) a prompting agent keeps in its prompt; ``None``
    #: keeps them all. An agent option of the same name overrides it.
    history_window: int | None = None

    #: How many more times a prompting agent asks, with the same prompt, when it cannot parse
    #: an answer, before it sends the raw text as the action.
    parse_retries: int = 0

    #: The episode rules stop an episode after this many invalid actions in a row
    #: (docs/methods/envs.md#episode-rules); ``None`` for envs whose own rules count them.
    max_invalid_streak: ClassVar[int | None] = 3

    #: The reflection memory's retrieval cut calibrated for this family when the agent's
    #: options leave ``memory.min_score`` unset (docs/methods/reflection-memory.md#scores);
    #: ``None``: the memory's default.
    memory_min_score: ClassVar[float | None] = None

    task: Task | None = None
    state: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "family" not in cls.__dict__:
            cls.family = cls.name

    # --- the core loop -------------------------------------------------------------------
    @abstractmethod
    def reset(self, task: Task) -> Observation:
        """Start ``task``; return the first observation."""

    @abstractmethod
    def step(self, action: str) -> Step:
        """Apply one action (text). Never raises on a bad action."""

    @abstractmethod
    def observation(self) -> Observation:
        """The observation of the current state (as the last ``reset``/``step`` returned it)."""

    def snapshot(self) -> Any:
        return copy.deepcopy(self.state)

    def restore(self, snap: Any, keep_clock: bool = False) -> None:
        clock = self.clock()
        self.state = copy.deepcopy(snap)
        if keep_clock:
            self.set_clock(clock)

    def clock(self) -> int:
        """Steps used so far (the budget clock that ``keep_clock`` preserves)."""
        return int(getattr(self.state, "steps", 0))

    def set_clock(self, steps: int) -> None:
        self.state.steps = steps

    def observed_return(self) -> float | None:
        """The sum of the rewards the env has returned so far: what an agent sees of its score
        (unlike :meth:`grade`, which may divide by the best possible). ``None`` where the env
        does not keep it."""
        return None

    # --- text for agents -----------------------------------------------------------------
    @abstractmethod
    def instructions(self, variant: str = "default") -> str:
        """The env's own full prompt for an agent that answers in its format (ReAct): the task
        and how to reply."""

    def task_description(self, variant: str = "default") -> str:
        """The task for any role (policy, value, judge, reflection): the world, the goal, the
        rules, and no reply format, so that a role can add its own without contradicting it
        (docs/methods/parsing.md#prompts). Default: :meth:`instructions`, right for an env
        whose instructions say nothing about how to reply."""
        return self.instructions(variant)

    def answer_format(self) -> str:
        """How one action is written, as a noun phrase without "reply"/"only" (``a JSON object
        naming one direction, e.g. {"action": "up"}``); roles that reason before answering put
        it inside their own format. Default: :meth:`action_help`."""
        return self.action_help()

    def neutral_observation(self, text: str) -> str:
        """An observation text as clew's roles show it: without reply instructions the env
        writes into every observation (TextMiniGrid's instruction block). Default: unchanged."""
        return text

    def action_help(self) -> str:
        """The action grammar, for prompts: which actions exist and what they do, with no reply
        format. Families whose actions depend on the state leave the current ones to the
        observation (a text computed once would go stale)."""
        return "Actions: " + ", ".join(self.legal_actions())

    def parse_action(self, text: str) -> str | None:
        """Canonical action for a model's answer, or ``None`` when it cannot be parsed."""
        cleaned = text.strip().strip("`'\".").lower()
        return cleaned if cleaned in self.legal_actions() else None

    def canonical(self, action: str) -> str:
        """Merge key for identical actions, and the history description of an action."""
        return action.strip().lower()

    def is_stop(self, action: str) -> bool:
        return False

    def memory_view(self, observation: str) -> str:
        """A compact view of the task and of ``observation`` (a text this env produced): the
        facts that tell one task and state of the family from another, without the family's
        generic text (instructions, answer format, the clock). Reflection-memory keys are built
        from it (docs/methods/reflection-memory.md#keys). Default: the observation itself."""
        return observation

    def prompt_examples(self) -> list[tuple[str, str]]:
        """In-context examples as (user, assistant) message pairs, shown before the episode's
        own turns by prompting agents. Default: none."""
        return []

    # --- facts ---------------------------------------------------------------------------
    def legal_actions(self) -> list[str]:
        """Actions that are valid now (used by heuristic policies and tree search)."""
        return []

    def random_action(self, rng: random.Random) -> str | None:
        """One uniformly random valid action drawn with ``rng``, for an env whose actions are
        no short list (``legal_actions`` is empty: the oracle-search queries); the random
        baseline and the model-free search policy draw from it. Default: ``None``, no such
        draw (and ``rng`` untouched)."""
        return None

    def heuristic_candidates(self, previous: str | None = None) -> list[str] | None:
        """The actions a model-free search policy proposes here, with uniform priors, instead
        of drawing among ``legal_actions`` (``previous``: the canonical action that led here).
        For envs whose legal actions include many that only undo progress (BrowserGym, where
        every element is clickable). Default: ``None``, the legal actions."""
        return None

    @property
    def done(self) -> bool:
        return bool(getattr(self.state, "done", False))

    def grade(self) -> float:
        """Ground-truth outcome in [0, 1] (for reporting only, never for agents)."""
        return 0.0

    def progress(self) -> float:
        """Ground-truth progress of the current state in [0, 1]: how close it is to the goal.

        For heuristic roles (the oracle policy and value of ``clew.agents.heuristics.search_roles``)
        and metrics only, like :meth:`oracle`; agents never call it. Default: :meth:`grade`.
        Families with a better measure override it (gridmap, TextMiniGrid).
        """
        return float(self.grade())

    def steps_to_goal(self) -> float | None:
        """Fewest further steps that reach success from the current state, playing with full
        knowledge of the world under the env's own limits (``math.inf`` when success is out of
        reach, 0 once it is reached), or ``None`` when the env does not define it (the default).

        Ground truth for ``clew diagnose`` (docs/methods/diagnose.md) only, like
        :meth:`oracle`; agents never call it. The runner's step limit is not the env's: the
        caller compares the result with the steps the episode rules leave.
        """
        return None

    def answered(self, action: str) -> bool:
        """Whether ``action``'s answer is already known in this episode, so that asking it
        again would be refused (TreeSearch: a node already opened). Search and the
        parallel-threads intervention then answer it from memory. Default: False."""
        return False

    def budget(self) -> int | None:
        """The query budget N the task states to the agent (the oracle-search envs), which
        interventions split and hand-offs count down; ``None`` when the env has none (a hidden
        step limit is not a budget in this sense)."""
        return None

    def state_key(self) -> Any:
        """A hashable summary of the world state without its clock, or ``None``.

        Two steps that reach the same key visited the same state. The runner uses it to count
        the states a search saw only inside its simulator ("peeks", docs/methods/rmcts.md#decisions).
        """
        return None

    def oracle(self) -> Any:
        """Ground truth for metrics and heuristic baselines; agents never call it."""
        raise NotImplementedError(f"{self.name} exposes no oracle")

    def copy(self) -> Env:
        """An independent env at the same state (what search simulates in)."""
        other = copy.copy(self)
        other.state = copy.deepcopy(self.state)
        return other
