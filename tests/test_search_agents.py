"""Search agents end to end on a toy tree env: R-MCTS with the fake LM, committed paths, value
failures, ToT BFS/DFS and best-first visit orders (docs/methods/mcts.md, Appendix C.11), heuristic
roles on the grid map."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np
import pytest
from clew.agents.debate import DebateValue
from clew.agents.lm.base import LMError
from clew.agents.lm.fake import FakeLM
from clew.agents.memory import ReflectionMemory
from clew.agents.options import PolicyOptions, ReflectionOptions, ValueOptions
from clew.agents.policy import LMPolicy
from clew.agents.reflection import Reflector
from clew.agents.value import SingleValue, ValueCallError
from clew.envs.base import Env, EnvFlags, Observation, Step, Task
from clew.envs.registry import register
from clew.runner.episodes import run_episode
from clew.search.agent import SearchAgent
from clew.search.registry import make_algorithm
from clew.search.tree import tree_from_dict


@dataclass
class ToyState:
    path: tuple[str, ...] = ()
    steps: int = 0
    done: bool = False
    success: bool = False
    log: list = field(default_factory=list)


class ToyTreeEnv(Env):
    """Actions a / b / stop; the goal is the path b, a (reached -> done). Budget: 4 steps.
    ``stop`` ends the episode (success iff at the goal)."""

    name = "toy-tree"
    flags = EnvFlags(deterministic=True, outcome_mode="terminal_success")

    def reset(self, task: Task) -> Observation:
        self.task = task
        self.goal = tuple(task.params.get("goal", ["b", "a"]))
        self.state = ToyState()
        return self.observation()

    def observation(self) -> Observation:
        return Observation("at /" + "/".join(self.state.path))

    def parse_action(self, text: str):
        t = text.strip().strip("`").lower()
        return t if t in ("a", "b", "stop") else None

    def is_stop(self, action: str) -> bool:
        return action == "stop"

    def legal_actions(self):
        return [] if self.state.done else ["a", "b"]

    def step(self, action: str) -> Step:
        s = self.state
        s.steps += 1
        a = self.parse_action(action)
        if a is None:
            s.done = s.steps >= 4
            return Step(Observation(f"invalid {action!r}; " + self.observation().text), 0.0,
                        s.done, False)
        if a == "stop":
            s.done = True
            return Step(Observation("stopped"), 0.0, True, True)
        s.path = s.path + (a,)
        s.success = s.path == self.goal
        s.done = s.success or s.steps >= 4
        return Step(self.observation(), float(s.success), s.done, True)

    def instructions(self, variant: str = "default") -> str:
        return "Find the hidden goal path in the toy tree."

    def grade(self) -> float:
        return 1.0 if self.state.success else 0.0


register("toy-tree", "test_search_agents:ToyTreeEnv")
TASK = Task("toy-tree", {"goal": ["b", "a"]}, seed=0, id="toy-0")


def last_obs(req) -> str:
    text = req.messages[-1]["content"]
    for marker in ("LATEST OBSERVATION:\n", "OBSERVATION:\n"):
        if marker in text:
            return text.split(marker)[-1].split("\n")[0]
    return ""


GRADES = {"at /b": "B", "at /b/a": "A", "at /": "C"}


def responder(policy_mix=("a", "a", "a", "b", "b")):
    def respond(req, i):
        if req.role == "policy":
            return f"I think.\nNext action:\n```\n{policy_mix[i % len(policy_mix)]}\n```"
        if req.role == "rubric":
            return "<rubric>- the goal path is found</rubric>"
        if req.role == "value":
            final = "FINAL ACTION" in req.messages[-1]["content"]
            letter = "E" if final else GRADES.get(last_obs(req), "E")
            return f"Thoughts: looks like {letter}\nSTATUS CODE: {letter}"
        if req.role in ("expect", "reflection"):
            return "a lesson"
        raise AssertionError(req.role)
    return respond


def mcts(n_sim, b=2):
    return make_algorithm({"algorithm": "mcts", "branching_factor": b, "n_simulations": n_sim})


def lm_policy(lm, n_min=10):
    return LMPolicy(lm, 2, PolicyOptions(n_samples_min=n_min))


def single_value(lm, n=4, **single):
    return SingleValue(lm, ValueOptions(single={"n": n, **single}))


def lm_agent(lm, n_sim=4):
    return SearchAgent(lm_policy(lm), single_value(lm), mcts(n_sim), name="mcts")


def play(agent, task=TASK, **kw):
    trees = []
    rec = asyncio.run(run_episode(agent, task, on_tree=lambda t, d: trees.append((t, d)), **kw))
    return rec, trees


def test_mcts_with_fake_lm_commits_the_value_one_path_and_logs_everything():
    lm = FakeLM(responder())
    rec, trees = play(lm_agent(lm))
    # sim1 a (E=0) ; sim2 b (0.4 > 0.3; B=0.9) ; sim3 b then a: A = 1.0 -> path [b, a]
    assert rec["actions"] == ["b", "a"] and rec["outcome"]["success"]
    assert len(trees) == 1                            # the path ran without a second search
    t, tree = trees[0]
    assert t == 0 and tree["decision"]["kind"] == "path"
    loaded = tree_from_dict(tree)
    assert [[loaded.edge(i).key for i in tr] for tr in loaded.traversals] == \
        [["a"], ["b"], ["b", "a"]]
    assert tree["counters"]["stopped_by"] == "value_one"
    # simulated interactions are logged apart from the executed ones
    assert rec["interactions"]["executed"] == 2
    assert rec["interactions"]["simulated"] == 1 + 1 + 2
    assert set(rec["usage"]) == {"policy", "value", "rubric"}   # the rubric is a role of its own
    # policy calls: root, /a, /b (/b/a is env_done: evaluated, never expanded)
    assert tree["meta"]["usage"]["policy"]["calls"] == 3
    assert rec["steps"][0]["info"]["search"]["kind"] == "path"
    # policy: one request per expansion, each with n = max(2b, 10) samples
    policy_calls = [c for c in lm.calls if c.role == "policy"]
    assert all(c.sampling.n == 10 for c in policy_calls)


def test_single_decision_is_most_visited_root_edge():
    grades = dict(GRADES)
    lm = FakeLM(responder(("a", "a", "a", "b", "b")))
    GRADES["at /b/a"] = "B"                      # no value-one early stop this time
    try:
        rec, trees = play(lm_agent(lm, n_sim=6), max_steps=1)
    finally:
        GRADES.clear()
        GRADES.update(grades)
    tree = tree_from_dict(trees[0][1])
    root = tree.root
    best = max(root.edges, key=lambda e: (e.n, e.q))
    assert rec["actions"] == [best.action] and tree.decision_kind == "single"
    assert sum(e.n for e in root.edges) == 6 == tree.counters["simulations"]


def test_failing_value_call_surfaces_as_error_not_zero():
    def respond(req, i):
        if req.role == "value":
            raise LMError("model crashed")
        return "Next action:\n```\na\n```"
    agent = SearchAgent(lm_policy(FakeLM(respond), 4),
                        single_value(FakeLM(respond), 2, rubric=False), mcts(3))
    with pytest.raises(ValueCallError, match="model crashed"):
        play(agent)


class AxisEmbedder:
    model_id = "toy-axis"
    dim = 4

    def encode(self, texts):
        return np.stack([np.array([1, 0, 0, 0], dtype=np.float32) for _ in texts])


def test_rmcts_reflects_after_the_episode_and_retrieves_in_the_next(tmp_path):
    mem = ReflectionMemory(tmp_path / "memory", embedder=AxisEmbedder())
    lm = FakeLM(responder(("a",)))                     # the policy only proposes "a"
    reflection = ReflectionOptions(policy={"threshold": 0.0}, value={"threshold": 0.0})

    def agent():
        return SearchAgent(lm_policy(lm, 4), single_value(lm, 2), mcts(2),
                           reflector=Reflector(lm), memory=mem, reflection=reflection,
                           policy_memory=True, value_memory=True, name="rmcts")

    async def two_episodes():
        recs = []
        for _ in range(2):
            trees: list = []
            rec = await run_episode(agent(), TASK, max_steps=2,
                                    on_tree=lambda t, d, trees=trees: trees.append(d))
            recs.append((rec, trees))
            await mem.settle()                          # the runner may not await the job
        return recs

    (rec1, trees1), (_, trees2) = asyncio.run(two_episodes())
    assert not rec1["outcome"]["success"]
    assert mem.policy.records and mem.value.records and mem.tasks.records
    assert any(c.role == "reflection" for c in lm.calls)
    assert all(not n["retrieved_policy_refl"] for n in trees1[0]["nodes"])   # nothing yet
    root2 = trees2[0]["nodes"][0]
    assert root2["retrieved_policy_refl"]                                     # task 2 sees them
    policy_reqs = [c for c in lm.calls if c.role == "policy"]
    assert "REFLECTIONS" in policy_reqs[-1].messages[-1]["content"]
    values = [c for c in lm.calls if c.role == "value" and c.sampling.n == 2]
    assert "REFLECTIONS" in values[-1].messages[-1]["content"]


def test_debate_agent_runs_and_records_debate_in_tree():
    def respond(req, i):
        if req.role == "debate":
            return "argument"
        if req.role == "judge":
            letter = GRADES.get(last_obs(req), "E")
            return f"Thoughts: judge\nSTATUS CODE: {letter}"
        return responder()(req, i)
    lm = FakeLM(respond)
    agent = SearchAgent(lm_policy(lm), DebateValue(lm, ValueOptions(kind="debate")), mcts(4))
    rec, trees = play(agent)
    assert rec["outcome"]["success"]
    node = next(n for n in trees[0][1]["nodes"] if n["value_record"])
    assert node["value_record"]["debate"]["support"] == "argument"
    assert len(node["value_record"]["debate"]["judge_outputs"]) == 6
    assert {"debate", "judge", "policy"} <= set(rec["usage"])


# --- frontier baselines (Appendix C.11) -------------------------------------------------------
class ScriptedPolicy:
    kind = "heuristic"
    uses_oracle = False

    def __init__(self, priors):
        self.priors = priors

    async def propose(self, ctx, reflections=(), usage=None):
        from clew.agents.policy import Proposal
        key = "/".join(ctx.actions)
        return [Proposal(a, a, f"raw {a}", 1, p, a == "stop") for a, p in self.priors.get(key, [])]


class ScriptedValue:
    kind = "heuristic"
    method = "heuristic"
    uses_oracle = False
    scale = "unit"

    def __init__(self, values):
        self.values = values
        self.seen = []

    def config_hash(self):
        return "scripted"

    async def evaluate(self, ctx, reflections=(), usage=None):
        from clew.agents.value import ValueRecord
        key = "/".join(ctx.actions + ([ctx.final_action] if ctx.final_action else []))
        self.seen.append(key)
        return ValueRecord(v=self.values.get(key, 0.0))


PRIORS = {"": [("a", 0.6), ("b", 0.4)], "a": [("a", 0.7), ("b", 0.3)],
          "b": [("a", 0.8), ("b", 0.2)]}
VALUES = {"a": 0.3, "b": 0.6, "a/a": 0.2, "a/b": 0.1, "b/a": 0.9, "b/b": 0.4}


def frontier_agent(order, budget=6, **kw):
    value = ScriptedValue(VALUES)
    algorithm = make_algorithm({"algorithm": order, "branching_factor": 2,
                                "n_simulations": budget, "max_depth_actions": 2, **kw})
    agent = SearchAgent(ScriptedPolicy(PRIORS), value, algorithm, name=order)
    return agent, value


@pytest.mark.parametrize("order,expected", [
    ("bfs", ["a", "b", "a/a", "a/b", "b/a", "b/b"]),
    ("dfs", ["a", "a/a", "a/b", "b", "b/a", "b/b"]),          # highest prior first
    ("best-first", ["a", "b", "b/a", "b/b", "a/a", "a/b"]),   # max parent value, root rank
])
def test_frontier_visit_orders_and_sequence_commit(order, expected):
    agent, value = frontier_agent(order)
    rec, trees = play(agent, max_steps=3)          # no node of the tree is at the step limit
    assert value.seen == expected
    tree = tree_from_dict(trees[0][1])
    assert ["/".join(tree.edge(i).key for i in tr) for tr in tree.traversals] == expected
    assert tree.decision_kind == "sequence"
    assert rec["actions"] == ["b", "a"] and rec["outcome"]["success"]   # whole sequence run
    assert len(trees) == 1


def test_dfs_code_order_explores_lowest_prior_first():
    agent, value = frontier_agent("dfs", dfs_order="code")
    play(agent, max_steps=3)
    assert value.seen == ["b", "b/b", "b/a", "a", "a/b", "a/a"]


def test_frontier_budget_counts_pops():
    agent, value = frontier_agent("bfs", budget=3)
    rec, trees = play(agent, max_steps=3)
    assert value.seen[:3] == ["a", "b", "a/a"]
    assert trees[0][1]["counters"]["simulations"] == 3
    assert rec["actions"][0] == "b"                 # the best (0.6) sequence is [b]


# --- heuristic roles on the real grid map ------------------------------------------------------
def test_heuristic_mcts_on_gridmap_records_trees_and_labels():
    from clew.envs.suites import resolve
    from clew.runner.registry import build_agent

    task = resolve("gridmap-mini:test")[0]
    agent = build_agent("mcts", search={"n_simulations": 5}, value={"noise": 0.1}, seed=1)
    assert agent.kind == "heuristic" and agent.uses_oracle
    rec, trees = play(agent, task, max_steps=6)
    assert len(trees) == rec["outcome"]["steps"] == 6
    assert rec["interactions"]["simulated"] > 0
    assert all(t["meta"]["agent_kind"] == "heuristic" for _, t in trees)
    again, _ = play(build_agent("mcts", search={"n_simulations": 5}, value={"noise": 0.1},
                                seed=1), task, max_steps=6)
    assert again["actions"] == rec["actions"]              # deterministic
