"""Prompts without contradictions (issue 11 item 2, issue 16 item 10), on every env family:
the env's "reply with X only" never sits next to a role's own format, value-side prompts hold
the trajectory as a transcript in one user turn, per-step facts come from the current
observation, observations are labelled once, OBJECTIVE lines use the short task key, and
prompts share their prefix."""

from __future__ import annotations

import pytest
from clew.agents.distilled import first_user, forward_user, system_prompt
from clew.agents.prompts import (
    argument_messages,
    judge_messages,
    labelled,
    policy_messages,
    policy_reflection_block,
    rubric_messages,
    sa_value_messages,
    task_context,
    value_reflection_block,
)
from clew.envs.registry import make_for
from clew.envs.suites import resolve
from clew.envs.textminigrid.prompts import THINK_LINE, instruction_block

#: what each env's own prompt says about replying (its format rule)
REPLY_RULES = {
    "gridmap": ["Reply with the JSON object only", "Answer with exactly one JSON object"],
    "rooms": ["Reply with one object enclosed"],
    "hillsearch": ["Reply with ONLY this JSON"],
    "treesearch": ["Reply with ONLY this JSON"],
    "maxsatsearch": ["Reply with ONLY this JSON"],
    "textminigrid": ["Write the actions between <actions> and </actions>",
                     "Also write the intention"],
}
SUITES = ["gridmap-mini:test", "rooms-v2-4x4:test", "paper-003-main:test",
          "textminigrid-v1:test"]


def first_task_of_each_env():
    seen = {}
    for suite in SUITES:
        for task in resolve(suite):
            seen.setdefault(task.env, task)
    return list(seen.values())


def play(task, n=3):
    """Context after n valid-or-not steps of the env's first legal actions."""
    env = make_for(task)
    obs = [env.reset(task).text]
    ctx = task_context(env, task.id)
    actions, raws = [], []
    for _ in range(n):
        if env.done:
            break
        legal = env.legal_actions() or [env.canonical("x=5")]
        action = legal[-1]
        step = env.step(action)
        obs.append(step.obs.text)
        actions.append(env.canonical(action))
        raws.append(f"I will do it.\nNext action:\n```\n{action}\n```")
    return env, ctx.at(obs, actions, raws, env=env)


def role_prompts(ctx):
    return {
        "policy": policy_messages(ctx),
        "value": sa_value_messages(ctx, 2, rubric="- is the goal reached?"),
        "rubric": rubric_messages(ctx),
        "support": argument_messages(ctx, "support", 4),
        "judge": judge_messages(ctx, "for", "against", "oppose_first", 4),
    }


TASKS = first_task_of_each_env()


def test_every_family_is_covered():
    assert {t.env for t in TASKS} == set(REPLY_RULES)


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.env)
def test_no_env_reply_rule_next_to_a_roles_format(task):
    env, ctx = play(task)
    rules = REPLY_RULES[task.env]
    own = env.instructions() + ctx.observations[0]      # TextMiniGrid: in every observation
    assert any(r in own for r in rules)                 # the env's own prompt has it ...
    for role, msgs in role_prompts(ctx).items():
        for m in msgs:                                     # ... clew's roles never show it
            for r in rules:
                assert r not in m["content"], (role, r)
    system = policy_messages(ctx)[0]["content"]
    assert "Next action:" in system and env.answer_format() in system
    if task.env == "textminigrid":
        for m in policy_messages(ctx):
            assert instruction_block(env.max_actions) not in m["content"]
            assert THINK_LINE not in m["content"]


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.env)
def test_value_side_prompts_hold_the_trajectory_in_one_user_turn(task):
    _, ctx = play(task)
    for role, msgs in role_prompts(ctx).items():
        if role == "policy":
            continue
        assert [m["role"] for m in msgs] == ["system", "user"], role
    judge = judge_messages(ctx, "for", "against", "oppose_first", 4)[1]["content"]
    assert "THE AGENT'S TRAJECTORY SO FAR:" in judge
    assert f"ACTION {len(ctx.actions)}: {ctx.actions[-1]}" in judge


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.env)
def test_observations_are_labelled_once(task):
    """Issue 16 item 10: gridmap prompts showed "OBSERVATION:\\nOBSERVATION:"."""
    env, ctx = play(task)
    texts = [m["content"] for msgs in role_prompts(ctx).values() for m in msgs]
    texts += [first_user(env, 0, ctx.observations[0]), forward_user(env, 1, ctx.observations[1], "a")]
    for text in texts:
        assert "OBSERVATION:\nOBSERVATION:" not in text
        assert "OBSERVATION:\nINITIAL OBSERVATION:" not in text


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.env)
def test_per_step_facts_come_from_the_current_observation(task):
    _, ctx = play(task, n=3)
    later = ctx.at(ctx.observations, ctx.actions, ctx.raws)
    early = ctx.at(ctx.observations[:1], [], [])
    # the system prompt is the same at every step: nothing of the current state is frozen in it
    assert policy_messages(early)[0] == policy_messages(later)[0]
    last = policy_messages(later)[-1]["content"]
    assert labelled("OBSERVATION", ctx.shown(len(ctx.actions))) in last


def test_rooms_visible_objects_are_those_of_now():
    """Issue 11: rooms' "Visible now: ..." was computed once per episode."""
    task = resolve("rooms-v2-4x4:test")[0]
    env = make_for(task)
    first = env.reset(task)
    ctx = task_context(env, task.id)
    door = next(a for a in env.legal_actions() if a.endswith("door"))
    start_visible = env.legal_actions()
    step = env.step(door)
    now = env.legal_actions()
    assert set(now) != set(start_visible)
    later = ctx.at([first.text, step.obs.text], [door], [f"<{door}>"])
    msgs = policy_messages(later)
    text = "\n".join(m["content"] for m in msgs)
    assert "Visible now" not in text
    assert "You see: " + ", ".join(now) in msgs[-1]["content"]
    assert not any(obj in msgs[0]["content"] for obj in start_visible)
    assert "Visible now" not in system_prompt(env)


def test_objective_lines_use_the_short_task_key():
    long_task = "Reach the goal. " + "This sentence is generic filler text for every task. " * 20
    refl = {"task_text": long_task, "reflection": "explore first", "action_raw": "up"}
    for block in (policy_reflection_block([refl]), value_reflection_block([refl])):
        line = next(ln for ln in block.splitlines() if ln.startswith("OBJECTIVE (1):"))
        assert len(line.split()) <= 42 and line.startswith("OBJECTIVE (1): Reach the goal.")
    keyed = {**refl, "task_key": "gridmap: goal G, 4x4"}
    assert "OBJECTIVE (1): gridmap: goal G, 4x4" in policy_reflection_block([keyed])


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.env)
def test_shared_prefix_first(task):
    """Two nodes of one task: the policy prompts share the system turn and the first exchange;
    the value prompts share the system turn and the transcript's beginning."""
    _, ctx = play(task, n=2)
    a = ctx.at(ctx.observations[:2], ctx.actions[:1], ctx.raws[:1])
    b = ctx.at(ctx.observations, ctx.actions, ctx.raws)
    pa, pb = policy_messages(a), policy_messages(b)
    assert pa[:2] == pb[:2]
    va, vb = (judge_messages(c, "x", "y", "oppose_first", 4) for c in (a, b))
    assert va[0] == vb[0]
    head = "THE AGENT'S TRAJECTORY SO FAR:\nINITIAL OBSERVATION:"
    assert va[1]["content"].startswith(head) and vb[1]["content"].startswith(head)
