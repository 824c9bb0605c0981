"""GridMapEnv: the partially observed grid map with a hidden task DAG (docs/methods/envs.md#grid-map-with-task-dag).

One action = one move = one step. On arrival at a cell the env applies the docs/methods/envs.md#grid-map-with-task-dag order: mark the
cell observed; a node here that was undiscovered becomes discovered; an unachieved node whose
prerequisites hold becomes achieved. The episode succeeds when the goal is achieved and fails
when the hidden budget B = α·|M| is used up.

Decisions taken (docs/methods/metric-explore-exploit-error.md#decisions):

* invalid actions (unparsable text, unknown word, blocked direction): the agent stays
  put and the step is consumed (``invalid_policy="stay_and_count"``, the default); the next
  observation starts with "Invalid action '<raw>'; you did not move." and then repeats the
  previous cell message with the new step count. ``invalid_policy="retry_without_step"`` does
  not consume the step for up to ``max_retries`` consecutive invalid actions; the next one is
  charged and starts a fresh round of retries. Invalid steps never raise.
* the observation uses the canonical template with a step counter; ``step_counter=False``
  gives the paper's shorter early variant.
* goal identity: the goal's name is tagged "(goal)" wherever it appears; hints list
  the node's children plainly ("It leads to: ...") and its parents in the prerequisite text;
  locations are never revealed.
* Action parsing: :mod:`clew.envs.gridmap.actions`.
* ``pits=k`` (docs/methods/envs.md#pits): k hidden pits hang off the map, each seeded by the
  task. Entering one is a valid move; from then on every move is valid and keeps the agent in
  the pit, until the budget is spent. Only going back (a backtrack, which restores an earlier
  state) gets out: where a step cannot be undone by walking, going back matters. A backtrack
  brings the world back but not what was learnt: the pits found stay found, and the observation
  next to one says where it lies.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from clew.envs.base import Env, EnvFlags, Observation, Step, Task
from clew.envs.gridmap import prompts
from clew.envs.gridmap.actions import parse_direction
from clew.envs.gridmap.instance import (
    ACHIEVED,
    DISCOVERED,
    UNDISCOVERED,
    Cell,
    Instance,
    Node,
    pit_cells,
    prec,
    step_cell,
)
from clew.envs.gridmap.prompts import prereq_text

INVALID_POLICIES = ("stay_and_count", "retry_without_step")
PIT = "You fell into a pit; no move gets you out of it."
IN_PIT = "You are in a pit; your move did not get you out of it."

# --- state -----------------------------------------------------------------------------------------
@dataclass
class GridState:
    """Everything that changes during an episode (snapshot = a copy of this)."""

    pos: Cell
    steps: int = 0
    observed: set[Cell] = field(default_factory=set)
    status: dict[str, str] = field(default_factory=dict)
    done: bool = False
    success: bool = False
    invalid: int = 0
    consecutive_invalid: int = 0
    goal_known: bool = False
    cell_message: str = ""
    obs: Observation | None = None
    pits_found: frozenset[Cell] = frozenset()

    def copy(self) -> GridState:
        return GridState(
            pos=self.pos, steps=self.steps, observed=set(self.observed), status=dict(self.status),
            done=self.done, success=self.success, invalid=self.invalid,
            consecutive_invalid=self.consecutive_invalid, goal_known=self.goal_known,
            cell_message=self.cell_message, pits_found=self.pits_found,
            obs=Observation(self.obs.text, dict(self.obs.info)) if self.obs else None,
        )


class GridMapEnv(Env):
    """docs/methods/envs.md#grid-map-with-task-dag environment. Options: ``step_counter``,
    ``invalid_policy``, ``max_retries``, ``pits``."""

    name = "gridmap"
    memory_min_score = 0.97    # docs/methods/reflection-memory.md#scores
    flags = EnvFlags(deterministic=True, supports_backtrack=True,
                     outcome_mode="terminal_success", simulation_mode="free")

    def __init__(self, step_counter: bool = True, invalid_policy: str = "stay_and_count",
                 max_retries: int = 3, pits: int = 0):
        if invalid_policy not in INVALID_POLICIES:
            raise ValueError(f"gridmap env: invalid_policy {invalid_policy!r} is not one of "
                             f"{', '.join(INVALID_POLICIES)}")
        if isinstance(pits, bool) or not isinstance(pits, int) or pits < 0:
            raise ValueError(f"gridmap env: pits must be a whole number >= 0, got {pits!r}")
        self.step_counter = step_counter
        self.invalid_policy = invalid_policy
        self.max_retries = int(max_retries)
        self.pits = pits
        self.instance: Instance | None = None
        self.pit_cells: frozenset[Cell] = frozenset()
        self.state: GridState | None = None

    # --- core loop -----------------------------------------------------------------------
    def reset(self, task: Task) -> Observation:
        if task.env != self.name:
            raise ValueError(f"gridmap env cannot run a task of env {task.env!r} ({task.id})")
        self.task = task
        inst = Instance.from_params(task.params)
        # pits join the traversable cells as leaves: distances and the budget stay the map's
        self.pit_cells = pit_cells(inst, self.pits, f"{task.id}:{task.seed}")
        if self.pit_cells:
            inst = replace(inst, width=inst.width + 1, height=inst.height + 1,
                           cells=inst.cells | self.pit_cells)
        self.instance = inst
        self.state = GridState(pos=inst.start, status={n.name: UNDISCOVERED for n in inst.nodes})
        message = self._arrive(inst.start)
        self.state.cell_message = message
        self.state.obs = self._observe()
        return self.state.obs

    def step(self, action: str) -> Step:
        st, inst = self._require()
        if st.done:
            obs = Observation("The episode is over.", {**st.obs.info, "invalid": True})
            return Step(obs, 0.0, True, False, {"position": list(st.pos), "invalid": True})
        direction = parse_direction(action)
        valid = direction is not None and direction in inst.moves[st.pos]
        if valid:
            st.consecutive_invalid = 0
            st.steps += 1
            if st.pos in self.pit_cells:
                st.cell_message = IN_PIT
            else:
                st.pos = step_cell(st.pos, direction)
                st.cell_message = self._arrive(st.pos)
            error = None
        else:
            st.invalid += 1
            st.consecutive_invalid += 1
            free_retry = (self.invalid_policy == "retry_without_step"
                          and st.consecutive_invalid <= self.max_retries)
            if not free_retry:
                st.steps += 1
                st.consecutive_invalid = 0  # a charged step starts a fresh round of retries
            raw = str(action).strip().replace("\n", " ")
            raw = raw if len(raw) <= 80 else raw[:77] + "..."
            why = ("" if direction is None else
                   f" ({direction} is blocked here)")
            error = f"Invalid action '{raw}'{why}; you did not move."
        st.success = st.status[inst.goal] == ACHIEVED
        st.done = st.success or st.steps >= inst.budget
        st.obs = self._observe(error)
        return Step(st.obs, 1.0 if (valid and st.success) else 0.0, st.done, valid,
                    {"position": list(st.pos), "invalid": not valid})

    def observation(self) -> Observation:
        st, _ = self._require()
        return st.obs

    def memory_view(self, observation: str) -> str:
        """The observation without its "OBSERVATION:" label and step counter: every task of the
        family has the same instructions, so position, cell and moves are what tell states
        apart (Env.memory_view)."""
        text = re.sub(r"\s*Steps used: \d+\.", "", observation)
        return re.sub(r"^(OBSERVATION:\s*)+", "", text.strip())

    def state_key(self) -> tuple:
        """Position and achieved nodes: what a visit means for peek counting (Env.state_key)."""
        st, _ = self._require()
        return st.pos, tuple(sorted(n for n, v in st.status.items() if v == ACHIEVED))

    # --- snapshots: the whole world lives in self.state ------------------------------------
    def snapshot(self) -> GridState:
        st, _ = self._require()
        return st.copy()

    def restore(self, snap: GridState, keep_clock: bool = False) -> None:
        clock, found = self.clock(), self.state.pits_found if self.state else frozenset()
        self.state = snap.copy()
        if keep_clock:   # a backtrack: the world goes back, the clock and the pits found do not
            self.state.pits_found = self.state.pits_found | found
            self.set_clock(clock)

    def set_clock(self, steps: int) -> None:
        """Move the budget clock (BACKTRACK with keep_clock); the observation shows the new count
        and the episode ends if the budget is used up."""
        st, inst = self._require()
        st.steps = int(steps)
        st.done = st.success or st.steps >= inst.budget
        st.obs = self._observe()

    def copy(self) -> GridMapEnv:
        other = type(self)(self.step_counter, self.invalid_policy, self.max_retries, self.pits)
        other.task, other.instance, other.pit_cells = self.task, self.instance, self.pit_cells
        other.state = self.state.copy() if self.state else None
        return other

    # --- text for agents -----------------------------------------------------------------
    def instructions(self, variant: str = "default") -> str:
        return prompts.instructions(variant)

    def task_description(self, variant: str = "default") -> str:
        return prompts.task_description(variant)

    def answer_format(self) -> str:
        return prompts.ANSWER_NOTATION

    def action_help(self) -> str:
        return prompts.ACTION_HELP

    def parse_action(self, text: str) -> str | None:
        return parse_direction(text)

    def canonical(self, action: str) -> str:
        return parse_direction(action) or str(action).strip().lower()

    # --- facts ---------------------------------------------------------------------------
    def legal_actions(self) -> list[str]:
        """The admissible moves at the current cell (none once the episode is over)."""
        st, inst = self._require()
        return [] if st.done else list(inst.moves[st.pos])

    def grade(self) -> float:
        return 1.0 if self.state and self.state.success else 0.0

    def progress(self) -> float:
        """Ground-truth progress (Env.progress): 1 − d/d₀, with d the fewest moves that achieve
        the goal from here given the full map (:meth:`Instance.moves_to_goal`) and d₀ the same
        from the start; 1 on success, 0 when the goal can no longer be achieved."""
        st, inst = self._require()
        if st.success:
            return 1.0
        if st.pos in self.pit_cells:
            return 0.0
        achieved = frozenset(u for u, s in st.status.items() if s == ACHIEVED)
        d = inst.moves_to_goal(st.pos, achieved)
        d0 = inst.moves_to_goal(inst.start, frozenset())
        if not math.isfinite(d) or d0 <= 0:
            return 0.0
        return max(0.0, min(1.0, 1.0 - d / max(d0, 1.0)))

    def steps_to_goal(self) -> float:
        """Env.steps_to_goal: D (:meth:`Instance.moves_to_goal`, an upper bound) when it fits
        in the hidden budget that is left, else inf."""
        st, inst = self._require()
        if st.success:
            return 0.0
        if st.done or st.pos in self.pit_cells:
            return math.inf
        achieved = frozenset(u for u, s in st.status.items() if s == ACHIEVED)
        d = inst.moves_to_goal(st.pos, achieved)
        return d if d <= inst.budget - st.steps else math.inf

    def oracle(self) -> GridMapOracle:
        st, inst = self._require()
        return GridMapOracle(inst, st.pos, frozenset(st.observed), dict(st.status), st.steps)

    # --- internals -------------------------------------------------------------------------
    def _require(self) -> tuple[GridState, Instance]:
        if self.state is None or self.instance is None:
            raise RuntimeError("gridmap env: call reset(task) first")
        return self.state, self.instance

    def _name(self, name: str) -> str:
        return f"{name} (goal)" if name == self.instance.goal else name

    def _arrive(self, cell: Cell) -> str:
        """docs/methods/envs.md#grid-map-with-task-dag arrival processing; returns the cell message of docs/methods/envs.md#grid-map-with-task-dag."""
        st, inst = self.state, self.instance
        st.observed.add(cell)
        if cell in self.pit_cells:
            st.pits_found = st.pits_found | {cell}
            return PIT
        name = inst.node_at.get(cell)
        if name is None:
            return "Nothing is here."
        node = inst.node_by_name[name]
        first = st.status[name] == UNDISCOVERED
        if first:
            st.status[name] = DISCOVERED
        achieved = {u for u, s in st.status.items() if s == ACHIEVED}
        already = st.status[name] == ACHIEVED
        now = not already and prec(node, achieved)
        if now:
            st.status[name] = ACHIEVED
        if name == inst.goal or inst.goal in node.children:
            st.goal_known = True  # the first visit of a goal parent names the goal
        label = self._name(name)
        leads = self._leads_to(node)
        if now and name == inst.goal:
            return f"You activated the goal state {label}. Task complete."
        if first and now:
            return f"You found state {label}; it is now activated.{leads}"
        if first:
            return (f"You found state {label}; it is not activated. To activate it you need "
                    f"{self.prereq_text(node)}.{leads}")
        if now:
            return f"State {label} is here; its prerequisites are met and it is now activated.{leads}"
        if already:
            return f"State {label} is here; it is already activated."
        return f"State {label} is here; still not activated; it needs {self.prereq_text(node)}."

    def _leads_to(self, node: Node) -> str:
        if not node.children:
            return ""
        return " It leads to: " + ", ".join(self._name(c) for c in node.children) + "."

    def prereq_text(self, node: Node) -> str:
        """'all of A, B' (AND), 'any one of A, B' (OR), 'either (A and B) or (C)' (DNF)."""
        return prereq_text(node.options, self._name)

    def _observe(self, error: str | None = None) -> Observation:
        st, inst = self.state, self.instance
        x, y = st.pos
        parts = [f"OBSERVATION: Position [{x}, {y}].", st.cell_message,
                 f"Legal moves: {', '.join(inst.moves[st.pos])}."]
        if st.pos not in self.pit_cells:
            parts += [f"A pit lies {d}." for d in inst.moves[st.pos]
                      if step_cell(st.pos, d) in st.pits_found]
        if self.step_counter:
            parts.append(f"Steps used: {st.steps}.")
        if st.done and not st.success:
            parts.append("The step budget is used up; the episode is over.")
        text = " ".join(parts)
        if error:
            text = f"{error} {text}"
        name = inst.node_at.get(st.pos)
        node_info = None
        if name is not None:
            node = inst.node_by_name[name]
            node_info = {"name": name, "status": st.status[name], "is_goal": name == inst.goal,
                         "options": [list(o) for o in node.options],
                         "children": list(node.children)}
        info = {
            "position": [x, y],
            "legal_moves": [] if st.done else list(inst.moves[st.pos]),
            "moves_here": list(inst.moves[st.pos]),
            "node": node_info,
            "steps": st.steps,
            "invalid": error is not None,
            "error": error,
            "done": st.done,
            "success": st.success,
            "goal": inst.goal if st.goal_known else None,
            "activated": sorted(u for u, s in st.status.items() if s == ACHIEVED),
        }
        return Observation(text, info)


class PitsGridMapEnv(GridMapEnv):
    """The grid map with two hidden pits a map (docs/methods/envs.md#pits), as an env of its own
    name, ``gridmap-pits``, so that an experiment can hold it as a family beside the plain one."""

    name = "gridmap-pits"

    def __init__(self, step_counter: bool = True, invalid_policy: str = "stay_and_count",
                 max_retries: int = 3, pits: int = 2):
        super().__init__(step_counter, invalid_policy, max_retries, pits)


@dataclass(frozen=True)
class GridMapOracle:
    """Ground truth at the current state (full map, DAG, distances); never shown to agents."""

    instance: Instance
    position: Cell
    observed: frozenset[Cell]
    status: dict[str, str]
    steps: int

    def distance(self, a: Cell, b: Cell) -> int:
        return self.instance.distances(a, b)

    @property
    def pending(self) -> set[str]:
        """P(t): discovered, not achieved, prerequisites met (Eq. 5)."""
        achieved = {u for u, s in self.status.items() if s == ACHIEVED}
        return {u for u, s in self.status.items()
                if s == DISCOVERED and prec(self.instance.node_by_name[u], achieved)}

    @property
    def unobserved(self) -> set[Cell]:
        """U(t): admissible neighbours of observed cells that are not observed (docs/methods/metric-explore-exploit-error.md#cell-states)."""
        adj = self.instance.adj
        return {n for c in self.observed for n in adj[c] if n not in self.observed}

    def case_and_targets(self) -> tuple[int, set[Cell]]:
        """Table 1: the case and the target set T(t)."""
        pending, unobserved = self.pending, self.unobserved
        loc = {u: self.instance.node_by_name[u].cell for u in pending}
        if not pending:
            return 1, unobserved
        if self.instance.goal in pending:
            return 2, {loc[self.instance.goal]}
        if not unobserved:
            return 3, set(loc.values())
        return 4, unobserved | set(loc.values())
