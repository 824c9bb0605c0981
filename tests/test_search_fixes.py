"""Issue 16 (items 1-7, 9, 11-13) and the wiring of issue 11 item 7: each test names its item and
fails on the code before the fix."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from clew.agents.lm.fake import FakeLM
from clew.agents.memory import ReflectionMemory
from clew.agents.options import PolicyOptions, ReflectionOptions, ValueOptions
from clew.agents.policy import LMPolicy
from clew.agents.prompts import policy_messages
from clew.agents.reflection import Reflector, StepStat, TaskRecord, policy_error_scores
from clew.agents.usage import UsageByRole
from clew.agents.value import SingleValue
from clew.envs.base import Task
from clew.envs.registry import make_for
from clew.envs.registry import register as register_env
from clew.records import RunDir
from clew.runner.episodes import run_episode, run_suite
from clew.runner.registry import build_agent
from clew.search.agent import SearchAgent
from clew.search.mcts import MCTSConfig, select
from clew.search.options import EpisodeOptions
from clew.search.registry import make_algorithm
from clew.search.tree import Tree
from test_search_agents import TASK, frontier_agent, play
from toyenv import LineEnv, line_task, register

register()
ROOT = Path(__file__).resolve().parents[1]


class OwnAxes:
    """Each distinct text gets an axis of its own: only an identical key scores 1."""

    model_id = "own-axes"
    dim = 64

    def __init__(self):
        self.axes: dict[str, int] = {}

    def encode(self, texts):
        rows = [self.axes.setdefault(t, len(self.axes) % self.dim) for t in texts]
        return np.stack([np.eye(self.dim, dtype=np.float32)[i] for i in rows])


# --- item 1: a final STOP has no observation after it ------------------------------------------
def stop_responder(req, i):
    if req.role == "policy":
        return "Done.\nNext action:\n```\nstop\n```"
    if req.role == "rubric":
        return "<rubric>- the goal path is found</rubric>"
    if req.role == "value":
        return "Thoughts: it stopped early\nSTATUS CODE: E"
    return "stopping at the root was premature"


def test_item1_a_final_stop_is_reflected_on_as_a_final_action_and_its_key_matches(tmp_path):
    mem = ReflectionMemory(tmp_path / "m", embedder=OwnAxes(), min_score=0.99)
    lm = FakeLM(stop_responder)
    reflection = ReflectionOptions(policy={"threshold": 0.0}, value={"threshold": 0.0})

    def agent():
        return SearchAgent(LMPolicy(lm, 2, PolicyOptions(n_samples_min=2)),
                           SingleValue(lm, ValueOptions(single={"n": 2})),
                           make_algorithm({"algorithm": "mcts", "n_simulations": 2}),
                           reflector=Reflector(lm), memory=mem, reflection=reflection,
                           value_memory=True, name="rmcts")

    async def two():
        out = []
        for _ in range(2):
            a = agent()
            trees = []
            rec = await run_episode(a, TASK, on_tree=lambda t, d, trees=trees: trees.append(d))
            out.append((a, rec, trees))
        return out

    (_, rec1, _), (_, _, trees2) = asyncio.run(two())
    assert rec1["actions"] == ["stop"]
    [value_refl] = mem.value.records
    assert value_refl["item"] == "final_action"
    assert value_refl["key_text"] == "at /\nAction:\nstop"
    # the policy reflection read the verdict, not an observation the runner wrote after STOP
    assert all(r["next_state_text"].startswith("The task was evaluated as")
               for r in mem.policy.records)
    # the next episode's STOP node asks with the same key and finds it
    stop_node = next(n for n in trees2[0]["nodes"] if n["terminal_reason"] == "stop")
    assert stop_node["value_record"]["retrieved_reflection_ids"] == [value_refl["id"]]


# --- item 2: r_est leaves out NONE and invalid steps ------------------------------------------
def test_item2_success_estimate_ignores_none_and_invalid_steps():
    stats = [StepStat(q=0.6), StepStat(q=1.0, is_none=True), StepStat(q=1.0, valid=False),
             StepStat(q=0.65)]
    rec = TaskRecord("t", "g", ["o0", "o1", "o2", "o3", "o4"], ["a"] * 4, [None] * 4, stats)
    assert rec.r_est == 0                            # mean of 0.6 and 0.65, not 0.8125


# --- item 3: on_value_one for frontier sequences -------------------------------------------
@pytest.mark.parametrize("mode,actions,stopped_by", [
    ("commit_path_and_end", ["b"], "agent_ended"),
    ("commit_path_and_continue", ["b", "a"], "done"),
])
def test_item3_on_value_one_applies_to_a_committed_sequence(mode, actions, stopped_by):
    agent, _ = frontier_agent("bfs", budget=6)
    agent.value.values = {"a": 0.3, "b": 1.0, "b/a": 1.0}     # "b" is not the goal (b, a)
    agent.episode_options = EpisodeOptions(on_value_one=mode)
    rec, _ = play(agent, max_steps=3)
    assert (rec["actions"], rec["outcome"]["stopped_by"]) == (actions, stopped_by)


# --- item 4: the success estimate has a producer and select_by="est" a consumer ---------------
def test_item4_select_by_est_reads_the_estimate_search_agents_record(tmp_path):
    from clew.training.datasets import DataConfig, build_datasets

    run = RunDir(tmp_path / "run")
    run.open({}, resume=False)
    tasks = [line_task(0, length=1), line_task(1, length=4, budget=3)]
    asyncio.run(run_suite(lambda: build_agent("mcts", roles="heuristic",
                                              search={"n_simulations": 3}),
                          tasks, run, concurrency=1, max_steps=3, progress=False))
    est = {r["key"]: r["outcome"]["success_est"] for r in run.episodes()}
    assert est["line-0#0"] is True and est["line-1#0"] is False
    ds, report = build_datasets(DataConfig(runs=[str(run.path)], select_by="est"))
    assert report["selected"] == 1
    assert set(ds["il_all"]["episode"]) == {"line-0#0"}
    assert set(ds["il_all"]["selected_by"]) == {"est"}


# --- item 6: a NONE edge does not step the env ------------------------------------------------
class LoggedLine(LineEnv):
    name = "toy-line-logged"
    stepped: ClassVar[list[str]] = []

    def step(self, action):
        LoggedLine.stepped.append(action)
        return super().step(action)


register_env("toy-line-logged", "test_search_fixes:LoggedLine")


def test_item6_a_committed_none_edge_is_an_invalid_step_without_an_env_step():
    lm = FakeLM(lambda req, i: "I cannot decide." if req.role == "policy" else
                "Thoughts: -\nSTATUS CODE: C")
    agent = SearchAgent(LMPolicy(lm, 2, PolicyOptions(n_samples_min=2)),
                        SingleValue(lm, ValueOptions(single={"n": 1, "rubric": False})),
                        make_algorithm({"algorithm": "mcts", "n_simulations": 2}))
    LoggedLine.stepped.clear()
    task = Task("toy-line-logged", {"length": 3, "budget": 10}, id="logged")
    rec = asyncio.run(run_episode(agent, task, max_steps=2, max_invalid_streak=0))
    assert LoggedLine.stepped == []                  # neither the real env nor a simulator
    assert rec["actions"] == ["(no action)", "(no action)"]
    assert [s["valid"] for s in rec["steps"]] == [False, False]
    assert all(s["info"]["no_action"] for s in rec["steps"])
    assert rec["steps"][1]["obs"].endswith("at 0 of 3, step 2")   # each cost one step


# --- item 9: usage roles of their own -------------------------------------------------------
def test_item9_the_rubric_is_counted_as_its_own_role_and_written_once_per_task():
    lm = FakeLM(lambda req, i: "<rubric>- at the end</rubric>" if req.role == "rubric"
                else "Thoughts: fine\nSTATUS CODE: B")
    value = SingleValue(lm, ValueOptions(single={"n": 2}))
    env = make_for(line_task(0))
    from clew.agents.prompts import task_context

    ctx = task_context(env, "line-0").at([env.reset(line_task(0)).text], [], [], env=env)
    usage = UsageByRole()
    # issue 11 item 7: nodes retrieving different reflections share the task's one rubric
    asyncio.run(value.evaluate(ctx, [{"id": "r1", "reflection": "x"}], usage))
    asyncio.run(value.evaluate(ctx, [{"id": "r2", "reflection": "y"}], usage))
    rubric_calls = [c for c in lm.calls if c.role == "rubric"]
    assert len(rubric_calls) == 1 and usage["rubric"].calls == 1
    assert usage["value"].calls == 2


# --- item 11: the vLLM docstring does not promise bit-reproducible seeds -----------------------
def test_item11_vllm_seeds_are_documented_as_not_bit_reproducible():
    text = (ROOT / "agents" / "lm" / "vllm_backend.py").read_text()
    doc = text.split('"""')[1]
    assert "not bit-reproducible" in doc and "batch" in doc
    assert "reproducible whatever runs beside it" not in doc


# --- item 12: with one simulation Q equals V_next ---------------------------------------------
def test_item12_one_simulation_makes_q_equal_v_next_and_the_docs_say_so():
    agent = build_agent("mcts", roles="heuristic", search={"n_simulations": 1})
    seen = {}
    end = agent.on_episode_end

    def keep(episode):
        seen["rec"] = agent.task_record(episode)
        return end(episode)

    agent.on_episode_end = keep
    asyncio.run(run_episode(agent, line_task(0, length=3, budget=6), max_steps=4))
    rec = seen["rec"]
    assert all(s.q == s.v_next for s in rec.stats)
    scores = policy_error_scores(rec, success=False)
    assert all(s == 0.0 for s in scores[:-1])              # only the last step can be picked
    doc = " ".join((ROOT / "docs" / "methods" / "baselines.md").read_text().split())
    assert "Q equals V_next" in doc


# --- item 13: q_init = parent -------------------------------------------------------------------
def two_edge_node(value):
    tree = Tree.with_root("s")
    node = tree.root
    node.value = value
    first = tree.new_edge(node, "a", "a", prior=0.5)
    tree.new_edge(node, "b", "b", prior=0.5)
    first.n, first.q, node.ns = 1, 0.7, 1
    return node


def test_item13_q_init_parent_gives_unvisited_edges_the_parents_value():
    from clew.search.mcts import parent_value

    node = two_edge_node(0.6)
    assert select(node, 1.0).key == "a"               # 0.7 + 0.25 beats 0 + 0.5
    assert select(node, 1.0, "parent").key == "b"     # 0.6 + 0.5 beats 0.95
    root = two_edge_node(None)                        # the root is never evaluated
    assert parent_value(root) == pytest.approx(0.7)   # the mean backed up through it
    assert MCTSConfig(q_init="parent").q_init == "parent"
    with pytest.raises(ValueError):
        MCTSConfig(q_init="child")


def test_item13_q_init_parent_runs_in_an_agent():
    agent = build_agent("mcts", roles="heuristic", search={"n_simulations": 6,
                                                           "q_init": "parent"})
    rec = asyncio.run(run_episode(agent, line_task(0, length=2), max_steps=4))
    assert rec["outcome"]["steps"] > 0


# --- charged mode: reflection statistics pair with executed steps -------------------------------
def test_stats_pair_with_executed_steps_in_charged_mode():
    from clew.envs.suites import get_suite

    task = next(t for t in get_suite("exploration-v1").split("test") if t.env == "treesearch")
    agent = build_agent("mcts", roles="heuristic",
                        search={"n_simulations": 6, "branching_factor": 3})
    seen = {}
    end = agent.on_episode_end

    def keep(episode):
        seen["rec"], seen["steps"] = agent.task_record(episode), list(episode.steps)
        return end(episode)

    agent.on_episode_end = keep
    trees = []
    asyncio.run(run_episode(agent, task, max_steps=100, on_tree=lambda t, d: trees.append(d)))
    rec, steps = seen["rec"], seen["steps"]
    assert len(rec.stats) == len(steps)
    # what each tree decided: its committed edge's action and Q
    decisions = {}
    for tree in trees:
        [edge_id] = tree["decision"]["edges"]
        edge = tree["edges"][edge_id]
        decisions.setdefault(edge["key"], edge["q"])
    paired = 0
    for stat, step in zip(rec.stats, steps):
        if "search" in step.info:                       # executed as decided
            assert not stat.runner_inserted
            assert math.isclose(round(stat.q, 6), step.info["search"]["q"])
        elif stat.runner_inserted:                      # charged, never committed
            assert stat.excluded and stat.q is None
        else:                                           # charged, then committed: paid already
            assert step.info["charged_simulation"]
            assert stat.q == decisions[task_env_key(task, step.action)]
            paired += 1
    assert paired > 0 and any(s.runner_inserted for s in rec.stats)


def task_env_key(task, action):
    return make_for(task).canonical(action)


# --- issue 11 item 7: the prompt-matched no-search baseline -----------------------------------
def test_policy_only_sends_the_search_policys_prompt_and_parses_with_its_parser():
    lm = FakeLM(lambda req, i: "Going right.\nNext action:\n```\nright\n```")
    agent = build_agent("policy-only", model=lm)
    rec = asyncio.run(run_episode(agent, line_task(0, length=1), max_steps=1))
    assert rec["actions"] == ["right"]
    env = make_for(line_task(0, length=1))
    from clew.agents.prompts import task_context

    ctx = task_context(env, "line-0").at([env.reset(line_task(0, length=1)).text], [], [])
    assert lm.calls[0].messages == policy_messages(ctx)
    doc = " ".join((ROOT / "docs" / "methods" / "baselines.md").read_text().split())
    assert "a different baseline" in doc and "--react" in doc
