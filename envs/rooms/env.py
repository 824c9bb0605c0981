"""Dark Treasure Rooms, text version (docs/methods/envs.md#dark-treasure-rooms).

The agent moves through a grid of dark rooms by naming objects it sees: a door takes it to the
room behind (one of C door interactions per episode), a ball is picked up for its reward (at
most K = 3 per episode). Rewards show only on pickup; names are colours, so only systematic
search finds the treasure.

**Multi-episode runs.** [decision] One clew episode (one ``reset`` .. ``done``) is a whole
*run* of E rooms-episodes (``n_episodes``, default 20, docs/methods/metric-optimal-exploitation-gap.md#decisions #6). When a rooms-episode ends the
world is reset (start room, all balls back, budgets refilled) but the run goes on: the
observation says the episode is over and shows the start room of the next one, and the agent
keeps everything it has seen. ``done`` is true only after the E-th rooms-episode. The env keeps
the whole history (``state.moves``) so :meth:`RoomsEnv.prompt` can rebuild the paper's prompt
(docs/methods/envs.md#dark-treasure-rooms) at every step and metrics can recompute everything from the actions alone.

Episode rules (docs/methods/envs.md#dark-treasure-rooms, docs/methods/metric-optimal-exploitation-gap.md#decisions #5, #17):

* up to C door traversals; after the C-th, balls in the room reached can still be picked up;
  choosing a door with C traversals used ends the episode without moving;
* [shortcut, identical metrics] the episode also ends as soon as C doors are used and the
  current room has no ball left (``end_when_stuck``, default on);
* the episode ends after the K-th pickup;
* invalid replies (no object / not visible) change nothing, are not history and use no
  budget, but count toward the per-episode call cap C + K + ``call_cap_extra`` (default 10);
  reaching the cap ends the episode (``episode_end = "call_cap"`` in the step info).

Observation text [decision]: a valid step shows ``Reward: r`` and ``You see: ...`` (the
agent's own action is its message, so it is not echoed); episode boundaries are announced in
the same text. Objects are listed in a canonical order per room: doors by wall N, E, S, W,
then balls by name (docs/methods/envs.md#dark-treasure-rooms); ``order="entry_first"`` puts the door just used first. Metrics use
sets, never this order.

Task params: ``layout`` (a layout dict, see :mod:`.layouts`) or ``layout_id`` (a frozen
layout), ``n_episodes``, ``instruction`` (``task`` | ``exploit`` | ``explore``; the variant
``instructions()`` and ``prompt()`` use by default), ``call_cap_extra``, ``end_when_stuck``.
Constructor options only change presentation and parsing: ``order``, ``lenient``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from clew.envs.base import Env, EnvFlags, Observation, Step, Task
from clew.envs.rooms import prompts
from clew.envs.rooms.layouts import Ball, Door, Layout, frozen_layout
from clew.envs.rooms.parsing import parse_reply
from clew.envs.rooms.solver import layout_best_route

END_TEXT = {
    "pickups": "you picked up {K} objects",
    "doors": "you used all {C} door interactions",
    "stuck": "you used all {C} door interactions and nothing is left to pick up here",
    "call_cap": "the limit of {cap} replies per episode was reached",
}


@dataclass(frozen=True)
class Move:
    """One valid step of a run: the history unit that prompts and metrics read."""

    episode: int  # 0-based rooms-episode index
    room: int
    seen: tuple[str, ...]  # visible objects before the action, in display order
    action: str  # the object, e.g. "teal door"
    kind: str  # "door" | "ball"
    reward: int
    next_room: int
    moved: bool  # a door traversal happened (False: door chosen with the budget used up)
    after: tuple[str, ...]  # visible objects after the action, in display order


def observation_sets(start: Iterable[str], moves: Iterable[Move]) -> set[frozenset[str]]:
    """The observation sets (the wrapper's states) a run visited: the start room's and those
    before and after every move; coverage counts them
    (docs/methods/metric-optimal-exploitation-gap.md#rooms-exploration-statistics)."""
    out = {frozenset(start)}
    for m in moves:
        out.update((frozenset(m.seen), frozenset(m.after)))
    return out


@dataclass
class RoomsState:
    room: int
    episode: int = 0
    doors_used: int = 0
    collected: tuple[str, ...] = ()
    entered_by: str | None = None
    calls: int = 0  # step calls in this rooms-episode (invalid ones included): the call cap
    steps: int = 0  # step calls in the run: the clock
    invalid: int = 0
    done: bool = False
    moves: list[Move] = field(default_factory=list)
    returns: list[int] = field(default_factory=lambda: [0])  # per rooms-episode, current last
    ends: list[str] = field(default_factory=list)  # end reason per finished rooms-episode
    text: str = ""  # the last observation text

    def copy(self) -> RoomsState:
        # Moves are immutable, so copying the lists is a full copy.
        return replace(self, moves=list(self.moves), returns=list(self.returns),
                       ends=list(self.ends))


@dataclass(frozen=True)
class RoomsConfig:
    """The task's rules, parsed and checked once per task."""

    layout: Layout
    n_episodes: int = 20
    instruction: str = "task"
    call_cap: int = 23
    end_when_stuck: bool = True


def parse_task(task: Task) -> RoomsConfig:
    p = task.params
    where = f"rooms task {task.id or '?'}"
    unknown = set(p) - {"layout", "layout_id", "n_episodes", "instruction", "call_cap_extra",
                        "end_when_stuck"}
    if unknown:
        raise ValueError(f"{where}: unknown param(s) {', '.join(sorted(unknown))}")
    if "layout" in p:
        layout = Layout.from_dict(p["layout"], where=f"{where}: params.layout")
    elif "layout_id" in p:
        layout = frozen_layout(str(p["layout_id"]))
    else:
        raise ValueError(f"{where}: params need 'layout' (a layout object) or 'layout_id'")
    n_episodes = p.get("n_episodes", 20)
    extra = p.get("call_cap_extra", 10)
    for key, value in (("n_episodes", n_episodes), ("call_cap_extra", extra)):
        if not isinstance(value, int) or isinstance(value, bool) or value < (key == "n_episodes"):
            raise ValueError(f"{where}: params.{key} must be a non-negative integer "
                             f"(n_episodes >= 1), got {value!r}")
    instruction = prompts.variant_name(str(p.get("instruction", "task")))
    return RoomsConfig(layout, n_episodes, instruction,
                       layout.door_budget + layout.max_pickups + extra,
                       bool(p.get("end_when_stuck", True)))


class RoomsEnv(Env):
    name = "rooms"
    memory_min_score = 0.83    # docs/methods/reflection-memory.md#scores
    flags = EnvFlags(deterministic=True, supports_backtrack=True,
                     outcome_mode="graded_at_end", simulation_mode="free",
                     repeat_rule_applies=False)
    # Invalid replies are re-asked up to the per-episode cap (docs/methods/metric-optimal-exploitation-gap.md#decisions #17), not cut short.
    max_invalid_streak = None

    def __init__(self, order: str = "canonical", lenient: bool = False):
        if order not in ("canonical", "entry_first"):
            raise ValueError(f"rooms: order must be 'canonical' or 'entry_first', got {order!r}")
        self.order = order
        self.lenient = lenient
        self.config: RoomsConfig | None = None
        self.state: RoomsState | None = None

    # --- setup ---------------------------------------------------------------------------
    def reset(self, task: Task) -> Observation:
        if self.task is not task or self.config is None:
            self.config = parse_task(task)
            self.task = task
        self.state = RoomsState(room=self.layout.start)
        self.state.text = f"Episode 1:\n{prompts.see(self.visible())}"
        return self.observation()

    @property
    def layout(self) -> Layout:
        if self.config is None:
            raise RuntimeError("rooms: call reset(task) first")
        return self.config.layout

    # --- what is visible -----------------------------------------------------------------
    def visible(self, state: RoomsState | None = None) -> list[str]:
        """Objects in the current room in display order (doors N/E/S/W, then balls)."""
        s = state or self.state
        doors = [d.text for d, _ in self.layout.doors_of[s.room]]
        if self.order == "entry_first" and s.entered_by in doors:
            doors.remove(s.entered_by)
            doors.insert(0, s.entered_by)
        balls = [b.text for b in self.layout.balls_of[s.room] if b.name not in s.collected]
        return doors + balls

    def legal_actions(self) -> list[str]:
        return [] if self.state is None or self.state.done else self.visible()

    def state_key(self) -> tuple:
        """Rooms-episode, room and balls collected (Env.state_key; no clock)."""
        s = self.state
        return s.episode, s.room, tuple(s.collected)

    def observation(self) -> Observation:
        s = self.state
        return Observation(s.text, {
            "episode": s.episode, "room": s.room, "visible": self.visible(),
            "doors_left": self.layout.door_budget - s.doors_used,
            "pickups_left": self.layout.max_pickups - len(s.collected),
            "episode_return": s.returns[-1] if not s.done else None, "done": s.done,
        })

    # --- dynamics ------------------------------------------------------------------------
    def step(self, action: str) -> Step:
        s, layout = self.state, self.layout
        if s is None:
            raise RuntimeError("rooms: call reset(task) first")
        if s.done:
            return Step(Observation(f"The run is over (all {self.config.n_episodes} episodes "
                                    "were played).", {"done": True}),
                        0.0, True, False, {"error": "run over"})
        s.steps += 1
        s.calls += 1
        action = action if isinstance(action, str) else repr(action)
        visible = self.visible()
        obj = parse_reply(action, visible, self.lenient)
        info: dict[str, Any] = {"episode": s.episode, "room": s.room}
        if obj is None:
            s.invalid += 1
            shown = action if len(action) <= 80 else action[:77] + "..."
            text = (f"Invalid action {shown!r}: reply with one object you see, enclosed with "
                    f"< and >.\n{prompts.see(visible)}")
            end = "call_cap" if s.calls >= self.config.call_cap else None
            if end is not None:
                text += self._end_episode(end)
            s.text = text
            info.update(error="not a visible object", episode_end=end)
            return Step(self.observation(), 0.0, s.done, False, info)
        thing = layout.objects[obj]
        reward, moved, room = 0, False, s.room
        if isinstance(thing, Door):
            if s.doors_used < layout.door_budget:
                a, b = thing.rooms
                s.room = b if s.room == a else a
                s.doors_used += 1
                s.entered_by = obj
                moved = True
            kind = "door"
        else:
            assert isinstance(thing, Ball)
            reward = thing.reward
            s.collected += (thing.name,)
            s.returns[-1] += reward
            kind = "ball"
        after = tuple(self.visible())
        s.moves.append(Move(s.episode, room, tuple(visible), obj, kind, reward, s.room, moved,
                            after))
        text = f"Reward: {reward}\n{prompts.see(after)}"
        info.update(object=obj, kind=kind, reward=reward, next_room=s.room, moved=moved)
        end = self._end_reason(kind, moved)
        info["episode_end"] = end
        if end is not None:
            info["episode_return"] = s.returns[-1]
            text += self._end_episode(end)
        s.text = text
        return Step(self.observation(), float(reward), s.done, True, info)

    def _end_reason(self, kind: str, moved: bool) -> str | None:
        s, layout = self.state, self.layout
        if len(s.collected) >= layout.max_pickups:
            return "pickups"
        if kind == "door" and not moved:
            return "doors"
        if (self.config.end_when_stuck and s.doors_used >= layout.door_budget
                and not any(b.name not in s.collected for b in layout.balls_of[s.room])):
            return "stuck"
        if s.calls >= self.config.call_cap:
            return "call_cap"
        return None

    def _end_episode(self, reason: str) -> str:
        """Close the current rooms-episode, start the next; returns the text to append."""
        s, layout, E = self.state, self.layout, self.config.n_episodes
        why = END_TEXT[reason].format(K=layout.max_pickups, C=layout.door_budget,
                                     cap=self.config.call_cap)
        text = f"\nEpisode {s.episode + 1} is over ({why}). Reward in this episode: " \
               f"{s.returns[-1]}."
        s.ends.append(reason)
        s.episode += 1
        if s.episode >= E:
            s.done = True
            return text + f"\nAll {E} episodes are over."
        s.room, s.doors_used, s.collected, s.entered_by, s.calls = layout.start, 0, (), None, 0
        s.returns.append(0)
        return text + f"\n\nEpisode {s.episode + 1}:\n{prompts.see(self.visible())}"

    # --- snapshots (moves are immutable, so a shallow list copy is exact and cheap) -------
    def snapshot(self) -> RoomsState:
        return self.state.copy()

    def restore(self, snap: RoomsState, keep_clock: bool = False) -> None:
        clock = self.clock()
        self.state = snap.copy()
        if keep_clock:
            self.set_clock(clock)

    def copy(self) -> RoomsEnv:
        other = RoomsEnv(self.order, self.lenient)
        other.task, other.config = self.task, self.config
        other.state = None if self.state is None else self.state.copy()
        return other

    # --- text for agents -----------------------------------------------------------------
    def instructions(self, variant: str = "default") -> str:
        """Instruction block (docs/methods/envs.md#dark-treasure-rooms) + reply format; ``default`` = the task's variant."""
        return self.task_description(variant) + "\n" + prompts.REPLY_RULE

    def task_description(self, variant: str = "default") -> str:
        """The instruction block (docs/methods/envs.md#dark-treasure-rooms) without the reply format (Env.task_description)."""
        cfg = self.config
        if variant == "default":
            variant = cfg.instruction if cfg else "task"
        return prompts.instructions(
            variant,
            cfg.layout.door_budget if cfg else "C",
            cfg.n_episodes if cfg else 20,
            cfg.layout.max_pickups if cfg else 3,
        )

    def answer_format(self) -> str:
        return prompts.ANSWER_NOTATION

    def action_help(self) -> str:
        """The grammar only: what is visible changes every step and is in each observation."""
        return prompts.ACTION_HELP

    def parse_action(self, text: str) -> str | None:
        if self.state is None:
            return None
        return parse_reply(text, self.visible(), self.lenient)

    def canonical(self, action: str) -> str:
        parsed = self.parse_action(action) if self.state is not None else None
        return parsed or action.strip().lower()

    def prompt(self, variant: str = "default") -> str:
        """The paper's full single-message prompt for the current step (docs/methods/envs.md#dark-treasure-rooms)."""
        s, cfg = self.state, self.config
        variant = cfg.instruction if variant == "default" else variant
        episodes = self.episode_transcripts()
        if s.done:
            past, current = episodes, None
        else:
            past, current = episodes[:-1], episodes[-1]
        return prompts.render_prompt(past, current, variant, cfg.layout.door_budget,
                                     cfg.n_episodes, cfg.layout.max_pickups)

    def episode_transcripts(self) -> list[list[str]]:
        """Transcript lines of every rooms-episode so far (the current one last, if any)."""
        s = self.state
        n = s.episode + (0 if s.done else 1)
        per: list[list[Move]] = [[] for _ in range(n)]
        for m in s.moves:
            per[m.episode].append(m)
        start = self.start_visible()
        return [prompts.episode_lines(start, [(m.seen, m.action, m.reward, m.after) for m in ms])
                for ms in per]

    def start_visible(self) -> list[str]:
        """What every rooms-episode starts with (the start room, all balls present)."""
        return self.visible(RoomsState(room=self.layout.start))

    # --- facts ---------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.state is not None and self.state.done

    def episode_returns(self) -> list[int]:
        """Returns of the finished rooms-episodes."""
        s = self.state
        return list(s.returns[: len(s.ends)])

    def observed_return(self) -> float:
        return float(sum(self.state.returns))

    def grade(self) -> float:
        """Mean return of the finished rooms-episodes over R^max (reporting only)."""
        finished, rmax = self.episode_returns(), self.oracle().rmax
        if not finished or rmax <= 0:
            return 0.0
        return sum(finished) / len(finished) / rmax

    def oracle(self) -> RoomsOracle:
        return RoomsOracle(self.layout, layout_best_route(self.layout).value,
                           self.config.n_episodes)


@dataclass(frozen=True)
class RoomsOracle:
    """Ground truth for metrics: the full layout (rooms, doors, balls, rewards) and R^max."""

    layout: Layout
    rmax: int
    n_episodes: int
