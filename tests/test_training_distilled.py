"""The distilled agent (docs/methods/exploratory-learning.md#distilled-agent) against the real runner: its prompts equal the EL
training chats (Appendix C 8), and backtrack targets follow ``episode.path`` (Appendix C 9)."""

from __future__ import annotations

import asyncio

import pytest
from clew.agents.distilled import DistilledAgent, decide, parse_backtrack
from clew.agents.lm.fake import FakeLM
from clew.agents.parsing import answer_text
from clew.agents.window import ChatWindow
from clew.envs import registry
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent
from clew.training.flatten import el_turns, flatten_episode, teacher_force
from training_toys import TreeEnv, raw, worked_example


@pytest.fixture(autouse=True)
def toy_env(monkeypatch):
    monkeypatch.setitem(registry.ENVS, "toy-tree", registry.EnvEntry("training_toys:TreeEnv"))


def test_answer_parsing_follows_the_answer_phrase():
    assert answer_text("I think `A` is bad.\nNext action: ```B```") == "B"
    assert answer_text("Next action: ```A``` then Next action:\n```\nC\n```") == "C"
    assert answer_text("no phrase ```A``` and ```B```") == "B"
    assert answer_text("") is None
    assert parse_backtrack("backtrack S3") == (True, 3)
    assert parse_backtrack("Backtrack") == (True, None)
    assert parse_backtrack("go back") == (False, None)
    d = decide("Next action: ```backtrack```", [0, 2, 5])
    assert d.info == {"backtrack": 2} and d.action == "backtrack S2"


def test_replayed_el_chat_is_what_the_agent_sees_at_inference():
    tree, record, task = worked_example()
    items = flatten_episode(record, {0: tree})
    chat = teacher_force(TreeEnv(), task, el_turns(items), root=tree.root)
    script = [m["content"] for m in chat.messages if m["role"] == "assistant"]
    lm = FakeLM(script)
    agent = DistilledAgent(lm, window={"keep_last_pairs": None})
    rec = asyncio.run(run_episode(agent, task, max_steps=10))
    assert rec["actions"] == ["A", "C", "backtrack S0", "B"]
    assert rec["outcome"]["success"] is True and rec["outcome"]["steps"] == 4
    # the prompt of the last request is the training chat without its target turn
    assert lm.calls[-1].messages == chat.messages[:-1]
    assert lm.calls[-1].sampling.temperature == 0.7 and lm.calls[-1].sampling.n == 1


def test_backtrack_off_the_path_is_invalid_and_valid_one_keeps_the_clock():
    _, _, task = worked_example()
    task = type(task)(task.env, {**task.params, "goal": "BG"}, id="t")
    script = ["Next action: ```A```", "Next action: ```C```",
              "Next action: ```backtrack S5```",       # not on the path: invalid step
              "Next action: ```backtrack S1```",       # valid: back to <s1>
              "Next action: ```backtrack```",          # bare: the state before, S0
              "Next action: ```B```", "Next action: ```G```"]
    lm = FakeLM(script)
    rec = asyncio.run(run_episode(DistilledAgent(lm), task, max_steps=10))
    valid = [s["valid"] for s in rec["steps"]]
    assert valid == [True, True, False, True, True, True, True]
    assert rec["outcome"]["success"] is True
    prompts = [c.messages[-1]["content"] for c in lm.calls]
    assert prompts[3].startswith("[S2] Your previous action was invalid.")
    assert prompts[4].startswith("[S1] You returned to an earlier state.\nOBSERVATION:\n<s1>")
    assert prompts[5].startswith("[S0] You returned to an earlier state.\nOBSERVATION:\n<o0>")
    # new forward states continue the runner's numbering
    assert prompts[6].startswith("[S3] OBSERVATION:\n<s2>")


def test_history_elision_keeps_first_two_and_last_pairs():
    msgs = [{"role": "system", "content": "s"}]
    for i in range(10):
        msgs += [{"role": "user", "content": f"u{i}"}, {"role": "assistant", "content": f"a{i}"}]
    window = ChatWindow()                                    # the default: 2 + 6
    kept = [m["content"] for m in window.apply(msgs)]
    assert kept == ["s", "u0", "a0", "u1", "a1"] + [x for i in range(4, 10)
                                                    for x in (f"u{i}", f"a{i}")]
    prompt = msgs + [{"role": "user", "content": "u10"}]   # the pending turn counts as a pair
    assert [m["content"] for m in window.apply(prompt)][-3:] == ["u9", "a9", "u10"]
    assert len(window.apply(prompt)) == 1 + 2 * 8 - 1
    assert ChatWindow(keep_last_pairs=None).apply(msgs) == msgs


@pytest.mark.parametrize("keep_first,keep_last,keep_system",
                         [(2, 2, True), (0, 1, True), (0, 1, False)])
def test_elided_prompts_at_inference_equal_elided_training_samples(keep_first, keep_last,
                                                                   keep_system):
    """With history elision on, every request of the agent is its training sample's context,
    down to the current turn alone (keep_first 0, keep_last 1), without the system turn."""
    from clew.search.tree import Tree
    from clew.training.flatten import make_samples
    from training_toys import raw as rawc

    tree0, record, task = worked_example()
    tree1 = Tree.with_root("<s2>")
    g = tree1.new_edge(tree1.root, "G", "G", raw=rawc("G"), prior=0.8)
    h = tree1.new_edge(tree1.root, "H", "H", raw=rawc("H"), prior=0.2)
    for e, obs in ((g, "<s4>"), (h, "<s6>")):
        tree1.new_node(tree1.root, e, obs=obs).value = 0.3
    tree1.traversals, tree1.decision_kind, tree1.decision_edges = [[0], [1]], "single", [1]
    task = type(task)(task.env, {**task.params, "goal": "BH"}, id="ex3")
    record = {**record, "task": task.to_dict(), "actions": ["B", "H"],
              "steps": record["steps"] + [{"action": "H", "valid": True, "obs": "<s6>"}]}
    chat = teacher_force(TreeEnv(), task, el_turns(flatten_episode(record, {0: tree0, 1: tree1})),
                         root=tree0.root)
    window = ChatWindow(keep_first_pairs=keep_first, keep_last_pairs=keep_last,
                        keep_system=keep_system)
    samples, _ = make_samples(chat, window=window)
    assert len(samples) == 7
    lm = FakeLM([m["content"] for m in chat.messages if m["role"] == "assistant"])
    agent = DistilledAgent(lm, window=window.model_dump())    # the one window of data and agent
    asyncio.run(run_episode(agent, task, max_steps=10))
    assert len(lm.calls) == 7
    for call, sample in zip(lm.calls, samples):
        context = [{k: v for k, v in m.items() if k != "weight"} for m in sample.messages[:-1]]
        assert call.messages == context
    if keep_first == 0:     # the current user turn, after the system turn if kept
        assert [[m["role"] for m in c.messages] for c in lm.calls] == (
            [["system", "user"] if keep_system else ["user"]] * 7)


def test_history_options_that_drop_the_current_turn_are_errors():
    with pytest.raises(ValueError, match="keep_last_pairs"):
        DistilledAgent(FakeLM(["x"]), window={"keep_last_pairs": 0})
    with pytest.raises(ValueError, match="max_history_pairs .1. must be greater than "
                                         "keep_first_pairs .2."):
        DistilledAgent(FakeLM(["x"]), max_history_pairs=1)     # the window's old form
    with pytest.raises(ValueError, match="keep_first_pairs"):
        build_agent("mcts", roles="heuristic",
                    distilled_policy={"model": "fake:x", "max_history_pairs": 2,
                                      "keep_first_pairs": 2})


def test_the_windows_old_options_are_read_with_a_warning(capsys):
    agent = build_agent("distilled", model=FakeLM(["x"]), max_history_pairs=1, keep_first_pairs=0,
                        keep_system=False)
    assert agent.window == ChatWindow(keep_first_pairs=0, keep_last_pairs=1, keep_system=False)
    err = capsys.readouterr().err
    assert "warning: distilled agent: max_history_pairs is deprecated" in err and "window" in err
    policy = build_agent("mcts", roles="heuristic",
                         distilled_policy={"model": "fake:x", "max_history_pairs": None})
    assert policy.policy.options.window.keep_last_pairs is None


def test_registered_as_distilled():
    agent = build_agent("distilled", model="fake:Next action: ```A```", format="il")
    assert agent.kind == "learned" and agent.format == "il"
    with pytest.raises(ValueError, match="format"):
        build_agent("distilled", model="fake:x", format="xx")


def test_il_format_has_no_backtrack_or_assessment():
    _, _, task = worked_example()
    lm = FakeLM([raw("B")])
    asyncio.run(run_episode(DistilledAgent(lm, format="il"), task, max_steps=3))
    system = lm.calls[0].messages[0]["content"]
    assert "backtrack" not in system and "Assessment" not in system


class CountingLM(FakeLM):
    """A fake model with a context window: one token per character."""

    def count_tokens(self, messages):
        return sum(len(m["content"]) for m in messages)


def test_history_shrinks_to_fit_the_model_context():
    _, _, task = worked_example()
    task = type(task)(task.env, {**task.params, "goal": "none"}, id="long")
    moves = ["A", "backtrack S0"] * 6
    lm = CountingLM([f"Next action: ```{m}```" for m in moves], context_length=1400)
    agent = DistilledAgent(lm, max_tokens=10, max_history_pairs=None)
    rec = asyncio.run(run_episode(agent, task, max_steps=len(moves)))
    assert rec["outcome"]["steps"] == len(moves)
    sizes = [lm.count_tokens(c.messages) for c in lm.calls]
    assert max(sizes) <= 1400 - 10
    full = [m for m in lm.calls[-1].messages]
    assert full[0]["role"] == "system" and "[S6] OBSERVATION" in full[-1]["content"]
    assert len(lm.calls[-1].messages) < 2 * len(moves)  # something was cut
    assert any("left out to fit the context" in m["content"] for m in full)  # and marked


# --- the trail (docs/methods/exploratory-learning.md#the-trail) -----------------------------------
def test_the_trail_shows_the_path_and_the_branches_left_with_their_best_estimate():
    from clew.agents.distilled import Trail
    trail = Trail()
    trail.forward(1, "A")
    trail.assess(1, "Assessment: fine (progress estimate: 0.40)\n\nNext action: ```C```")
    trail.forward(2, "C")
    trail.assess(2, "Assessment: bad (progress estimate: 0.10)")
    assert trail.line() == "PATH: S0 -A-> S1 -C-> S2"
    trail.back(0)
    assert trail.line() == "PATH: S0\nLEFT HERE: A (best 0.40)"
    trail.back(7)                                   # not on the path: nothing changes
    for k in range(3, 15):
        trail.forward(k, "x")
    assert trail.line().startswith("PATH: S0 ... S6 -x-> S7") and trail.line().endswith("S14")


def test_with_the_trail_the_agents_prompts_equal_the_training_chat():
    tree, record, task = worked_example()
    items = flatten_episode(record, {0: tree})
    chat = teacher_force(TreeEnv(), task, el_turns(items), root=tree.root, trail=True)
    users = [m["content"] for m in chat.messages if m["role"] == "user"]
    assert users[0].endswith("PATH: S0") and "PATH: S0 -<canonical A>-> S1" in users[1]
    returned = next(u for u in users if "returned" in u)
    assert "LEFT HERE: <canonical A>" in returned
    script = [m["content"] for m in chat.messages if m["role"] == "assistant"]
    lm = FakeLM(script)
    agent = DistilledAgent(lm, window={"keep_last_pairs": None, "trail": True})
    asyncio.run(run_episode(agent, task, max_steps=10))
    assert lm.calls[-1].messages == chat.messages[:-1]


class BudgetTreeEnv(TreeEnv):
    """The toy tree with a step budget: the episode ends after ``budget`` steps."""

    def step(self, action):
        out = super().step(action)
        if self.state.steps >= self.task.params["budget"]:
            self.state.done = True
        return out


def test_an_el_trajectory_past_the_budget_is_cut_there_or_skipped():
    from clew.training.flatten import ReplayError
    tree, record, task = worked_example()
    short = type(task)(task.env, {**task.params, "budget": 2}, id="t")
    with pytest.raises(ReplayError, match="step budget"):
        teacher_force(BudgetTreeEnv(), short, el_turns(flatten_episode(record, {0: tree})),
                      root=tree.root)
    chat = teacher_force(BudgetTreeEnv(), short, el_turns(flatten_episode(record, {0: tree})),
                         root=tree.root, over_budget="cut")
    assert chat.cut_at_budget
    assert [m["content"][-7:] for m in chat.messages if m["role"] == "assistant"] == [
        "```A```", "```C```"]


def test_dead_end_selection_keeps_only_branches_that_ended_lower():
    from clew.training.flatten import select_traversals
    tree, _, _ = worked_example()
    a, c, b = (next(e.edge_id for e in tree.edges if e.action == x) for x in "ACB")
    assert select_traversals(tree) == [[a], [a, c], [b]]
    # the executed child s2 is worth 0.6 (the root has no value): s1 (0.2), s3 (0.1) are lower
    assert select_traversals(tree, "dead_ends", 0.1) == [[a], [a, c], [b]]
    assert select_traversals(tree, "dead_ends", 0.45) == [[a, c], [b]]
    assert select_traversals(tree, "dead_ends", 0.6) == [[b]]
