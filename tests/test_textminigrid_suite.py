"""TextMiniGrid suites (docs/methods/metric-textminigrid.md#behavioral-difficulty) and the BabyAI-bot agent through the runner."""

import asyncio
import json
import math
from collections import Counter

import pytest
from clew.agents.heuristics.babyai_bot_agent import BabyAIBotAgent
from clew.envs.base import Task
from clew.envs.registry import generate
from clew.envs.suites import get_suite, resolve
from clew.envs.textminigrid.bot import difficulty
from clew.envs.textminigrid.layout import Layout
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent


@pytest.fixture(scope="module")
def paper():
    return resolve("textminigrid-45:test")


def test_the_45_task_suite(paper):
    assert len(paper) == 45 and len({t.id for t in paper}) == 45
    configs = Counter((t.params["rooms"], t.params["objs_per_room"]) for t in paper)
    assert configs == Counter({(r, k): 5 for r in (1, 4, 9) for k in (1, 3, 5)})
    for t in paper:
        # seeds 1..5 unless replaced by the next ones (docs/methods/metric-textminigrid.md#behavioral-difficulty rule); every task is bot-solvable
        assert 1 <= t.seed <= 5 + len(t.params["rejected_seeds"])
        assert t.params["oracle_length"] <= 200
        assert t.params["difficulty"] == difficulty(t.params["oracle_length"])
        assert Task.from_dict(json.loads(t.to_json())) == t
    levels = Counter(t.params["difficulty"] for t in paper)
    assert set(levels) <= {"easy", "medium", "hard", "super-hard"} and sum(levels.values()) == 45


def test_suite_tasks_are_the_generator_output(paper):
    t = paper[17]
    again = generate("textminigrid", {"rooms": t.params["rooms"], "density": t.params["density"]},
                     t.seed)
    assert again.params["layout"] == t.params["layout"] and again.id == t.id


def test_easy_tasks_have_the_target_in_the_start_room(paper):
    """Calibration check of docs/methods/metric-textminigrid.md#behavioral-difficulty: every easy task has its target in the start room."""
    for t in paper:
        if t.params["difficulty"] != "easy":
            continue
        lay = Layout.from_dict(t.params["layout"])
        target = next(o for o in lay.objects
                      if (o.type, o.color) == (lay.mission.type, lay.mission.color))
        assert (target.x // 5, target.y // 5) == (lay.agent[0] // 5, lay.agent[1] // 5)


def test_v1_splits_are_disjoint():
    suite = get_suite("textminigrid-v1")
    train, test = suite.split("train"), suite.split("test")
    assert len(test) == 45 and len(train) == 90
    assert {t.seed for t in train}.isdisjoint({t.seed for t in test})
    assert all(t.split == "train" for t in train) and all(t.split == "test" for t in test)


@pytest.mark.parametrize("m", [1, 5, 10])
def test_bot_agent_solves_tasks_in_l_star_steps(paper, m):
    agent = build_agent("babyai-bot")
    assert isinstance(agent, BabyAIBotAgent) and agent.uses_oracle
    tasks = paper if m == 10 else paper[::4]
    for task in tasks:
        rec = asyncio.run(run_episode(agent, task, env_options={"max_actions": m}))
        met = rec["metrics"]
        assert rec["outcome"]["success"], task.id
        assert met["steps"] == task.params["oracle_length"]
        assert met["decisions"] == math.ceil(met["steps"] / m) == rec["outcome"]["steps"]
