"""What every agent sees and returns (docs/architecture.md).

The runner owns an :class:`Episode`: the task, the real environment, the executed history and
the interaction log. An agent's ``act`` reads it and returns a :class:`Decision`; the runner
executes it. Search agents simulate in ``episode.simulator()`` copies, whose steps are logged as
*simulated* interactions, so metrics can tell peeking in a simulator from exploring.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from clew.agents.usage import UsageByRole
from clew.envs.base import Env, Observation, Step, Task

#: the run being played (``run_suite`` sets it for its episodes): what an agent keeps per run, such
#: as a temporary reflection memory, is keyed by it; ``None`` outside a run
CURRENT_RUN: ContextVar[str | None] = ContextVar("clew_current_run", default=None)

#: the action text recorded for a decision that holds no readable action (a NONE edge): the
#: runner does not step the env with it (docs/methods/mcts.md#stop-and-none-edges)
NO_ACTION = "(no action)"


@dataclass(frozen=True)
class EpisodeOrder:
    """Where an episode stands in its run's fixed order (docs/methods/reflection-memory.md#memory-order):
    ``run`` names the run, ``position`` is the episode's index in the run's (task, repeat) list
    and ``wave`` the group of episodes that run together; an episode sees the reflections of
    the waves before its own."""

    run: str
    wave: int
    position: int


@dataclass
class Decision:
    """An agent's choice for one real step.

    ``action`` is the action text handed to ``env.step`` (for multi-action envs it may hold
    several actions); ``raw`` is the model completion that produced it, kept for chat history
    and training data; ``info`` carries anything worth recording (a tree path, value, ...).
    ``info["no_action"]`` marks a decision without a readable action (``action`` is
    :data:`NO_ACTION`): the runner records an invalid step without stepping the env.
    """

    action: str
    raw: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepRecord:
    """One executed step as recorded in ``episodes.jsonl``."""

    t: int
    action: str
    valid: bool
    reward: float
    done: bool
    obs: str
    raw: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Interaction:
    """One call of ``step`` on any env copy (docs/architecture.md)."""

    kind: Literal["executed", "simulated"]
    action: str
    valid: bool
    done: bool


class Episode:
    """Runtime state of one episode, shared by the runner and the agent."""

    def __init__(self, task: Task, env: Env, first: Observation, key: str = "",
                 order: EpisodeOrder | None = None):
        self.task = task
        self.order = order  # set by run_suite when the run keeps a fixed order of waves
        self.env = env
        self.key = key or task.id
        self.observations: list[Observation] = [first]
        self.steps: list[StepRecord] = []
        self.interactions: list[Interaction] = []
        self.usage = UsageByRole()
        self.scratch: dict[str, Any] = {}  # per-episode agent state (chat history, memory, ...)
        self.trees: list[Any] = []  # (step, tree dict) pairs, written to disk by the runner
        # The current path of real states for BACKTRACK: state ids, S0 first
        # (docs/methods/exploratory-learning.md#state-ids).
        self.path: list[int] = [0]
        # the agent's own estimate of success (search agents; for data selection without labels)
        self.success_est: bool | None = None
        # what a reflection memory showed this episode (visible sizes, retrieved ids), recorded
        self.memory: dict[str, Any] | None = None
        self.charged = 0  # simulated queries charged to the real env (simulation_mode "charged")
        # States reached for real and inside simulation (env.state_key), for the peek count.
        self.visited_states: set[Any] = {env.state_key()}
        self.simulated_states: set[Any] = set()

    @property
    def obs(self) -> Observation:
        return self.observations[-1]

    @property
    def t(self) -> int:
        return len(self.steps)

    def actions(self) -> list[str]:
        return [s.action for s in self.steps]

    def record(self, decision: Decision, step: Step) -> StepRecord:
        """Log an executed step (called by the runner)."""
        rec = StepRecord(
            t=self.t, action=decision.action, valid=step.valid, reward=step.reward,
            done=step.terminated, obs=step.obs.text, raw=decision.raw,
            info={**step.info, **decision.info},
        )
        self.steps.append(rec)
        self.observations.append(step.obs)
        self.visited_states.add(self.env.state_key())
        self.interactions.append(Interaction("executed", decision.action, step.valid, step.terminated))
        return rec

    def simulator(self) -> Env:
        """A copy of the real env at its current state; its steps are logged as simulated.

        The runner's env carries the episode rules (:class:`~clew.envs.wrappers.EpisodeRules`),
        so the copy follows them from the same history and its steps say when a path is cut.

        With ``flags.simulation_mode == "charged"`` (budgeted oracle-query tasks,
        docs/methods/mcts.md#free-and-charged-simulation) every simulated query the real env has
        not answered yet is also asked for real:
        charged to the budget and recorded as an executed step, so the search cannot read the
        hidden function for free; its tree acts as an exploration strategy.
        """
        charged = self.env.flags.simulation_mode == "charged"
        return SimulatedEnv(self.env.copy(), self.interactions, self.charge if charged else None,
                            self.simulated_states)

    def peeked_states(self) -> int | None:
        """States a search reached only inside its simulator, never for real: what the executed
        trajectory's exploration metrics do not show (docs/methods/metric-travel.md#peeked-states);
        ``None`` when the env
        defines no ``state_key``."""
        if None in self.visited_states:
            return None
        return len(self.simulated_states - self.visited_states)

    def knows(self, action: str) -> bool:
        """Whether the real env has been asked ``action`` already (executed or charged)."""
        key = self.env.canonical(action)
        if any(s.valid and self.env.canonical(s.action) == key for s in self.steps):
            return True
        return self.env.answered(action)

    def charge(self, action: str) -> None:
        """Ask a simulated query for real (see :meth:`simulator`); known ones cost nothing."""
        if self.env.done or self.env.is_stop(action) or self.knows(action):
            return
        self.record(Decision(action, info={"charged_simulation": True}), self.env.step(action))
        self.charged += 1


class SimulatedEnv:
    """Proxy around an env copy that logs every ``step`` as a simulated interaction (and, in
    charged mode, hands each valid query to ``charge``)."""

    def __init__(self, env: Env, log: list[Interaction], charge: Any = None,
                 states: set[Any] | None = None):
        self._env = env
        self._log = log
        self._charge = charge
        self._states = states if states is not None else set()

    def step(self, action: str) -> Step:
        step = self._env.step(action)
        self._log.append(Interaction("simulated", action, step.valid, step.terminated))
        self._states.add(self._env.state_key())
        if self._charge is not None and step.valid:
            self._charge(action)
        return step

    def copy(self) -> SimulatedEnv:
        return SimulatedEnv(self._env.copy(), self._log, self._charge, self._states)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


@runtime_checkable
class Agent(Protocol):
    """The one shape the runner knows: ReAct, search agents, baselines, distilled checkpoints."""

    name: str

    async def act(self, episode: Episode) -> Decision: ...

    def on_episode_end(self, episode: Episode) -> None: ...


class BaseAgent:
    """Convenience base: a name, a label for reports, and a no-op ``on_episode_end``."""

    name = "agent"
    #: "heuristic" (no LM; may read env.oracle()), "lm" or "learned", shown in every report.
    kind = "heuristic"
    uses_oracle = False

    async def act(self, episode: Episode) -> Decision:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_episode_end(self, episode: Episode) -> None:
        return None
