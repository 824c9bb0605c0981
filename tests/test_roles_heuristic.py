"""Heuristic roles (issue 5): priors over legal actions, noisy ground-truth value, progress."""

from __future__ import annotations

import asyncio

import pytest
from clew.agents.heuristics.search_roles import (
    HeuristicPolicy,
    HeuristicValue,
    RolloutValue,
    TemplateReflector,
    progress,
)
from clew.agents.options import PolicyOptions, ValueOptions
from clew.agents.prompts import Context
from clew.envs.registry import make_for
from clew.envs.suites import resolve


@pytest.fixture(scope="module")
def grid():
    task = resolve("gridmap-mini:test")[0]
    env = make_for(task)
    env.reset(task)
    return task, env


def ctx(env, actions=(), task_id="t"):
    return Context(task="g", observations=["o"] * (len(actions) + 1), actions=list(actions),
                   env=env, task_id=task_id)


@pytest.mark.parametrize("prior", ["uniform", "sampled", "oracle"])
def test_policy_proposes_legal_actions_with_normalised_priors(grid, prior):
    _, env = grid
    props = asyncio.run(HeuristicPolicy(2, PolicyOptions(prior=prior)).propose(ctx(env)))
    legal = env.legal_actions()
    assert props and len(props) <= 2 and {p.action for p in props} <= set(legal)
    assert sum(p.prior for p in props) == pytest.approx(1.0)
    assert [p.count for p in props] == sorted((p.count for p in props), reverse=True)
    assert HeuristicPolicy(5, PolicyOptions(prior=prior)).uses_oracle is (prior == "oracle")


def test_oracle_prior_prefers_progress(grid):
    _, env = grid
    base = progress(env)
    props = asyncio.run(HeuristicPolicy(4, PolicyOptions(prior="oracle", n_samples=200,
                                                        oracle_temperature=0.01)).propose(ctx(env)))
    gains = {}
    for a in env.legal_actions():
        sim = env.copy()
        sim.step(a)
        gains[a] = progress(sim) - base
    assert gains[props[0].action] == max(gains.values())


def test_progress_is_one_at_success_and_grows_along_an_optimal_route(grid):
    task, _ = grid
    env = make_for(task)
    env.reset(task)
    values = [progress(env)]
    for _ in range(200):                       # greedy on progress reaches the goal
        if env.done:
            break
        best = None
        for a in env.legal_actions():
            sim = env.copy()
            sim.step(a)
            if best is None or progress(sim) > best[0]:
                best = (progress(sim), a)
        env.step(best[1])
        values.append(progress(env))
    assert env.grade() == 1.0 and values[-1] == 1.0
    assert values[0] < 0.5


def test_noisy_value_is_seeded_per_state_and_capped(grid):
    _, env = grid
    def values(seed):       # the action path seeds the noise (the env state stays the same)
        vf = HeuristicValue(ValueOptions(noise=0.3), seed=seed)
        return [asyncio.run(vf.evaluate(ctx(env, [f"x{i}"]))).v for i in range(12)]
    a, b, c = values(1), values(1), values(2)
    assert a == b and a != c
    assert all(0.0 <= v <= 0.9 for v in a) and len(set(a)) > 3
    rec = asyncio.run(HeuristicValue(ValueOptions(noise=0.3)).evaluate(ctx(env)))
    assert rec.info["truth"] == pytest.approx(progress(env))
    exact = asyncio.run(HeuristicValue(ValueOptions(noise=0.0)).evaluate(ctx(env)))
    assert exact.v == pytest.approx(min(progress(env), 0.9))
    assert asyncio.run(HeuristicValue(ValueOptions(noise=0.0, scale="signed")).evaluate(ctx(env))).v == \
        pytest.approx(2 * exact.v - 1)
    with pytest.raises(ValueError):
        HeuristicValue(ValueOptions(noise=-1))


def test_template_reflector_writes_text():
    from clew.agents.reflection import StepStat, TaskRecord

    rec = TaskRecord("t", "g", ["o0", "o1"], ["up"], ["raw"], [StepStat(q=0.8, v_next=0.1)])
    r = TemplateReflector()
    _, nxt, text = asyncio.run(r.reflect_policy(rec, 0, success=False))
    assert nxt == "o1" and "up" in text and "failed" in text
    assert "0.10" in asyncio.run(r.reflect_value(rec, 0, False, "expectation"))


def test_heuristic_search_queries_oracle_tasks_without_an_action_list():
    """HillSearch and MaxSatSearch list no legal actions; the heuristic policy samples valid
    queries there, so MCTS with heuristic roles still searches (and finds reward)."""
    import asyncio

    from clew.envs.suites import get_suite
    from clew.runner.episodes import run_episode
    from clew.runner.registry import build_agent

    tasks = [t for t in get_suite("exploration-v1").split("test")
             if t.env in ("hillsearch", "maxsatsearch")]
    assert {t.env for t in tasks} == {"hillsearch", "maxsatsearch"}
    for task in tasks:
        agent = build_agent("mcts", search={"n_simulations": 4, "branching_factor": 3},
                            value={"noise": 0.2})
        rec = asyncio.run(run_episode(agent, task, max_steps=6))
        assert all(s["valid"] for s in rec["steps"]), rec["steps"][0]["obs"]
        assert rec["interactions"]["simulated"] > 0
        assert rec["metrics"]["normalized_reward"] > 0


# --- the rollout value: the env's own outcome, no oracle --------------------------------------
def rollout_value(**kw):
    return RolloutValue(ValueOptions(estimate="rollout", **kw))


def test_rollout_value_reads_no_oracle_and_is_one_at_a_finished_success(grid):
    task, _ = grid
    value = rollout_value(rollouts=2)
    assert value.uses_oracle is False
    done = make_for(task)
    done.reset(task)
    # walk the oracle's own route only to build the finished state the value is asked about
    while not done.done and progress(done) < 1.0:
        best = max(done.legal_actions(), key=lambda a: _after(done, a))
        done.step(best)
    assert done.done and done.grade() == 1.0
    assert asyncio.run(value.evaluate(ctx(done))).v == 1.0


def _after(env, action):
    sim = env.copy()
    sim.step(action)
    return progress(sim)


def test_rollout_value_is_seeded_by_the_state_and_tells_near_from_far(grid):
    task, _ = grid
    start = make_for(task)
    start.reset(task)
    near = make_for(task)
    near.reset(task)
    while progress(near) < 0.75:   # three quarters of the way along the best route
        near.step(max(near.legal_actions(), key=lambda a: _after(near, a)))
    value = rollout_value(rollouts=16, horizon=12)
    v_start = asyncio.run(value.evaluate(ctx(start, task_id="a"))).v
    v_near = asyncio.run(value.evaluate(ctx(near, task_id="a"))).v
    assert v_near > v_start
    again = rollout_value(rollouts=16, horizon=12)   # a fresh memo: the seed alone decides
    assert asyncio.run(again.evaluate(ctx(near, actions=["x"], task_id="a"))).v == v_near
    # the env was not moved by the walks
    assert progress(near) >= 0.75 and not near.done


def test_rollout_value_discounts_longer_walks(grid):
    task, _ = grid
    env = make_for(task)
    env.reset(task)
    plain = asyncio.run(rollout_value(rollouts=8, discount=1.0).evaluate(ctx(env))).v
    discounted = asyncio.run(rollout_value(rollouts=8, discount=0.9).evaluate(ctx(env))).v
    assert 0 < discounted < plain


def test_rollout_value_options_name_the_other_estimates_fields():
    with pytest.raises(ValueError, match="noise: not read with estimate: rollout"):
        ValueOptions(estimate="rollout", noise=0.1)
    with pytest.raises(ValueError, match="rollouts: not read with estimate: progress"):
        ValueOptions(rollouts=3)


def test_rollout_value_walks_nothing_where_simulation_is_charged():
    task = resolve("exploration-v1:test")
    task = next(t for t in task if t.env == "hillsearch")
    env = make_for(task)
    env.reset(task)
    before = env.clock()
    rec = asyncio.run(rollout_value().evaluate(ctx(env)))
    # nothing walked, and nothing read of the grade (it divides by the optimum)
    assert rec.info["rollouts"] == [0.5] and rec.v == 0.5 and env.clock() == before


def test_rollout_value_scores_rewards_received_not_the_grade_where_success_does_not_end_it():
    task = next(t for t in resolve("exploration-v1:test") if t.env == "rooms")
    env = make_for(task)
    env.reset(task)
    value = rollout_value(reward_scale=4.0)
    assert value.score(env) == 0.0
    walked = env.copy()
    rng = __import__("random").Random(0)
    while walked.observed_return() == 0.0 and not walked.done:
        walked.step(rng.choice(walked.legal_actions()))
    got = walked.observed_return()
    assert got > 0 and value.score(walked) == pytest.approx(got / (got + 4.0))
    assert value.score(walked) != walked.grade()      # the grade divides by R^max
