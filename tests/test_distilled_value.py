"""The learned value (docs/methods/exploratory-learning.md#learned-value): ``value_sft`` chats
from the search's own estimates (never from a search that read the oracle), the reading of
grades, the ``distilled_value`` role returning value records from a model's answers, its
options' errors, a search with learned policy and value recording ``uses_oracle: false``, and
the loop training a value model."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import pytest
from clew.agents.distilled import chat_at
from clew.agents.distilled_value import GRADES, DistilledValue, grade, grade_answer
from clew.agents.lm.fake import FakeLM
from clew.agents.options import DistilledValueOptions, OptionsError
from clew.agents.parsing import parse_estimate
from clew.agents.prompts import task_context
from clew.agents.usage import UsageByRole
from clew.agents.window import ChatWindow
from clew.envs.registry import make_for
from clew.envs.suites import resolve
from clew.loop.pipeline import LoopConfig, run_loop, with_window
from clew.records import RunDir
from clew.reports.diagnose import diagnose_run, summary_lines
from clew.runner.config import ConfigError, EvalConfig, load_config
from clew.runner.evaluate import evaluate
from clew.runner.registry import build_agent
from clew.search.tree import load_tree_dict
from clew.training.datasets import DataConfig, build_datasets
from clew.training.preferences import (
    NO_ORACLE_FLAG,
    NO_OUTCOME,
    NO_TARGET,
    NOT_EXECUTED,
    READ_ORACLE,
    value_sft_rows,
    value_target,
)


# --- grades ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, reason, want", [
    ("Value estimate: ```0.4```", None, 0.4),
    ("value estimate:   ```1.0```", None, 1.0),
    ("Value estimate: 0.35", None, 0.35),
    ("Value estimate: ```0.3```\nlater: Value estimate: ```0.9```", None, 0.9),
    ("Value estimate: ```1.4```", None, None),          # off the unit scale
    ("Value estimate: ```-0.2```", None, None),
    ("Value estimate: ```high```", None, None),
    ("no grade here", None, None),
    ("Value estimate: 0.35", "length", None),           # cut: the number may be cut too
    ("Value estimate: ```0.4```", "length", 0.4),       # a closed fence is complete
])
def test_grades_are_read_from_the_last_label_and_only_on_the_unit_scale(text, reason, want):
    assert parse_estimate(text, reason) == want


def test_a_target_is_graded_to_the_nearest_tenth_and_reads_back():
    assert [grade(x) for x in (0.0, 0.04, 0.06, 0.449, 0.96, 1.0, 1.7, -0.3)] == \
        ["0.0", "0.0", "0.1", "0.4", "1.0", "1.0", "1.0", "0.0"]
    for g in GRADES:
        assert parse_estimate(grade_answer(float(g))) == float(g)


# --- value_sft rows ----------------------------------------------------------------------------
def _value_row(**over):
    row = {"prompt": [{"role": "system", "content": "sys"}, {"role": "user", "content": "u0"},
                      {"role": "assistant", "content": "Next action: ```up```"},
                      {"role": "user", "content": "u1"}],
           "state": "s", "v": 0.3, "q": 0.62, "visits": 3, "value_unknown": False,
           "task_id": "t", "env": "gridmap", "source_run": "r", "episode": "t#0",
           "agent": "mcts-rollout", "t": 2, "node": 5, "depth": 1, "uses_oracle": False}
    return {**row, **over}


def test_value_sft_rows_grade_the_searchs_estimate_and_leave_out_oracle_trees():
    rows, skipped = value_sft_rows([
        _value_row(),
        _value_row(q=None),                              # q unknown: the value v
        _value_row(q=None, v=None, value_unknown=True),  # nothing to grade
        _value_row(uses_oracle=True),
        _value_row(uses_oracle=None),                     # a tree that does not say
    ])
    assert [r["target"] for r in rows] == [0.62, 0.3]
    assert dict(skipped) == {NO_TARGET: 1, READ_ORACLE: 1, NO_ORACLE_FLAG: 1}
    first = rows[0]
    assert first["messages"][-1] == {"role": "assistant", "content": "Value estimate: ```0.6```",
                                     "weight": 1}
    assert [m["weight"] for m in first["messages"][:-1]] == [None, None, 0, None]
    assert [m["content"] for m in first["messages"][:-1]] == ["sys", "u0",
                                                              "Next action: ```up```", "u1"]
    assert (first["kind"], first["subset"], first["turn_index"], first["node"]) == \
        ("value", "value_sft", 2, 5)
    by_v, _ = value_sft_rows([_value_row()], target="v")
    assert by_v[0]["target"] == 0.3 and by_v[0]["messages"][-1]["content"].endswith("```0.3```")


def test_outcome_targets_grade_executed_states_by_how_the_episode_ended():
    rows, skipped = value_sft_rows([
        _value_row(depth=0, success=True, steps_left=3),
        _value_row(depth=0, success=False, steps_left=1),
        _value_row(depth=0, success=None, steps_left=2),    # rooms: no success to end on
        _value_row(success=True, steps_left=None),          # a simulated state, off the path
        _value_row(depth=0, success=True, steps_left=2, uses_oracle=True),
    ], target="outcome", discount=0.9)
    assert [r["target"] for r in rows] == pytest.approx([0.9 ** 3, 0.0])
    assert [r["messages"][-1]["content"] for r in rows] == ["Value estimate: ```0.7```",
                                                            "Value estimate: ```0.0```"]
    assert dict(skipped) == {NO_OUTCOME: 1, NOT_EXECUTED: 1, READ_ORACLE: 1}
    assert value_target(_value_row(success=True, steps_left=0), "outcome") == 1.0
    with pytest.raises(ValueError, match="value_target must be one of q, v, outcome"):
        value_target(_value_row(), "return")


# --- the role --------------------------------------------------------------------------------
def _ctx(steps: int = 1):
    task = resolve("gridmap-mini:test")[0]
    env = make_for(task)
    obs = [env.reset(task).text]
    actions = []
    for _ in range(steps):
        action = str(env.legal_actions()[0])
        obs.append(env.step(action).obs.text)
        actions.append(action)
    return task_context(env, task.id).at(obs, actions, [None] * steps, env=env, seed=7)


def _evaluate(value: DistilledValue, ctx=None):
    usage = UsageByRole()
    rec = asyncio.run(value.evaluate(ctx or _ctx(), usage=usage))
    return rec, usage


def test_the_learned_value_is_the_mean_grade_and_counts_what_it_cannot_read():
    lm = FakeLM(["Value estimate: ```0.2```", "Value estimate: ```0.6```", "no idea"],
                spec="fake:value")
    value = DistilledValue(DistilledValueOptions(model=lm, n_samples=3))
    assert (value.kind, value.uses_oracle, value.method) == ("learned", False, "learned")
    rec, usage = _evaluate(value)
    assert rec.kind == "learned" and rec.v == pytest.approx(0.4)
    assert rec.n_parse_fail == 1 and not rec.all_failed
    assert [s[0] for s in rec.samples] == ["0.2", "0.6", None]
    parses = usage.parses["value"]
    assert (parses.outputs, parses.failures, parses.model) == (3, 1, "fake:value")
    request = lm.calls[0]
    assert request.role == "value" and request.sampling.n == 3
    assert request.sampling.choices is None
    # the chat is the distilled agent's IL chat at the node (the values' prompt), ending on
    # the node's user turn
    assert request.messages == chat_at(_ctx(), "il")
    assert request.messages[-1]["content"].startswith("[S1] OBSERVATION:")


def test_unreadable_answers_make_the_value_unknown_not_zero_and_signed_maps_the_grade():
    rec, usage = _evaluate(DistilledValue(DistilledValueOptions(model=FakeLM(["?", "none"]),
                                                                n_samples=2)))
    assert rec.v is None and rec.all_failed and rec.n_parse_fail == 2
    assert usage.parses["value"].failures == 2
    signed = DistilledValue(DistilledValueOptions(model=FakeLM(["Value estimate: ```0.75```"]),
                                                  n_samples=1), scale="signed")
    assert _evaluate(signed)[0].v == pytest.approx(0.5)


def test_greedy_asks_one_answer_and_constrain_offers_the_grades():
    lm = FakeLM(["Value estimate: ```0.9```"])
    value = DistilledValue(DistilledValueOptions(model=lm, n_samples=8, temperature=0,
                                                 constrain=True,
                                                 window={"keep_first_pairs": 0,
                                                         "keep_last_pairs": 1,
                                                         "keep_system": False}))
    rec, _ = _evaluate(value, _ctx(2))
    assert rec.v == pytest.approx(0.9)
    sampling = lm.calls[0].sampling
    assert sampling.n == 1 and sampling.temperature == 0
    assert sampling.choices == list(GRADES) and sampling.answer_phrase == "Value estimate:"
    # the window cuts the chat as the data's window cut the value prompts: the last turn alone
    assert [m["role"] for m in lm.calls[0].messages] == ["user"]
    assert lm.calls[0].messages[0]["content"].startswith("[S2] OBSERVATION:")


# --- options -----------------------------------------------------------------------------------
@pytest.mark.parametrize("options, where", [
    ({"distilled_value": {"model": "fake:x", "n_samples": 0}}, "distilled_value.n_samples"),
    ({"distilled_value": {"model": "fake:x", "format": "xx"}}, "distilled_value.format"),
    ({"distilled_value": {"n_samples": 2}}, "distilled_value.model"),
    ({"distilled_value": {"model": "nospec"}}, "distilled_value.model"),
    ({"distilled_value": {"model": "fake:x", "samples": 3}}, "distilled_value.samples"),
    ({"distilled_value": "fake:x", "value": {"noise": 0.1}}, "value.noise"),
    ({"distilled_value": "fake:x", "value": {"estimate": "rollout"}}, "value.estimate"),
    ({"distilled_value": "fake:x", "model": "fake:y", "value": {"kind": "debate"}},
     "value.kind"),
    ({"distilled_value": "fake:x", "model": "fake:y", "role_models": {"value": "fake:z"}},
     "role_models.value"),
    ({"distilled_value": "fake:x", "reflection": {"policy": {"enabled": False}}},
     "reflection.value.enabled"),
])
def test_bad_distilled_value_options_are_one_error_naming_them(options, where):
    with pytest.raises(OptionsError, match=f"option {where}"):
        build_agent("mcts", roles="heuristic", **options)


def test_a_search_with_learned_policy_and_value_is_learned_and_reads_no_oracle():
    agent = build_agent("mcts", distilled_policy="fake:p", distilled_value="fake:v",
                        value={"scale": "signed"})
    assert isinstance(agent.value, DistilledValue) and agent.value.scale == "signed"
    assert agent.kind == "learned+search" and agent.uses_oracle is False
    assert agent.info["value_model"] == "fake:v" and agent.info["value_format"] == "il"
    assert agent.info["value_kind"] == "learned"
    # with the heuristic (oracle) value beside a learned policy the agent says it reads one
    assert build_agent("mcts", distilled_policy="fake:p").uses_oracle is True


def test_a_family_window_reaches_the_distilled_value_too():
    window = ChatWindow(keep_first_pairs=0, keep_last_pairs=1, keep_system=False)
    opts = {"distilled_policy": {"model": "hf:m"}, "distilled_value": {"model": "hf:v"}}
    out = with_window(opts, "mcts", window)
    assert out["distilled_value"] == {"model": "hf:v", "window": window.model_dump()}
    assert out["distilled_policy"]["window"] == window.model_dump()


# --- end to end --------------------------------------------------------------------------------
def _sent(run_dir: RunDir, role: str) -> set[str]:
    """The chats a run's episodes sent to a role's model, from its recording (RUN/lm/)."""
    out = set()
    for path in (Path(run_dir.path) / "lm").glob("*.json.gz"):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        for call in doc["calls"]:
            if call["role"] == role:
                out.add(json.dumps([{"role": m["role"], "content": doc["texts"][m["content"]]}
                                    for m in call["messages"]]))
    return out


def test_the_values_prompts_are_the_chats_the_learned_value_was_sent(tmp_path):
    """A search with learned policy and value through clew eval: its trees say uses_oracle
    false; every value row's prompt is a chat the value model was sent at that node, and
    value_sft grades the search's estimates."""
    grades = ["Value estimate: ```0.3```", "Value estimate: ```0.7```"]
    cfg = EvalConfig(agent="mcts", suite="gridmap-mini:test", out=str(tmp_path / "run"),
                     limit=1, max_episode_steps=3, agent_options={
                         "search": {"n_simulations": 5, "branching_factor": 2},
                         "distilled_policy": {"model": "fake:Next action: ```right```|"
                                                       "Next action: ```down```",
                                              "n_samples": 2},
                         "distilled_value": {"model": "fake:" + "|".join(grades),
                                             "n_samples": 2}})
    run_dir, agg = evaluate(cfg, progress=False)
    assert agg["agent_kind"] == "learned+search"
    rec = run_dir.episodes()[0]
    assert rec["parses"]["value"]["outputs"] > 0
    trees = [load_tree_dict(p) for p in sorted(run_dir.tree_dir(rec["key"]).glob("*.json.gz"))]
    assert trees and all(t["meta"]["uses_oracle"] is False for t in trees)
    assert all(t["meta"]["value_kind"] == "learned" for t in trees)
    datasets, report = build_datasets(DataConfig(runs=[str(run_dir.path)],
                                                 subsets=["values", "value_sft"]))
    sent = _sent(run_dir, "value")
    # nodes the value model graded (others: terminal, worth 0 by the episode rules)
    graded = {(t["meta"]["t"], n["node_id"]) for t in trees for n in t["nodes"]
              if (n.get("value_record") or {}).get("kind") == "learned"}
    evaluated = [row for row in datasets["values"] if (row["t"], row["node"]) in graded]
    assert evaluated and all(json.dumps(row["prompt"]) in sent for row in evaluated)
    chats = datasets["value_sft"]
    assert len(chats) == len(datasets["values"]) and report["value_sft_skipped"] == {}
    for row in chats:
        assert 0 <= row["target"] <= 0.7 + 1e-9   # grades read, 0 at the step limit
        assert row["messages"][-1]["content"] == grade_answer(row["target"])

    # clew diagnose measures the learned value against ground truth, as its own kind
    doc = diagnose_run(run_dir.path)
    learned = doc["value"]["learned"]
    assert learned["all"]["n"] == len(graded) and learned["all"]["mae"] is not None
    assert sum(b["n"] for b in learned["reliability"]) == len(graded)
    assert doc["configured"]["value_kind"] == "learned"
    assert any(line.startswith("  value learned: n ") for line in summary_lines(doc))


def test_value_sft_from_an_oracle_search_is_empty_and_says_why(tmp_path):
    cfg = EvalConfig(agent="mcts-heuristic", suite="gridmap-mini:test", out=str(tmp_path / "r"),
                     limit=1, max_episode_steps=2)
    run_dir, _ = evaluate(cfg, progress=False)
    datasets, report = build_datasets(DataConfig(runs=[str(run_dir.path)],
                                                 subsets=["values", "value_sft"]))
    assert len(datasets["values"]) > 0 and len(datasets["value_sft"]) == 0
    assert report["value_sft_skipped"] == {READ_ORACLE: len(datasets["values"])}


# --- the loop ----------------------------------------------------------------------------------
def test_the_loop_refuses_a_value_model_without_its_data_subset(tmp_path):
    with pytest.raises(ConfigError, match="data.subsets"):
        load_config(LoopConfig, "demo", ["distill=[el,value]", "data.subsets=[el,il_all]"],
                    base={"out": str(tmp_path / "loop")}, presets="loop")


@pytest.mark.slow
def test_the_loop_trains_a_value_model_that_mcts_uses(tmp_path):
    """distill: [value] with an oracle-free search: round 1 trains a value model on value_sft,
    and an MCTS with it as distilled_value ({value}) is evaluated, learned and oracle-free."""
    spec = {"label": "mcts-learned-value", "agent": "mcts", "agent_options": {
        "roles": "heuristic", "search": {"n_simulations": 3, "branching_factor": 2},
        "distilled_value": {"model": "hf:{value}", "n_samples": 2, "max_tokens": 16,
                            "constrain": True}}}
    cfg = load_config(LoopConfig, "demo", [
        "limit_train=2", "limit_test=1", "limit_repeats=1", "limit_test_steps=3",
        "train.sft.max_steps=2", "distill=[value]", "data.subsets=[values,value_sft]",
        "baselines=[]",
        "train_suite=gridmap-mini:train", "test_suite=gridmap-mini:test"],
        base={"out": str(tmp_path / "loop")}, presets="loop")
    data = cfg.model_dump()
    # the demo's grid-map family searches its own 270 maps with its own walks: not here
    gridmap = {**next(f for f in data["families"] if f["name"] == "gridmap"),
               "search_options": {}, "train_suite": None}
    data.update(families=[gridmap],
                round_agents=[spec], search={"label": "mcts-rollout", "agent": "mcts-rollout"})
    cfg = LoopConfig.model_validate(data)
    said: list[str] = []
    run_loop(cfg, say=said.append, html=False)
    r1 = Path(cfg.out) / "round-1"
    assert (r1 / "models" / "value" / "config.json").exists()
    assert not (r1 / "models" / "el").exists()
    assert (r1 / "data" / "value_sft").exists()
    run = RunDir(r1 / "eval" / "mcts-learned-value" / "gridmap")
    rec = run.episodes()[0]
    assert rec["agent_kind"] == "learned+search" and rec["parses"]["value"]["outputs"] > 0
    trees = [load_tree_dict(p) for p in run.tree_dir(rec["key"]).glob("*.json.gz")]
    assert trees and all(t["meta"]["uses_oracle"] is False for t in trees)
