"""BrowserGym tasks in real headless Chromium (docs/web.md): snapshots restore the page on every
task of ``miniwob-v1``, replays are checked, invalid actions and budgets behave, ReAct and
heuristic MCTS run end to end, and the searched trees become EL data whose backtracks replay.

Needs the web extra (``pip install -e '.[web]'``) and Debian's ``chromium`` (``make browser``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re

import pytest

pytestmark = pytest.mark.browser
pytest.importorskip("browsergym.miniwob", reason="the web extra is not installed")

from clew.agents.lm.fake import FakeLM
from clew.envs.browsergym import chromium
from clew.envs.browsergym.candidates import candidate_actions
from clew.envs.browsergym.env import BrowserGymEnv
from clew.envs.browsergym.session import ReplayMismatch
from clew.envs.registry import make_for
from clew.envs.suites import get_suite

if chromium.chromium_path() is None:
    pytest.skip("no chromium on PATH (make browser installs Debian's)", allow_module_level=True)

TASKS = {t.id: t for t in get_suite("miniwob-v1").split("test")}
SEED0 = [t for t in TASKS.values() if t.seed == 0]


def _pick(env) -> str:
    """A fill if there is one, else the click on the last clickable element: the goal rarely
    names it, so the task tends to keep running."""
    acts = candidate_actions(env)
    fills = [a for a in acts if a.startswith("fill")]
    return fills[0] if fills else acts[-1]


def _click_the_named_button(page: str) -> str:
    """The id of the button the goal names in quotes (what the fake models answer)."""
    target = re.search(r'"([^"]+)"', page)[1]
    return re.search(rf"\[(\w+)\] button '{re.escape(target)}'", page)[1]


@pytest.mark.parametrize("task", SEED0, ids=lambda t: t.id)
def test_restoring_a_snapshot_reproduces_the_page(task):
    env = make_for(task)
    env.reset(task)
    snaps = [env.snapshot()]
    env.step(_pick(env))
    if not env.done:
        snaps.append(env.snapshot())
        env.step(_pick(env))                  # move on, so the restore has somewhere to come back from
    for snap in reversed(snaps):
        env.restore(snap)
        assert env.observation().text == snap.page.text
        # the page itself: reset with the task seed, replay the prefix, read the page again
        assert env.replay().text == snap.page.text
    env.close()


@pytest.fixture(scope="module")
def enter_text():
    env = BrowserGymEnv(max_steps=3, timeout_ms=500)
    env.reset(TASKS["enter-text-s1"])
    return env


def test_invalid_actions_and_the_budget(enter_text):
    env = enter_text
    st = env.step("I would like to type something")
    assert not st.valid and not st.terminated and st.info["error"] == "unparsable"
    assert "held no action" in st.obs.text and env.browser_stats().get("real_steps", 0) == 0
    st = env.step("click('999')")             # well formed, but no such element
    assert not st.valid and "The last action failed" in st.obs.text
    assert env.browser_stats()["real_steps"] == 1
    quoted = re.search(r'"([^"]+)"', env.observation().info["goal"])[1]
    box = next(e["bid"] for e in env.observation().info["elements"] if e["role"] == "textbox")
    st = env.step(f"fill('{box}', '{quoted}')")
    assert st.valid and f"value='{quoted}'" in st.obs.text
    assert st.terminated and st.info["truncated"] and env.grade() == 0.0   # 3 steps: the budget


def test_the_action_timeout_does_not_bound_the_task_setup():
    """A 1 ms action timeout: the task still sets up (MiniWoB++ waits for its page under the
    task's own 5 s, on a fresh and on a soft reset). BrowserGym's actions bring their own timeouts
    (500 ms for a click), so the option mostly bounds the waits between them."""
    env = BrowserGymEnv(max_steps=3, timeout_ms=1)
    try:
        for _ in range(2):                       # the second reset restarts the task on the page
            env.reset(TASKS["enter-text-s1"])
            assert "textbox" in env.observation().text
        st = env.step("click('999')")
        assert not st.valid and "The last action failed" in st.obs.text
    finally:
        env.close()


def test_a_replay_that_differs_is_an_error_naming_task_and_step(enter_text):
    env = enter_text
    key = env.state.actions
    rec = env.browser.transitions[key]
    env.browser.transitions[key] = dataclasses.replace(rec, tree=rec.tree + "\n[99] button 'x'")
    try:
        with pytest.raises(ReplayMismatch, match=r"miniwob\.enter-text \(seed 1\).*step 2 \(fill\("):
            env.replay()
    finally:
        env.browser.transitions[key] = rec
    env.close()


def test_react_with_a_fake_model_solves_a_click_task():
    from clew.agents.react import ReActAgent
    from clew.runner.episodes import run_episode

    def answer(request, i):
        bid = _click_the_named_button(request.messages[-1]["content"])
        return f"Thought: the goal names the button.\nNext action: ```click('{bid}')```"

    lm = FakeLM(answer)
    rec = asyncio.run(run_episode(ReActAgent(lm), TASKS["click-button-s1"]))
    assert rec["outcome"]["success"] and rec["actions"] == [rec["actions"][0]]
    system = lm.calls[0].messages[0]["content"]
    assert "Goal:" in system and "fill(bid" in system


def test_react_with_a_tiny_model_runs_on_a_web_task(lively_model_dir):
    """A real (random-weight) model: whatever it writes, the episode runs and is recorded."""
    from clew.agents.react import ReActAgent
    from clew.runner.episodes import run_episode

    agent = ReActAgent(f"hf:{lively_model_dir}", max_tokens=24, temperature=0.0)
    rec = asyncio.run(run_episode(agent, TASKS["click-test-s0"], max_steps=2))
    assert 1 <= len(rec["steps"]) <= 2 and rec["usage"]["policy"]["calls"] >= len(rec["steps"])
    assert all(s["valid"] is False or s["action"].startswith(("click", "fill"))
               for s in rec["steps"])


def test_rmcts_mad_with_fake_lm_roles_runs_on_a_web_task():
    """LM-role mechanics on a real page: policy samples parsed into actions, the debate judges
    the simulated result, the episode's reflections go to memory afterwards."""
    from clew.runner.episodes import run_episode
    from clew.runner.registry import build_agent

    def respond(req, i):
        text = req.messages[-1]["content"]
        if req.role == "policy":
            return f"The goal names it.\nNext action:\n```click('{_click_the_named_button(text)}')```"
        if req.role == "debate":
            return "The page shows what the goal asked for."
        if req.role in ("judge", "value"):
            return "Thoughts: done as asked.\nSTATUS CODE: B"
        return "Check the button's label against the goal before clicking."

    lm = FakeLM(respond)
    agent = build_agent("rmcts-mad", model=lm, search={"n_simulations": 3})
    trees = []
    rec = asyncio.run(run_episode(agent, TASKS["click-button-s1"],
                                  on_tree=lambda t, tree: trees.append(tree)))
    assert rec["outcome"]["success"]
    assert {"policy", "debate", "judge"} <= set(rec["usage"])
    judged = [n for n in trees[0]["nodes"] if n.get("value_record")]
    assert judged and judged[0]["value_record"]["debate"]["support"]
    assert rec["interactions"]["simulated"] >= 1


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """Heuristic MCTS (no model) on a one-step and a two-step task, recorded in a run dir."""
    from clew.records import RunDir
    from clew.runner.episodes import run_suite
    from clew.runner.registry import build_agent

    path = tmp_path_factory.mktemp("web") / "run"
    run = RunDir(path)
    run.open({"agent": "mcts"}, resume=False)
    tasks = [TASKS["click-button-s1"], TASKS["enter-text-s0"]]
    options = {"value": {"noise": 0.0}, "search": {"n_simulations": 20}}
    asyncio.run(run_suite(lambda: build_agent("mcts", **options), tasks, run, progress=False))
    return path


def test_heuristic_mcts_solves_web_tasks_with_metrics(searched):
    from clew.training.datasets import read_episodes

    records = {r["task"]["id"]: r for r in read_episodes(searched)}
    assert set(records) == {"click-button-s1", "enter-text-s0"}
    for r in records.values():
        assert r["outcome"]["success"], r["actions"]
        m = r["metrics"]
        assert m["simulated_steps"] == r["interactions"]["simulated"] > 0
        assert m["sim_browser_steps"] >= 1 and m["replays"] >= 1 and m["replay_s"] > 0
        assert m["page_states"] == r["outcome"]["steps"] + 1 or m["page_states"] >= 2
    two = records["enter-text-s0"]
    assert len(two["actions"]) == 2 and two["actions"][0].startswith("fill(")


def test_report_and_view_read_the_web_run(searched, tmp_path):
    from clew.cli.main import main

    assert main(["report", str(searched), "--out", str(tmp_path / "report")]) == 0
    assert (tmp_path / "report" / "report.md").exists()
    tree = min((searched / "trees").glob("enter-text-s0*/0.json.gz"))
    out = tmp_path / "tree.html"
    assert main(["view", str(tree), "--out", str(out)]) == 0
    assert "fill(" in out.read_text()


def test_web_trees_flatten_into_el_data_whose_backtracks_replay(searched):
    from clew.envs.base import Task
    from clew.search.tree import read_trees
    from clew.training.datasets import DataConfig, build_datasets, read_episodes
    from clew.training.flatten import el_turns, flatten_episode

    record = next(r for r in read_episodes(searched) if r["task"]["id"] == "enter-text-s0")
    items = flatten_episode(record, read_trees(searched, record["key"]), backtrack=True)
    assert any(t.kind == "back" for t in el_turns(items)), "the search must have left a branch"
    assert Task.from_dict(record["task"]).env == "browsergym"
    # Every chat is replayed in a fresh env (backtracks restore a snapshot, the next step resets
    # the page and replays the prefix); strict: a replayed page that differs from the tree's
    # is an error. The walk is longer than the task's budget (3 actions for a one-step task):
    # lift it for the replay, as `clew data env_options.max_steps=50` does.
    ds, report = build_datasets(DataConfig(runs=[str(searched)], strict_replay=True,
                                           env_options={"max_steps": 50}))
    assert report["el_episodes"] == 2, report["el_skipped"]
    assert max(ds["el"]["n_backtracks"]) >= 1
    assert all(m["role"] != "assistant" or "backtrack S" in m["content"] or "Next action" in
               m["content"] for row in ds["el"]["messages"] for m in row)


def test_one_chromium_serves_every_page():
    # the task pages and BrowserGym's chat windows of all the episodes above: two browsers at most
    assert 1 <= chromium.launches() <= 2
