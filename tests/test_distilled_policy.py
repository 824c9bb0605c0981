"""MCTS with a distilled (fine-tuned) model as its policy and the heuristic value
(docs/methods/exploratory-learning.md#as-a-search-policy): runs through ``clew eval``, the
tree's edges are the model's answers with frequency priors, its prompts are the distilled
agent's chats, bad options are one error naming them, and the tiny model runs end to end."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest
from clew.agents.distilled import DistilledAgent, DistilledPolicy, chat_at
from clew.agents.lm.fake import FakeLM
from clew.agents.options import OptionsError
from clew.agents.policy import Proposal, mix_uniform
from clew.envs.suites import resolve
from clew.records import RunDir
from clew.runner.config import ConfigError, EvalConfig
from clew.runner.episodes import run_episode
from clew.runner.evaluate import check_agent, evaluate
from clew.runner.registry import build_agent
from clew.search.tree import load_tree_dict


def answers(*actions: str) -> str:
    """A ``fake:`` spec whose samples cycle through the answer lines of ``actions``."""
    return "fake:" + "|".join(f"Next action: ```{a}```" for a in actions)


def run(tmp_path: Path, suite: str, model: str, uniform_mix: float = 0.0, **extra) -> RunDir:
    options = {"roles": "heuristic", "search": {"n_simulations": 6, "branching_factor": 3},
               "distilled_policy": {"model": model, "n_samples": 4, "max_tokens": 32,
                                    "uniform_mix": uniform_mix},
               "label": "mcts-distilled"}
    cfg = EvalConfig(agent="mcts", suite=suite, out=str(tmp_path / "run"), limit=1,
                     max_steps=3, agent_options=options, **extra)
    run_dir, agg = evaluate(cfg, progress=False)
    assert agg["episodes"] == 1 and agg["agent_kind"] == "learned+search"
    return run_dir


def trees(run_dir: RunDir) -> list[dict]:
    key = run_dir.episodes()[0]["key"]
    return [load_tree_dict(p) for p in sorted(run_dir.tree_dir(key).glob("*.json.gz"))]


# samples per expansion: A, A, B and one backtrack (not a tree action: a parse failure)
@pytest.mark.parametrize("suite, a, b", [
    ("gridmap-mini:test", "right", "down"),
    ("textminigrid-v1:test", "Turn Left", "Go Forward"),
])
def test_mcts_with_distilled_policy_and_heuristic_value_through_clew_eval(tmp_path, suite, a, b):
    run_dir = run(tmp_path, suite, answers(a, a, b, "backtrack S0"))
    rec = run_dir.episodes()[0]
    assert rec["agent"] == "mcts-distilled" and rec["agent_kind"] == "learned+search"
    assert rec["outcome"]["steps"] == 3 and set(rec["actions"]) <= {a, b}
    # every completion was read and counted under the policy role; backtracks are failures
    parses = rec["parses"]["policy"]
    assert parses["outputs"] > 0 and parses["failures"] * 4 == parses["outputs"]
    found = trees(run_dir)
    assert len(found) == 3
    expanded = 0
    for tree in found:
        meta = tree["meta"]
        assert meta["agent_kind"] == "learned+search" and meta["policy_kind"] == "distilled"
        assert meta["policy_format"] == "el" and meta["value_kind"] == "heuristic"
        assert meta["policy_model"].startswith("fake:")
        for node in tree["nodes"]:
            if not node["expanded"]:
                continue
            expanded += 1
            edges = [tree["edges"][e] for e in node["edges"]]
            assert [(e["action"], e["count"]) for e in edges] == [(a, 2), (b, 1)]
            assert [e["prior"] for e in edges] == pytest.approx([2 / 3, 1 / 3])
            assert all(e["raw"].startswith("Next action: ```") for e in edges)
    assert expanded >= 3


class _Moves:
    """The two env methods :func:`mix_uniform` reads."""

    def canonical(self, a: str) -> str:
        return a.lower()

    def is_stop(self, a: str) -> bool:
        return False


def test_mix_uniform_spreads_its_share_over_the_legal_moves():
    props = [Proposal("right", "right", "Next action: ```right```", 2, 2 / 3),
             Proposal("down", "down", "Next action: ```down```", 1, 1 / 3)]
    legal = ["up", "down", "left", "right"]
    out = mix_uniform(props, legal, 0.5, 3, _Moves())
    # right 1/3 + 1/8, down 1/6 + 1/8, up and left 1/8 each: up wins the tie (legal order)
    assert [p.action for p in out] == ["right", "down", "up"]
    assert [p.prior for p in out] == pytest.approx([11 / 21, 7 / 21, 3 / 21])
    assert out[2].raw == "up" and out[2].count == 0 and out[0].raw == props[0].raw
    assert [p.prior for p in props] == pytest.approx([2 / 3, 1 / 3])   # inputs untouched
    # share 0, or an env with no legal list (HillSearch, MaxSatSearch): the model's priors alone
    for share, moves in ((0.0, legal), (0.5, [])):
        assert [(p.action, p.prior) for p in mix_uniform(props, moves, share, 3, _Moves())] == \
            [(p.action, p.prior) for p in props]
    # nothing parsed: the legal moves alone, evenly
    assert [(p.action, p.prior) for p in mix_uniform([], legal, 0.5, 2, _Moves())] == \
        [("up", 0.5), ("down", 0.5)]


def test_uniform_mix_gives_the_search_a_move_the_model_never_names(tmp_path):
    model = answers("right", "right", "down", "backtrack S0")
    names = set()
    for mix in (0.0, 0.5):
        run_dir = run(tmp_path / str(mix), "gridmap-mini:test", model, uniform_mix=mix)
        root = trees(run_dir)[0]
        edges = [root["edges"][e] for e in root["nodes"][0]["edges"]]
        assert sum(e["prior"] for e in edges) == pytest.approx(1.0)
        assert [e["action"] for e in edges][:2] == ["right", "down"]
        names.add(frozenset(e["action"] for e in edges) - {"right", "down"})
    assert len(names) == 2 and frozenset() in names     # only the mix adds a move


def test_policy_chat_two_steps_deep_is_the_distilled_agents_chat_after_those_steps():
    task = resolve("gridmap-mini:test")[0]
    script = ["I go right.\nNext action: ```right```", "Down now.\nNext action: ```down```"]
    policy_lm = FakeLM(lambda req, i: script[i % 2], spec="fake:policy")
    agent = build_agent("mcts", roles="heuristic", seed=3,
                        search={"n_simulations": 6, "branching_factor": 2},
                        distilled_policy={"model": policy_lm, "n_samples": 2})
    assert isinstance(agent.policy, DistilledPolicy) and agent.kind == "learned+search"
    asyncio.run(run_episode(agent, task, max_steps=4))
    deep = [c for c in policy_lm.calls
            if sum(m["role"] == "assistant" for m in c.messages) == 2]
    assert deep, "no expansion two steps deep"
    call = deep[0]
    assert call.sampling.n == 2 and call.role == "policy"
    taken = [m["content"] for m in call.messages if m["role"] == "assistant"]

    # the distilled agent, made to take the same two actions for real, then asked for a third
    agent_lm = FakeLM([*taken, "Next action: ```up```"], spec="fake:agent")
    asyncio.run(run_episode(DistilledAgent(agent_lm), task, max_steps=3))
    assert agent_lm.calls[2].messages == call.messages
    assert call.messages[0]["role"] == "system" and "backtrack S<k>" in call.messages[0]["content"]
    assert call.messages[-1]["content"].startswith("[S2] OBSERVATION:")   # two forward turns


def test_chat_shows_a_rejected_action_as_the_invalid_turn():
    from clew.agents.prompts import task_context
    from clew.envs.registry import make_for

    task = resolve("gridmap-mini:test")[0]
    env = make_for(task)
    first = env.reset(task)
    moves = [m for m in ("up", "down", "left", "right") if m not in env.legal_actions()]
    bad = moves[0] if moves else "jump"
    step = env.step(bad)
    assert not step.valid
    ctx = task_context(env, task.id).at([first.text, step.obs.text], [bad], [None], env=env,
                                        valid=[False])
    chat = chat_at(ctx)
    assert chat[2] == {"role": "assistant", "content": f"Next action: ```{bad}```"}
    assert chat[3]["content"].startswith("[S0] Your previous action was invalid.")
    assert chat[3]["content"].endswith(f"PREVIOUS ACTION: {bad}")


@pytest.mark.parametrize("options, named", [
    ({"distilled_policy": {"model": "fake:x", "n_samples": 0}}, "distilled_policy.n_samples"),
    ({"distilled_policy": {"model": "fake:x", "format": "xx"}}, "distilled_policy.format"),
    ({"distilled_policy": {"format": "el"}}, "distilled_policy.model"),
    ({"distilled_policy": {"model": "nospec"}}, "distilled_policy.model"),
    ({"distilled_policy": {"model": "fake:x", "sample": 3}}, "distilled_policy.sample"),
    ({"distilled_policy": "fake:x", "policy": {"prior": "uniform"}}, "policy.prior"),
    ({"distilled_policy": "fake:x", "model": "fake:y", "policy": {"temperature": 0.5}},
     "policy.temperature"),
    ({"distilled_policy": "fake:x", "model": "fake:y", "role_models": {"policy": "fake:z"}},
     "role_models.policy"),
    ({"distilled_policy": "fake:x", "reflection": {}}, "reflection.policy.enabled"),
    ({"distilled_policy": {"model": "fake:x", "uniform_mix": 1.5}}, "distilled_policy.uniform_mix"),
])
def test_a_bad_option_is_one_error_naming_it(options, named):
    with pytest.raises(OptionsError) as err:
        build_agent("mcts", **options)
    lines = str(err.value).splitlines()
    assert len(lines) == 1 and f"option {named}:" in lines[0], lines
    with pytest.raises(ConfigError, match=f"option {named.replace('.', '[.]')}:"):
        check_agent(EvalConfig(agent="mcts", suite="gridmap-mini:test", agent_options=options))


def test_options_read_by_the_distilled_policy_are_never_flagged():
    # the section's own n_samples / temperature, with heuristic or LM roles for the rest
    dp = {"model": "fake:x", "n_samples": 3, "temperature": 0.3, "top_p": 0.5, "format": "il",
          "max_history_pairs": 4, "max_tokens": 16}
    heuristic = build_agent("mcts", distilled_policy=dp, value={"noise": 0.1})
    assert heuristic.kind == "learned+search" and heuristic.value.method == "heuristic"
    assert heuristic.policy.n == 3 and heuristic.policy.format == "il"
    lm = build_agent("mcts", model="fake:y", distilled_policy=dp,
                     reflection={"policy": {"enabled": False}})
    assert lm.kind == "learned+search" and lm.value.method == "single"
    assert not lm.policy_memory and lm.value_memory
    bare = build_agent("mcts", distilled_policy="fake:x")     # a spec string is the model
    assert bare.info["policy_model"] == "fake:x" and bare.info["roles"] == "heuristic"
    assert build_agent("mcts", distilled_policy=None).kind == "heuristic"


def test_preset_needs_the_model_as_an_override():
    with pytest.raises(OptionsError, match="option distilled_policy.model: Field required"):
        build_agent("mcts-distilled-policy")
    agent = build_agent("mcts-distilled-policy", distilled_policy={"model": "fake:x"})
    assert agent.name == "mcts-distilled-policy" and agent.kind == "learned+search"
    assert type(agent.value).__name__ == "HeuristicValue"


def test_tiny_model_as_the_policy_end_to_end(tmp_path, tiny_model_dir):
    run_dir = run(tmp_path, "gridmap-mini:test", f"hf:tiny:{tiny_model_dir}",
                  parse_failure_rate=None)
    rec = run_dir.episodes()[0]
    assert rec["outcome"]["steps"] >= 1 and "failure" not in rec["outcome"]
    assert rec["usage"]["policy"]["calls"] >= 1
    assert rec["parses"]["policy"]["outputs"] == 4 * rec["usage"]["policy"]["calls"]
    assert all(not math.isnan(e.get("prior", 0.0)) for t in trees(run_dir) for e in t["edges"])
