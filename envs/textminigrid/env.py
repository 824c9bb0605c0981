"""TextMiniGrid: BabyAI PickUp levels played through text, several actions per step (docs/methods/envs.md#textminigrid).

One ``step`` is one **decision step** t′: the agent's reply (raw model output with
``<actions>…</actions>`` / ``<intentions>…</intentions>``, or a bare ``Turn Left,Go Forward``)
is parsed (:mod:`.parsing`), at most ``max_actions`` = m atomic actions are kept, and each is
executed with MiniGrid's own ``step`` (docs/methods/envs.md#textminigrid). Blocked actions are silent no-ops and the sequence
continues; the sequence stops at success, at the 200-step limit, or when the target box
is destroyed. The clock counts atomic actions (docs/methods/envs.md#textminigrid).

The observation text is the docs/methods/envs.md#textminigrid user prompt: mission, the transitions of the last decision step,
the current view in the chosen representation (``sc``, ``sd``, ``hybrid``), facing and carrying,
and the instruction block for m. Short-term memory (docs/methods/envs.md#textminigrid), ``memory_mode``:

* ``"chat"`` (default, the method page's recommendation): the env keeps the last q (user prompt, raw
  reply) pairs and hands them out as ``obs.info["chat_history"]`` chat messages; an LM agent
  sends ``system + chat_history + [user]`` (:func:`.prompts.build_messages`). The text itself
  carries no memory.
* ``"text"``: the alternative of docs/methods/envs.md#textminigrid: a block listing the last q decision steps (starting
  observation, actions, intention) is written into the prompt.
* ``"none"``.

The ``prompt`` option names the prompt variant that ``default`` stands for (:mod:`.prompts`;
``obs`` keeps only the observation description: a third of the tokens, for models with short
contexts).

Unparsable replies (docs/methods/envs.md#textminigrid step 5): the first ``requeries`` consecutive ones use no
environment step (valid=False; the prompt is repeated under a one-line explanation); the next one
executes MiniGrid's inert ``done`` action, which uses one step and is recorded in the history as
an unparsable output, so the step budget always ends the episode.

Snapshots: the mutable MiniGrid state (grid, carried object, agent pose, step count, verifier)
is deep-copied in one pass, sharing the immutable wall objects, plus the episode state (prompt,
history, counters). Snapshots are portable between copies of the env: the verifier's
back-reference to its level is cut on save and re-attached on restore. The RNG is not part of the
state: MiniGrid steps draw no random numbers. Measured on a loaded 2-core machine: snapshot or
restore ≈ 0.15 ms (1 room), 0.25 ms (4 rooms), 0.8 ms (9 rooms, k = 5); ``copy()`` ≈ 2 ms at 9
rooms; a replay-based snapshot would cost ≈ 0.4 ms per replayed action instead.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from clew.envs.base import Env, EnvFlags, Observation, Step, Task
from clew.envs.textminigrid import prompts
from clew.envs.textminigrid.bot import BotRun, difficulty, run_bot
from clew.envs.textminigrid.fewshot import examples_text
from clew.envs.textminigrid.layout import (
    MAX_STEPS,
    Layout,
    LayoutLevel,
    LayoutParams,
    build_level,
    generate_layout,
)
from clew.envs.textminigrid.parsing import ACTIONS, ParsedReply, parse_reply
from clew.envs.textminigrid.render import (
    REPRESENTATIONS,
    direction_name,
    full_grid_sc,
    inventory_text,
    render,
    view_from,
    visible_world_cells,
)
from minigrid.core.actions import Actions
from minigrid.core.world_object import Box, Wall

ACTION_IDS = {
    "Turn Left": Actions.left, "Turn Right": Actions.right, "Go Forward": Actions.forward,
    "Pick Up": Actions.pickup, "Drop": Actions.drop, "Toggle": Actions.toggle,
}
UNPARSABLE = "None (the reply could not be parsed)"
MEMORY_MODES = ("chat", "text", "none")
BOX_TOGGLE = ("destroy", "noop")
#: bot plan lengths by world state, for progress(): a plan costs ~50 ms and search revisits the
#: same world states along different paths; cleared when it grows past this many entries
PLAN_CACHE_SIZE = 200_000
_plan_lengths: dict[tuple, int | None] = {}


@dataclass
class EpisodeState:
    """Everything of an episode that is not the MiniGrid world."""

    steps: int = 0  # atomic actions used (the clock)
    decisions: int = 0  # decision steps t′ taken
    done: bool = False
    success: bool = False
    reward: float = 0.0
    prompt: str = ""  # the current user prompt (observation text)
    view: str = ""  # the current rendered view
    transitions: list[prompts.Transition] = field(default_factory=list)
    history: list[tuple[str, str]] = field(default_factory=list)  # (user prompt, raw reply)
    memory: list[tuple[str, str, str | None]] = field(default_factory=list)  # text-mode memory
    invalid_streak: int = 0
    boxes_destroyed: int = 0
    target_destroyed: bool = False
    target_first_seen: int | None = None  # atomic step at which the target was first visible
    # with trace=True only (metrics): poses after each atomic action, whether it moved the agent,
    # and every world cell that was ever inside the visibility mask
    poses: list[tuple[int, int, int]] = field(default_factory=list)
    moved: list[bool] = field(default_factory=list)
    seen: set[tuple[int, int]] = field(default_factory=set)

    def copy(self) -> EpisodeState:
        """An independent copy: new containers over the same immutable items (strings, tuples,
        frozen transitions), at a fraction of a deep copy's cost in the search's walks."""
        return replace(self, transitions=list(self.transitions), history=list(self.history),
                       memory=list(self.memory), poses=list(self.poses),
                       moved=list(self.moved), seen=set(self.seen))


@dataclass
class TextMiniGridOracle:
    """Ground truth for metrics and heuristic baselines (agents never read it)."""

    layout: Layout
    full_grid: str  # the whole level now, SC tokens, north up, agent II
    agent: tuple[int, int, int]
    target: tuple[int, int] | None  # None once carried or destroyed
    solution_length: int | None  # L* of the task from its initial state (docs/methods/metric-textminigrid.md#behavioral-difficulty)
    difficulty: str | None
    _level: LayoutLevel = field(repr=False, default=None)  # type: ignore[assignment]
    _plan: BotRun | None = field(repr=False, default=None)

    def bot_run(self, max_steps: int = MAX_STEPS) -> BotRun:
        """The BabyAI bot's play from the oracle's state (a fresh bot on a copy of the level)."""
        if self._plan is None:
            self._plan = run_bot(self._level, max_steps=max_steps)
        return self._plan

    def plan(self, max_steps: int = MAX_STEPS) -> list[str]:
        return list(self.bot_run(max_steps).actions)


class TextMiniGridEnv(Env):
    """BabyAI PickUp levels in text with multi-action decision steps (docs/methods/envs.md#textminigrid)."""

    name = "textminigrid"
    memory_min_score = 0.90    # docs/methods/reflection-memory.md#scores
    flags = EnvFlags(deterministic=True, supports_backtrack=True,
                     outcome_mode="terminal_success", simulation_mode="free")
    #: The family has its own rule for unparsable replies (re-queries, then a step-using no-op),
    #: so the runner's invalid-streak stop does not apply (the 200-step limit ends the episode).
    max_invalid_streak = None

    def __init__(
        self,
        representation: str = "sc",
        max_actions: int = 1,
        memory: int = 5,
        memory_mode: str = "chat",
        max_steps: int = MAX_STEPS,
        requeries: int = 2,
        box_toggle: str = "destroy",
        think: bool = False,
        feedback: bool = False,
        trace: bool = False,
        prompt: str = "default",
    ):
        if representation not in REPRESENTATIONS:
            raise ValueError(f"textminigrid option representation={representation!r}: "
                             f"choose one of {', '.join(REPRESENTATIONS)}")
        for opt, val in (("max_actions", max_actions), ("max_steps", max_steps)):
            if not isinstance(val, int) or val < 1:
                raise ValueError(f"textminigrid option {opt}={val!r}: need a positive integer")
        for opt, val in (("memory", memory), ("requeries", requeries)):
            if not isinstance(val, int) or val < 0:
                raise ValueError(f"textminigrid option {opt}={val!r}: need an integer >= 0")
        if memory_mode not in MEMORY_MODES:
            raise ValueError(f"textminigrid option memory_mode={memory_mode!r}: "
                             f"choose one of {', '.join(MEMORY_MODES)}")
        prompts.PromptVariant.parse(prompt)   # an unknown component is named here
        if box_toggle not in BOX_TOGGLE:
            raise ValueError(f"textminigrid option box_toggle={box_toggle!r}: "
                             f"choose one of {', '.join(BOX_TOGGLE)}")
        self.representation = representation
        self.max_actions = max_actions
        self.memory = memory
        self.memory_mode = memory_mode
        self.max_steps = max_steps
        self.requeries = requeries
        self.box_toggle = box_toggle
        self.think = think
        self.feedback = feedback  # optional blocked-action feedback (docs/methods/envs.md#textminigrid); off for the paper
        self.trace = trace  # record poses and seen cells in the state (for metrics)
        #: the prompt variant that "default" stands for (``obs`` etc.: shorter prompts, for
        #: models with small contexts; docs/methods/parsing.md#context-length)
        self.prompt = prompt
        self.layout: Layout | None = None
        self.level: LayoutLevel | None = None
        self.state: EpisodeState | None = None

    # --- tasks -------------------------------------------------------------------------------
    @staticmethod
    def layout_of(task: Task) -> Layout:
        """The task's layout: stored in params, or drawn from (params, seed) when absent."""
        if task.env != TextMiniGridEnv.name:
            raise ValueError(f"task {task.id!r} is for env {task.env!r}, not textminigrid")
        if "layout" in task.params:
            return Layout.from_dict(task.params["layout"])
        if "rooms" not in task.params:  # like the other families: no silent default level
            raise ValueError(f"textminigrid task {task.id!r}: params need 'layout' (a layout "
                             f"object) or 'rooms' (1, 4 or 9, with 'density' or "
                             f"'objs_per_room'); generate tasks with "
                             f"clew.envs.textminigrid.generator.generate_task")
        p = LayoutParams.from_params(task.params)
        return generate_layout(p.rooms_per_side, p.objs_per_room, task.seed,
                               p.locked_room_prob, p.uniform_placement)

    def reset(self, task: Task) -> Observation:
        self.task = task
        self.layout = self.layout_of(task)
        self.level = build_level(self.layout, max_steps=self.max_steps)  # BabyAI's reward uses it
        self.state = EpisodeState()
        self.state.view = self._look()
        self._refresh_prompt()
        return self.observation()

    # --- stepping ----------------------------------------------------------------------------
    def step(self, action: str) -> Step:
        st = self.state
        if st is None:
            raise RuntimeError("textminigrid: step() before reset()")
        if st.done:
            return Step(self.observation("The episode is over; no action was executed."),
                        0.0, True, False, {"error": "episode over", "executed": []})
        parsed = parse_reply(action or "", self.max_actions)
        info: dict[str, Any] = {"skipped": parsed.skipped, "truncated": parsed.truncated,
                                "intention": parsed.intention}
        user = st.prompt
        if not parsed.ok:
            st.invalid_streak += 1
            if st.invalid_streak <= self.requeries:
                msg = ("Your last reply contained no valid action between <actions> and "
                       "</actions>; no action was executed. Reply again in the required format.")
                info.update(error="unparsable", requery=True, executed=[], blocked=[])
                return Step(self.observation(msg), 0.0, False, False, info)
            names: list[str] = [UNPARSABLE]
        else:
            names = parsed.actions
        st.invalid_streak = 0
        reward, executed, blocked, poses = self._execute(names)
        st.decisions += 1
        st.reward += reward
        self._remember(user, action or "", parsed, executed)
        self._refresh_prompt()
        info.update(executed=executed, blocked=blocked, poses=poses, steps=st.steps,
                    decisions=st.decisions, success=st.success,
                    target_seen=st.target_first_seen is not None,
                    boxes_destroyed=st.boxes_destroyed, target_destroyed=st.target_destroyed)
        if not parsed.ok:
            info["error"] = "unparsable"
        return Step(self.observation(), reward, st.done, parsed.ok, info)

    def _execute(self, names: list[str]) -> tuple[float, list[str], list[bool], list[list[int]]]:
        """Run atomic actions in order until success, the step limit or a destroyed target."""
        st, level = self.state, self.level
        st.transitions = []
        reward, executed, blocked, poses = 0.0, [], [], []
        for name in names:
            before = self._pose_key()
            front = level.grid.get(*level.front_pos)
            action_id = ACTION_IDS.get(name, Actions.done)
            if name == "Toggle" and isinstance(front, Box) and self.box_toggle == "noop":
                action_id = Actions.done  # toggling a box does nothing
            _, r, terminated, _, _ = level.step(action_id)
            st.steps += 1
            if name == "Toggle" and isinstance(front, Box) and level.grid.get(*level.front_pos) is None:
                st.boxes_destroyed += 1  # MiniGrid replaces a toggled box by its (empty) contents
                if any(front is obj for obj in self._targets()):
                    st.target_destroyed = True
            executed.append(name)
            blocked.append(self._pose_key() == before)
            poses.append([int(level.agent_pos[0]), int(level.agent_pos[1]), int(level.agent_dir)])
            if self.trace:
                st.moved.append(tuple(poses[-1][:2]) != before[0])
            view = st.view = self._look()
            note = name if not (self.feedback and blocked[-1]) else f"{name} (nothing happened)"
            st.transitions.append(prompts.Transition(note, view, direction_name(level.agent_dir),
                                                     inventory_text(level.carrying)))
            if terminated and r > 0:
                st.success, reward = True, reward + float(r)
            if st.success or st.target_destroyed or st.steps >= self.max_steps:
                st.done = True
                break
        return reward, executed, blocked, poses

    def _pose_key(self) -> tuple:
        """What a no-op leaves unchanged: pose, carried object, front cell and its door state."""
        level = self.level
        front = level.grid.get(*level.front_pos)
        door = (front.is_open, front.is_locked) if front is not None and front.type == "door" else None
        return (tuple(int(v) for v in level.agent_pos), level.agent_dir, id(level.carrying),
                id(front), door)

    def _targets(self) -> list:
        instr = self.level.instrs
        desc = getattr(instr, "desc", None) or getattr(instr, "desc_move", None)
        return list(desc.obj_set) if desc is not None else []

    def _look(self) -> str:
        """Render the current view; note first sight of the target and, if tracing, the pose
        and the cells seen (one ``gen_obs_grid`` per atomic step)."""
        st, level = self.state, self.level
        grid, vis = level.gen_obs_grid()
        if st.target_first_seen is None:
            for obj in self._targets():
                pos = obj.cur_pos
                if obj is level.carrying or pos is None or level.grid.get(*pos) is not obj:
                    continue
                rel = level.relative_coords(int(pos[0]), int(pos[1]))
                if rel is not None and vis[rel[0], rel[1]]:
                    st.target_first_seen = st.steps
                    break
        if self.trace:
            st.poses.append((int(level.agent_pos[0]), int(level.agent_pos[1]), int(level.agent_dir)))
            st.seen |= visible_world_cells(level, vis)
        return render(view_from(grid, vis), level.agent_dir, self.representation)

    def _remember(self, user: str, raw: str, parsed: ParsedReply, executed: list[str]) -> None:
        st = self.state
        if self.memory <= 0:
            return
        st.history = (st.history + [(user, raw)])[-self.memory:]
        actions = ",".join(executed) if parsed.ok else UNPARSABLE
        st.memory = (st.memory + [(st.view, actions, parsed.intention)])[-self.memory:]

    # --- observations ------------------------------------------------------------------------
    def _refresh_prompt(self) -> None:
        st, level = self.state, self.level
        memory = (prompts.memory_block(st.memory)
                  if self.memory_mode == "text" and st.memory else None)
        st.prompt = prompts.user_prompt(
            level.mission, st.transitions, st.view, direction_name(level.agent_dir),
            inventory_text(level.carrying), self.max_actions, think=self.think, memory=memory)

    def memory_view(self, observation: str) -> str:
        """The mission and the current view, direction and inventory of an observation, without
        the results of earlier actions and the answer instructions (Env.memory_view)."""
        mission = re.search(r"^Your final mission is .*$", observation, re.MULTILINE)
        current = re.search(r"Your current observation:\n(.*?)(?:\nBased on the observation|\Z)",
                            observation, re.DOTALL)
        if not (mission and current):
            return observation
        return f"{mission.group(0)}\n{current.group(1).strip()}"

    def state_key(self) -> tuple:
        """Pose and carried object (Env.state_key; no clock). Objects are named by type and
        colour, since copies of the world hold different Python objects."""
        level = self.level
        held = level.carrying
        return (tuple(int(v) for v in level.agent_pos), int(level.agent_dir),
                (held.type, held.color) if held is not None else None)

    def observation(self, note: str | None = None) -> Observation:
        st, level = self.state, self.level
        text = st.prompt if note is None else f"{note}\n\n{st.prompt}"
        chat = []
        if self.memory_mode == "chat":
            for user, raw in st.history:
                chat += [{"role": "user", "content": user}, {"role": "assistant", "content": raw}]
        info = {
            "mission": level.mission,
            "view": st.view,
            "direction": direction_name(level.agent_dir),
            "inventory": inventory_text(level.carrying),
            "agent": [int(level.agent_pos[0]), int(level.agent_pos[1]), int(level.agent_dir)],
            "steps": st.steps,
            "decisions": st.decisions,
            "max_actions": self.max_actions,
            "transitions": [t.__dict__ for t in st.transitions],
            "chat_history": chat,
            "target_seen": st.target_first_seen is not None,
        }
        if note is not None:
            info["error"] = note
        return Observation(text, info)

    # --- snapshots ---------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        return {"world": self._save_world(), "episode": self.state.copy()}

    def restore(self, snap: dict[str, Any], keep_clock: bool = False) -> None:
        clock = self.clock()
        self._load_world(snap["world"])
        self.state = snap["episode"].copy()
        if keep_clock:
            self.set_clock(clock)

    def set_clock(self, steps: int) -> None:
        self.state.steps = steps
        self.level.step_count = steps
        if steps >= self.max_steps and not self.state.success:
            self.state.done = True

    def _wall_memo(self) -> dict[int, Any]:
        """Deep-copy memo sharing the immutable walls and cutting the verifier's level link."""
        memo: dict[int, Any] = {id(self.level): None}
        for obj in self.level.grid.grid:
            if type(obj) is Wall:
                memo[id(obj)] = obj
        return memo

    def _save_world(self) -> dict[str, Any]:
        lv = self.level
        payload = {"grid": lv.grid, "carrying": lv.carrying, "instrs": lv.instrs,
                   "agent_pos": tuple(int(v) for v in lv.agent_pos),
                   "agent_dir": int(lv.agent_dir), "step_count": int(lv.step_count)}
        return copy.deepcopy(payload, self._wall_memo())

    def _load_world(self, world: dict[str, Any]) -> None:
        memo = {id(obj): obj for obj in world["grid"].grid if type(obj) is Wall}
        self._set_world(copy.deepcopy(world, memo))

    def _set_world(self, w: dict[str, Any]) -> None:
        """Install a private copy of a saved world in this env's level."""
        lv = self.level
        lv.grid, lv.carrying, lv.instrs = w["grid"], w["carrying"], w["instrs"]
        lv.instrs.env = lv
        lv.agent_pos, lv.agent_dir, lv.step_count = w["agent_pos"], w["agent_dir"], w["step_count"]

    def copy(self) -> TextMiniGridEnv:
        other = copy.copy(self)
        if self.level is not None:
            # A shallow copy shares only what steps never change (rooms, RNG, spaces); the
            # mutable world and the episode state are replaced by private copies.
            other.level = copy.copy(self.level)
            other._set_world(self._save_world())   # one deep copy, not a snapshot's two
            other.state = self.state.copy()
        return other

    # --- text for agents ---------------------------------------------------------------------
    def instructions(self, variant: str = "default") -> str:
        """System prompt (docs/methods/envs.md#textminigrid) for this env's representation; ``variant`` as in :mod:`.prompts`
        (``default``: the env's ``prompt`` option)."""
        if variant == "default":
            variant = self.prompt
        examples = None
        if prompts.PromptVariant.parse(variant).fewshot:
            examples = examples_text(type(self), self.representation, self.max_actions)
        return prompts.system_prompt(self.representation, variant, examples)

    def action_help(self) -> str:
        return f"Actions: {', '.join(ACTIONS)}. Up to {self.max_actions} per turn."

    def answer_format(self) -> str:
        return prompts.answer_notation(self.max_actions)

    def neutral_observation(self, text: str) -> str:
        """The user prompt without its instruction block (Env.neutral_observation)."""
        return prompts.without_instructions(text, self.max_actions)

    def parse_action(self, text: str) -> str | None:
        parsed = parse_reply(text, self.max_actions)
        return parsed.canonical if parsed.ok else None

    def canonical(self, action: str) -> str:
        parsed = parse_reply(action, self.max_actions)
        return parsed.canonical if parsed.ok else action.strip().lower()

    # --- facts -------------------------------------------------------------------------------
    def legal_actions(self) -> list[str]:
        """The six atomic actions (each a valid decision; sequences join them with ',')."""
        return [] if self.state is None or self.state.done else list(ACTIONS)

    def grade(self) -> float:
        return 1.0 if self.state and self.state.success else 0.0

    def oracle(self) -> TextMiniGridOracle:
        """Full grid, target, L* of the task, and the bot's plan from the current state."""
        level = self.level
        params = self.task.params if self.task else {}
        if "oracle_length" in params:  # stored by the generator (None: the bot failed)
            length = params["oracle_length"]
        else:
            length = run_bot(build_level(self.layout)).length
        targets = [o for o in self._targets()
                   if o is not level.carrying and o.cur_pos is not None
                   and level.grid.get(*o.cur_pos) is o]
        target = tuple(int(v) for v in targets[0].cur_pos) if targets else None
        ax, ay = (int(v) for v in level.agent_pos)
        return TextMiniGridOracle(
            layout=self.layout, full_grid=full_grid_sc(level), agent=(ax, ay, int(level.agent_dir)),
            target=target, solution_length=length, difficulty=difficulty(length),
            _level=copy.deepcopy(level))

    def progress(self) -> float:
        """Ground-truth progress (Env.progress): 1 − (length of the BabyAI bot's plan from
        here) / L* (its plan length from the start); 1 on success, 0 when the bot fails."""
        if self.done and self.grade() >= 1.0:
            return 1.0
        oracle = self.oracle()
        plan, total = self._plan_length(oracle), oracle.solution_length
        if not total or plan is None:
            return 0.0
        return max(0.0, min(1.0, 1.0 - plan / total))

    def steps_to_goal(self) -> float:
        """Env.steps_to_goal: the bot's plan from here in turns of up to ``max_actions``
        actions, when its actions fit in the env's step limit that is left, else inf."""
        if self.done:
            return 0.0 if self.grade() >= 1.0 else math.inf
        plan = self._plan_length(self.oracle())
        if plan is None or plan > self.max_steps - self.state.steps:
            return math.inf
        return float(math.ceil(plan / self.max_actions))

    def _plan_length(self, oracle: TextMiniGridOracle) -> int | None:
        """The bot's plan length from the oracle's state (cached; None: the bot fails)."""
        key = (self.task.id if self.task else "", oracle.full_grid, oracle.agent, oracle.target)
        if key not in _plan_lengths:
            if len(_plan_lengths) > PLAN_CACHE_SIZE:
                _plan_lengths.clear()
            _plan_lengths[key] = oracle.bot_run().length
        return _plan_lengths[key]
