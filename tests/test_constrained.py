"""Constrained answers (docs/methods/parsing.md#constrained-answers): ``Sampling.choices`` on the
hf backend (exact: the choices scored by the model) and the fake one, and the ``constrain``
option of the distilled agent, ReAct, the LM policy and the distilled policy."""

from __future__ import annotations

import asyncio

import pytest
import torch
from clew.agents.debate import DebateValue
from clew.agents.distilled import DistilledAgent, DistilledPolicy, answer_choices
from clew.agents.lm.base import ChatRequest, LMError, Sampling, answer_suffix
from clew.agents.lm.fake import FakeLM
from clew.agents.lm.hf import HFModel
from clew.agents.options import (
    DistilledPolicyOptions,
    OptionsError,
    PolicyOptions,
    RoleOptions,
    ValueOptions,
    parse_options,
)
from clew.agents.parsing import ANSWER_PHRASE, STATUS_LETTERS, STATUS_PHRASE, answer_text
from clew.agents.policy import LMPolicy
from clew.agents.prompts import task_context
from clew.agents.react import ReActAgent
from clew.agents.value import SCALES, SingleValue
from clew.envs.registry import make_for
from clew.envs.suites import resolve
from clew.runner.config import EvalConfig
from clew.runner.episodes import run_episode
from clew.runner.evaluate import evaluate
from clew.runner.registry import build_agent
from clew.search.options import AgentOptions
from transformers import AutoModelForCausalLM

CHOICES = ["up", "down", "left", "backtrack S1"]
PROMPTS = [f"move {w} to the key {i} and open the door" for i, w in
           enumerate(["up", "down", "left", "right"])]


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": text}]


def ask(lm, text: str, **kw):
    kw.setdefault("max_tokens", 32)
    return asyncio.run(lm.complete(ChatRequest(chat(text), Sampling(**kw))))


def head_of(text: str) -> str:
    """The completion up to and including the answer's opening fence."""
    at = text.rindex(f"{ANSWER_PHRASE} ```")
    return text[:at + len(ANSWER_PHRASE) + 4]


@pytest.fixture(scope="module")
def lm(lively_model_dir) -> HFModel:
    return HFModel(lively_model_dir)


# --- the hf backend ----------------------------------------------------------------------------
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_every_completion_ends_with_a_choice_and_parses_to_it(lm, temperature):
    for text in PROMPTS:
        comps = ask(lm, text, n=3, temperature=temperature, seed=1, choices=CHOICES)
        assert len(comps) == 3
        for c in comps:
            assert any(c.text.endswith(answer_suffix(x)) for x in CHOICES), c.text[-60:]
            assert answer_text(c.text) in CHOICES and c.finish_reason == "stop"
            assert 0 < c.usage.completion_tokens <= 32 + 2


def test_without_choices_the_random_model_does_not_answer(lm):
    assert all(answer_text(ask(lm, t, temperature=0.0)[0].text) not in CHOICES for t in PROMPTS)


def test_greedy_takes_the_choice_of_highest_log_probability(lm, lively_model_dir):
    """Each choice's log-probability, computed here with one plain forward pass per choice
    (no padding, no batching), equals the backend's; greedy answers with the argmax."""
    model = AutoModelForCausalLM.from_pretrained(lively_model_dir, dtype=torch.float32)
    eos = sorted(lm.eos_ids)
    for text in PROMPTS[:3]:
        [c] = ask(lm, text, temperature=0.0, choices=CHOICES)
        context = lm.prompt_ids(chat(text)) + lm.text_ids(head_of(c.text))
        direct = []
        for choice in CHOICES:
            cont = lm.text_ids(choice + "```")
            with torch.no_grad():
                logp = torch.log_softmax(model(torch.tensor([context + cont])).logits[0], -1)
            total = sum(float(logp[len(context) - 1 + j, t]) for j, t in enumerate(cont))
            direct.append(total + float(torch.logsumexp(logp[-1, eos], 0)))
        [batched] = lm.choice_logprobs([context], [CHOICES])
        assert batched == pytest.approx(direct, abs=1e-3)
        best = CHOICES[max(range(len(CHOICES)), key=direct.__getitem__)]
        assert c.text.endswith(answer_suffix(best))


def test_a_context_met_again_is_scored_once_with_the_same_numbers(lm, monkeypatch):
    """The samples of one request mostly share their context (the same free part): each
    distinct context and choice list runs the model once, and every row gets its scores."""
    a = lm.prompt_ids(chat(PROMPTS[0]))
    b = lm.prompt_ids(chat(PROMPTS[1]))
    alone = [lm.choice_logprobs([ctx], [CHOICES])[0] for ctx in (a, b)]
    runs = []
    forward = lm.model.forward
    monkeypatch.setattr(lm.model, "forward", lambda *x, **k: runs.append(1) or forward(*x, **k))
    rows = lm.choice_logprobs([a, b, a, a, b], [CHOICES] * 5)
    assert rows == [alone[0], alone[1], alone[0], alone[0], alone[1]]
    once = len(runs)
    runs.clear()
    lm.choice_logprobs([a], [CHOICES])
    assert once == 2 * len(runs)     # two distinct contexts, not five
    assert lm.choice_logprobs([a, a], [CHOICES, CHOICES[:2]])[1] == pytest.approx(alone[0][:2])


def test_seeded_sampling_repeats_and_the_samples_are_drawn_from_all_choices(lm):
    first = [c.text for c in ask(lm, PROMPTS[0], n=4, temperature=1.0, seed=7, choices=CHOICES)]
    again = [c.text for c in ask(lm, PROMPTS[0], n=4, temperature=1.0, seed=7, choices=CHOICES)]
    assert first == again
    # at a high temperature the choice is near uniform: several choices show up
    hot = ask(lm, PROMPTS[1], n=12, temperature=50.0, seed=3, max_tokens=8, choices=CHOICES)
    assert len({answer_text(c.text) for c in hot}) >= 2


def test_constrained_and_free_requests_share_a_batch_without_changing_the_free_ones(lm):
    free = [ask(lm, t, temperature=0.0)[0].text for t in PROMPTS]

    async def together():
        requests = [ChatRequest(chat(t), Sampling(temperature=0.0, max_tokens=32,
                                                  choices=CHOICES if i % 2 else None))
                    for i, t in enumerate(PROMPTS)]
        return await asyncio.gather(*(lm.complete(r) for r in requests))

    before = len(lm.batches)
    outs = asyncio.run(together())
    assert len(lm.batches) - before < len(PROMPTS)   # batched
    for i, (out, text) in enumerate(zip(outs, free)):
        if i % 2:
            assert answer_text(out[0].text) in CHOICES
        else:
            assert out[0].text == text


def test_choices_that_cannot_be_honoured_are_errors(lm):
    for bad in ([], ["up", "a```b"], ["  "]):
        with pytest.raises(LMError, match="choices"):
            ask(lm, "x", choices=bad)
    with pytest.raises(LMError, match="logprobs"):
        ask(lm, "x", choices=["up"], logprobs=1)


# --- the fake backend --------------------------------------------------------------------------
def test_fake_backend_keeps_a_chosen_answer_and_appends_the_first_choice_otherwise():
    lm = FakeLM(["Next action: ```down```", "I go.\nNext action: ```jump```", ("cut", "length")])
    out = [asyncio.run(lm.complete(ChatRequest(chat("x"), Sampling(choices=["up", "down"]))))[0]
           for _ in range(3)]
    assert out[0].text == "Next action: ```down```"
    assert out[1].text.endswith("\nNext action: ```up```") and answer_text(out[1].text) == "up"
    assert out[2].text == "cut\nNext action: ```up```" and out[2].finish_reason == "stop"


# --- agents ------------------------------------------------------------------------------------
def gridmap_task():
    return resolve("gridmap-mini:test")[0]


def legal_at_start(task) -> list[str]:
    env = make_for(task)
    env.reset(task)
    return env.legal_actions()


def test_react_sends_the_legal_actions_as_choices_when_constrained():
    task = gridmap_task()
    for constrain in (True, False):
        lm = FakeLM(lambda req, i: "Next action: ```nowhere```")
        asyncio.run(run_episode(ReActAgent(lm, constrain=constrain), task, max_steps=2))
        first = lm.calls[0].sampling
        if constrain:
            assert first.choices == legal_at_start(task)
            assert first.answer_phrase == ANSWER_PHRASE
        else:
            assert first.choices is None


def test_tasks_without_legal_actions_are_not_constrained():
    task = resolve("exploration-v1:test")
    hill = next(t for t in task if t.env == "hillsearch")
    lm = FakeLM(lambda req, i: 'Next action: ```{"query": {"x": 1}}```')
    asyncio.run(run_episode(ReActAgent(lm, constrain=True), hill, max_steps=1))
    assert lm.calls[0].sampling.choices is None


def gridmap_root():
    """A gridmap env after reset and the search context at its root."""
    task = gridmap_task()
    env = make_for(task)
    first = env.reset(task)
    return env, task_context(env, task.id).at([first.text], [], [], env=env)


def test_lm_policy_proposes_and_acts_with_the_legal_actions_as_choices():
    env, ctx = gridmap_root()
    lm = FakeLM(lambda req, i: "Next action: ```nowhere```")
    policy = LMPolicy(lm, 2, PolicyOptions(constrain=True, n_samples_min=3))
    props = asyncio.run(policy.propose(ctx))
    asyncio.run(policy.act_once(ctx))
    assert [c.sampling.choices for c in lm.calls] == [env.legal_actions()] * 2
    assert [p.action for p in props] == [env.legal_actions()[0]]  # the fake's first choice
    asyncio.run(LMPolicy(lm, 2).propose(ctx))
    assert lm.calls[-1].sampling.choices is None


def test_distilled_policy_sends_the_legal_actions_as_choices():
    env, ctx = gridmap_root()
    lm = FakeLM(lambda req, i: "Next action: ```backtrack S0```")
    policy = DistilledPolicy(DistilledPolicyOptions(model=lm, n_samples=2, constrain=True), 2)
    props = asyncio.run(policy.propose(ctx))
    assert lm.calls[0].sampling.choices == env.legal_actions()   # no backtracks in a tree
    assert [p.action for p in props] == [env.legal_actions()[0]]


def test_constrained_value_roles_end_every_grading_sample_with_a_status_code():
    """value.constrain: the SA value's and the judge's samples carry the status letters as
    choices (the rubric and the arguments stay free) and all parse; unconstrained, the same
    unreadable model leaves the value unknown."""
    _, ctx = gridmap_root()
    letters = list(STATUS_LETTERS)
    for constrain in (True, False):
        lm = FakeLM(lambda req, i: "the agent goes somewhere")
        options = ValueOptions(constrain=constrain, single={"n": 3, "rubric": True},
                               debate={"judge_samples_per_order": 2})
        single = asyncio.run(SingleValue(lm, options).evaluate(ctx))
        debate = asyncio.run(DebateValue(lm, options).evaluate(ctx))
        graded = [c for c in lm.calls if c.role in ("value", "judge")]
        free = [c for c in lm.calls if c.role in ("rubric", "debate")]
        assert [c.role for c in graded] == ["value", "judge", "judge"] and len(free) == 3
        assert all(c.sampling.choices is None for c in free)
        if constrain:
            assert all(c.sampling.choices == letters and c.sampling.answer_phrase == STATUS_PHRASE
                       for c in graded)
            # the fake answers with the first choice: every sample reads as A
            assert single.v == debate.v == SCALES["unit"]["A"]
            assert single.n_parse_fail == debate.n_parse_fail == 0
        else:
            assert all(c.sampling.choices is None for c in graded)
            assert single.v is None and debate.v is None and single.all_failed


def test_constrained_status_codes_on_the_hf_backend(lm):
    """The tiny random model, constrained, writes a status code the value parser reads."""
    _, ctx = gridmap_root()
    record = asyncio.run(SingleValue(lm, ValueOptions(
        constrain=True, single={"n": 4, "max_tokens": 24, "rubric": False})).evaluate(ctx))
    assert record.n_parse_fail == 0 and record.v is not None
    assert all(text.rstrip().endswith("```") and STATUS_PHRASE in text
               for _, text in record.samples)


def test_distilled_choices_add_backtracks_to_earlier_states_in_el_only():
    task = gridmap_task()
    env = make_for(task)
    env.reset(task)
    legal = env.legal_actions()
    # each earlier state by its id, and the bare backtrack (the state before: S2)
    assert answer_choices(env, "el", [0, 2, 5]) == [*legal, "backtrack S0", "backtrack S2",
                                                     "backtrack"]
    assert answer_choices(env, "el", [0]) == legal          # nothing to go back to
    assert answer_choices(env, "il", [0, 2, 5]) == legal
    hill = next(t for t in resolve("exploration-v1:test") if t.env == "hillsearch")
    hill_env = make_for(hill)
    hill_env.reset(hill)
    assert answer_choices(hill_env, "el", [0, 1]) is None


def test_constrain_option_errors_name_the_option():
    with pytest.raises(ValueError, match="constrain"):
        build_agent("distilled", model="fake:x", constrain="yes")
    with pytest.raises(ValueError, match="constrain"):
        build_agent("react", model="fake:x", constrain=1)
    with pytest.raises(OptionsError, match="policy.constrain"):
        parse_options(RoleOptions, {"model": "fake:x", "policy": {"constrain": "maybe"}}, "mcts")
    with pytest.raises(OptionsError, match="policy.constrain: read only by LM roles"):
        parse_options(RoleOptions, {"roles": "heuristic", "policy": {"constrain": True}}, "mcts")
    with pytest.raises(OptionsError, match="value.constrain: read only by LM roles"):
        parse_options(AgentOptions, {"roles": "heuristic", "value": {"constrain": True}}, "mcts")
    with pytest.raises(OptionsError, match="value.constrain"):
        parse_options(AgentOptions, {"model": "fake:x", "value": {"constrain": "often"}}, "mcts")
    assert DistilledPolicyOptions(model="fake:x", constrain=True).constrain


def test_constrained_distilled_agent_never_takes_an_invalid_action(tmp_path, tiny_model_dir):
    """The untrained tiny model, run through clew eval on a grid map: free, its answers are
    invalid actions; constrained, every action is legal."""
    outcomes = {}
    for constrain in (False, True):
        cfg = EvalConfig(agent="distilled", suite="gridmap-mini:test",
                         out=str(tmp_path / f"run-{constrain}"), limit=1, max_steps=4,
                         agent_options={"model": f"hf:{tiny_model_dir}", "max_tokens": 24,
                                        "constrain": constrain})
        run_dir, _ = evaluate(cfg, progress=False)
        [rec] = run_dir.episodes()
        outcomes[constrain] = rec
    free, constrained = outcomes[False], outcomes[True]
    assert free["outcome"]["invalid"] > 0
    assert constrained["outcome"]["invalid"] == 0 and constrained["outcome"]["steps"] == 4
    assert constrained["parses"]["policy"]["failures"] == 0


def test_constrained_distilled_agent_with_a_fake_model_may_backtrack():
    task = gridmap_task()
    script = ["Next action: ```nowhere```", "Next action: ```backtrack S0```"]
    lm = FakeLM(lambda req, i: script[min(i, 1)])
    rec = asyncio.run(run_episode(DistilledAgent(lm, constrain=True), task, max_steps=2))
    legal = legal_at_start(task)
    assert lm.calls[0].sampling.choices == legal      # S0 has no earlier state
    assert lm.calls[1].sampling.choices[-2:] == ["backtrack S0", "backtrack"]
    assert rec["actions"][0] == legal[0] and rec["outcome"]["backtracks"] == 1


def test_a_bare_backtrack_goes_back_to_the_state_before():
    task = gridmap_task()
    script = ["Next action: ```nowhere```", "Next action: ```nowhere```",
              "Next action: ```backtrack```"]
    lm = FakeLM(lambda req, i: script[min(i, 2)])
    rec = asyncio.run(run_episode(DistilledAgent(lm, constrain=True), task, max_steps=3))
    assert "backtrack" in lm.calls[2].sampling.choices
    assert rec["actions"][2] == "backtrack S1" and rec["outcome"]["backtracks"] == 1
