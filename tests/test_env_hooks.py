"""The optional env hooks (clew.envs.base): declared once with defaults, overridden by the
families that have them, read directly by heuristics, interventions and metrics."""

from __future__ import annotations

import asyncio
import math
from collections import deque

import pytest
from clew.agents.base import Episode
from clew.agents.heuristics.search_roles import progress
from clew.agents.interventions import ParallelThreads, SummaryHandoff
from clew.envs.base import Env, Observation, Step, Task
from clew.envs.gridmap.instance import ACHIEVED
from clew.envs.oracle_search import hill, treesearch
from clew.envs.registry import ENVS, generate, make, make_for
from clew.envs.suites import resolve
from toyenv import LineEnv, line_task


class Bare(Env):
    """Only the abstract methods: every optional hook keeps its default."""

    name = "bare"

    def reset(self, task: Task) -> Observation:
        self.task, self.state = task, None
        return Observation("start")

    def step(self, action: str) -> Step:
        return Step(Observation("same"), valid=False)

    def observation(self) -> Observation:
        return Observation("same")

    def instructions(self, variant: str = "default") -> str:
        return ""

    def grade(self) -> float:
        return 0.25


def test_every_hook_has_its_default():
    env = Bare()
    env.reset(Task("bare", {}))
    assert env.family == "bare" and env.max_actions == 1
    assert env.history_window is None and env.parse_retries == 0
    assert env.prompt_examples() == [] and env.answered("anything") is False
    assert env.budget() is None and env.state_key() is None
    assert env.progress() == 0.25 == progress(env)  # default: the grade


def test_family_defaults_to_the_class_name_and_families_declare_their_own():
    class Variant(LineEnv):
        name = "toy-line-variant"

    assert LineEnv.family == "toy-line" and Variant.family == "toy-line-variant"
    builtin = {name: make(name).family for name in ENVS if not name.startswith("toy-")}
    assert builtin == {"rooms": "rooms", "gridmap": "gridmap", "gridmap-pits": "gridmap-pits",
                       "textminigrid": "textminigrid",
                       "hillsearch": "hill", "treesearch": "tree", "maxsatsearch": "maxsat",
                       "browsergym": "browsergym"}


def test_budget_and_answered_of_the_query_envs():
    h = make("hillsearch")
    h.reset(hill.generate_task({"instance": "H-B2", "budget": 7}, 0))
    assert h.budget() == 7 and h.remaining == 7
    h.step("x=1.0")
    assert h.budget() == 7 and h.remaining == 6 and not h.answered("x=1.0")  # repeats cost
    t = make("treesearch")
    t.reset(treesearch.generate_task({"instance": "T-main", "budget": 5}, 0))
    node = t.frontier()[0]
    assert not t.answered(f"node={node}")
    assert t.step(f"node={node}").valid and t.answered(f"node={node}")
    g = make_for(task := resolve("gridmap-mini:test")[0])
    g.reset(task)
    assert g.budget() is None  # its step budget is hidden from the agent: not a query budget


def test_interventions_need_a_budget_and_name_the_hook():
    env = LineEnv()
    task = line_task(0)
    env.reset(task)
    episode = Episode(task, env, env.observation())
    for wrapper in (ParallelThreads(object(), 2), SummaryHandoff(object(), 2)):
        with pytest.raises(TypeError, match=r"Env\.budget"):
            asyncio.run(wrapper.act(episode))


def true_moves_to_goal(env) -> float:
    """Breadth-first search over the env's own steps (unlimited clock): the exact fewest
    moves to success from the current state."""
    env.state.steps = -10**6
    start = env.copy()
    seen = {start.state_key()}
    queue = deque([(start, 0)])
    while queue:
        cur, d = queue.popleft()
        if cur.state.success:
            return d
        for a in cur.legal_actions():
            nxt = cur.copy()
            nxt.step(a)
            if nxt.state_key() not in seen:
                seen.add(nxt.state_key())
                queue.append((nxt, d + 1))
    return math.inf


@pytest.mark.parametrize("i", range(3))
def test_gridmap_progress_is_one_minus_moves_left_over_moves_at_start(i):
    """D (Instance.moves_to_goal) is an upper bound of the true distance, finite exactly when
    the goal is reachable; progress = 1 − D/D0, 1 at success."""
    task = resolve("gridmap-mini:test")[i]
    env = make_for(task)
    env.reset(task)
    inst = env.instance
    d0 = inst.moves_to_goal(inst.start, frozenset())
    assert env.progress() == 0.0 and true_moves_to_goal(env.copy()) <= d0 < math.inf
    for action in env.legal_actions()[:1] * 3:
        if env.done or action not in env.legal_actions():
            break
        env.step(action)
        achieved = frozenset(n for n, s in env.state.status.items() if s == ACHIEVED)
        d = inst.moves_to_goal(env.state.pos, achieved)
        assert true_moves_to_goal(env.copy()) <= d
        assert env.progress() == pytest.approx(max(0.0, 1 - d / d0))
    assert inst.moves_to_goal(inst.start, frozenset({inst.goal})) == 0.0


def test_textminigrid_progress_follows_the_bot_plan_and_is_cached_by_world_state():
    task = generate("textminigrid", {"rooms": 1}, 3)
    env = make_for(task)
    env.reset(task)
    oracle = env.oracle()
    assert env.progress() == pytest.approx(1 - oracle.bot_run().length / oracle.solution_length)
    plan = oracle.plan()
    first = env.copy()
    first.step(f"<actions>{plan[0]}</actions>")
    again = env.copy()
    again.step(f"<actions>{plan[0]}</actions>")
    assert first.progress() == again.progress() > env.progress()
    for action in plan:
        if env.done:
            break
        env.step(f"<actions>{action}</actions>")
    assert env.grade() == 1.0 and env.progress() == 1.0
