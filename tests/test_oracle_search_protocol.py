"""docs/methods/metric-best-found.md: the query protocol, validity and retries, texts, metric."""

from __future__ import annotations

import json

import pytest
from clew.envs.base import Task
from clew.envs.oracle_search import hill, maxsat, prompts, treesearch
from clew.envs.registry import make
from clew.metrics import score_episode
from hypothesis import given, settings
from hypothesis import strategies as st


def hill_env(budget=10, instance="H-B2", **proto):
    params = {"instance": instance, "budget": budget}
    if proto:
        params["protocol"] = proto
    env = make("hillsearch")
    env.reset(hill.generate_task(params, 0))
    return env


def tree_env(budget=10, params=None, seed=0):
    env = make("treesearch")
    env.reset(treesearch.generate_task({**(params or {"instance": "T-main"}), "budget": budget}, seed))
    return env


def maxsat_env(budget=10):
    env = make("maxsatsearch")
    env.reset(maxsat.generate_task({"instance": "M-main", "budget": budget}, 0))
    return env


# --- retries (docs/methods/envs.md#query-protocol) ---------------------------------------------------------------------------


def test_retry_thresholds_and_budget():
    """Appendix A.8: attempts 1–20 silent, 21–25 loud, the 26th ends; no budget used."""
    env = hill_env(budget=5)
    env.step('{"query": {"x": 2}}')
    for i in range(1, 27):
        step = env.step('{"query": {"x": 11}}')
        assert not step.valid and env.remaining == 4
        if i <= 20:
            assert step.info["retry"] == "silent" and not step.terminated
        elif i <= 25:
            assert step.info["retry"] == "loud" and not step.terminated
            assert step.obs.text == "Invalid query: x=11.0 is outside the domain [0, 10]. " \
                                    "Please try again."
        else:
            assert step.info["retry"] == "end" and step.terminated
    assert env.ended == "retries"
    # early-terminated episodes keep the best value found so far (docs/methods/envs.md#query-protocol [D])
    assert env.grade() == pytest.approx(hill.hill_value(2.0, hill.H_B2) / env.optimum)
    after = env.step('{"query": {"x": 1}}')
    assert not after.valid and after.terminated


def test_retry_limits_are_task_parameters():
    env = hill_env(budget=3, silent_retries=0, loud_retries=1)
    assert env.step("garbage").info["retry"] == "loud"
    assert env.step("garbage").terminated


def test_valid_queries_use_budget_and_end_the_episode():
    env = hill_env(budget=3)
    for i, x in enumerate([1.0, 1.0, 9.5]):  # repeats are allowed and cost budget
        step = env.step(json.dumps({"reason": "r", "query": {"x": x}}))
        assert step.valid and env.remaining == 2 - i
    assert step.terminated and env.ended == "budget"
    assert "Queries left: 0." in step.obs.text


# --- parsing tolerance --------------------------------------------------------------------------


@pytest.mark.parametrize("text,x", [
    ('{"reason": "mid", "query": {"x": 4.5}}', 4.5),
    ('```json\n{"Reason": "mid", "Query": {"X": 4.5}}\n```', 4.5),
    ('I think {"reason": "a {b}", "query": {"x": "4.5"}} is best', 4.5),
    ('{"x": 4.5}', 4.5),
    ("x = 4.5", 4.5),
    ("4.5", 4.5),
    ('{"reason": "cut off", "query": {"x": 4.5}', 4.5),  # truncated after the query [D]
    ("x=4.5", 4.5),
])
def test_hill_parsing(text, x):
    env = hill_env()
    step = env.step(text)
    assert step.valid and step.info["query"] == f"x={x!r}"


@pytest.mark.parametrize("text,fragment", [
    ('{"reason": "no query"}', "could not read"),
    ('{"reason": "r", "query": {"y": 1}}', 'key "x"'),
    ('{"reason": "r", "query": {"x": NaN}}', "finite"),
    ('{"reason": "r", "query": {"x": true}}', "finite"),
    ('{"reason": "r", "query": {"x": -0.1}}', "outside"),
    ('{"reason": "cut off", "query": {"x": 4.', "could not read"),
])
def test_hill_invalid(text, fragment):
    env = hill_env()
    step = env.step(text)
    assert not step.valid and fragment in step.obs.text and env.remaining == 10


def test_tree_validity_rules():
    env = tree_env()
    root, parent = env.root, env.parents()
    gate = env.frontier()[0]
    deep = next(v for v in range(len(parent)) if parent[v] not in (root, -1))
    for query, fragment in [(len(parent), "does not exist"), (-1, "does not exist"),
                            (root, "start node"), (deep, "not adjacent")]:
        step = env.step(json.dumps({"query": {"node": query}}))
        assert not step.valid and fragment in step.obs.text
    assert env.step(f"node {gate}").valid
    again = env.step(f'{{"query": {{"Node": "{gate}"}}}}')
    assert not again.valid and "already queried" in again.obs.text
    assert env.remaining == 9


def test_maxsat_parsing_and_validity():
    env = maxsat_env()
    n = env.n
    full = {f"x{i}": i % 2 for i in range(n)}
    bits = "".join(str(i % 2) for i in range(n))
    assert env.step(json.dumps({"reason": "r", "query": full})).info["query"] == f"bits={bits}"
    upper = {f"X_{i}": str(i % 2) for i in range(n)}
    assert env.step(json.dumps({"query": upper})).info["query"] == f"bits={bits}"
    assert env.step(f"bits={bits}").valid
    for query, fragment in [({k: v for k, v in full.items() if k != "x3"}, "missing variable(s) x3"),
                            ({**full, "x15": 0}, "unknown variable"),
                            ({**full, "x2": 2}, "0 or 1"),
                            ({"bits": bits[:-1]}, f"there are {n} variables")]:
        step = env.step(json.dumps({"query": query}))
        assert not step.valid and fragment in step.obs.text
    assert env.remaining == 7


# --- feedback texts ---------------------------------------------------------------------------


def test_tree_feedback_lists():
    """docs/methods/envs.md#treesearch: children in random order; after a leaf, all queryable nodes, most recent first."""
    p = {"r_trap": 1, "r_good": 1, "b": 2, "d_trap": 1, "d_good": 3}
    env = tree_env(budget=20, params=p)
    parent = env.parents()
    children = {u: sorted(v for v in range(len(parent)) if parent[v] == u) for u in range(len(parent))}
    trap = env.task.params["gateways"]["trap"][0]
    good = env.task.params["gateways"]["good"][0]
    step = env.step(f"node={good}")
    assert "Newly queryable because of this query: " in step.obs.text
    listed = json.loads(step.obs.text.split("query: ")[1].split(".")[0])
    assert sorted(listed) == children[good]
    step = env.step(f"node={trap}")  # opened the trap's two leaves at step 2
    leaf = children[trap][0]
    step = env.step(f"node={leaf}")
    assert "opened no new nodes" in step.obs.text
    listed = json.loads(step.obs.text.split("first): ")[1])
    # the trap's other leaf (opened at step 2) precedes the good chain heads (opened at step 1)
    assert listed[0] == children[trap][1]
    assert sorted(listed[1:]) == children[good]
    assert sorted(listed) == env.frontier()


def test_first_messages_and_instructions():
    h = hill_env(budget=36)
    assert h.observation().text == "Budget: 36 queries. Find the maximum value of f."
    assert '"query": {"x"' in h.instructions()
    t = tree_env(budget=48)
    text = t.observation().text
    assert text.startswith("n = 772\n") and f"Start node: {t.root}, value 0." in text
    assert text.count("\n") == 772 + 3  # one adjacency line per node
    assert "differ by at most 4" in t.instructions()
    m = maxsat_env(budget=48)
    assert m.observation().text == ("Budget: 48 queries. Maximise the number of satisfied "
                                    "clauses (m=120).")
    assert "There are 120 weighted clauses" in m.instructions()
    assert "between 1 and 4 literals" in m.instructions()
    with pytest.raises(ValueError, match="variant"):
        h.instructions("other")


def test_response_schemas():
    assert hill_env().response_schema()["properties"]["query"]["required"] == ["x"]
    schema = maxsat_env().response_schema()
    assert next(iter(schema["properties"])) == "reason"
    assert schema["properties"]["query"]["required"] == [f"x{i}" for i in range(15)]


# --- hand-off templates (docs/methods/interventions.md#summary-hand-off) ----------------------------------------------------------------


def test_hill_handoff_gaps():
    assert prompts.hill_gaps([1.0, 1.2, 4.0]) == [(4.0, 10.0), (1.2, 4.0), (0.0, 1.0)]
    xs = [i / 10 for i in range(101)]  # every gap 0.1 < 0.5: the three largest instead
    assert len(prompts.hill_gaps(xs)) == 3
    wide = [i * 0.6 for i in range(17)]  # 16 gaps of 0.6 (plus the last): at most 10 listed
    assert len(prompts.hill_gaps(wide)) == 10
    env = hill_env(budget=6)
    for x in (3.0, 1.0, 3.0):
        env.step(f"x={x}")
    text = env.handoff_message()
    assert "used 3 queries" in text and "You have 3 queries remaining" in text
    assert text.index("x=1.0 ->") < text.index("x=3.0 ->") and text.count("x=3.0 ->") == 1
    assert "[3.000, 10.000] (length 7.000)" in text


def test_tree_handoff_frontier_by_height():
    env = tree_env(budget=10, params={"r_trap": 1, "r_good": 1, "b": 2, "d_trap": 3, "d_good": 4})
    good = env.task.params["gateways"]["good"][0]
    env.step(f"node={good}")
    text = env.handoff_message()
    assert f"Best found so far: node {good} with value 1." in text
    h1 = json.loads(text.split("height 1: ")[1].split("\n")[0])
    h2 = json.loads(text.split("height 2: ")[1].split("\n")[0])
    assert h1 == env.task.params["gateways"]["trap"]
    assert sorted(h2) == sorted(v for v in env.frontier() if env.parents()[v] == good)
    assert env.handoff_message() == text  # building a hand-off changes nothing


def test_maxsat_handoff_coverage():
    env = maxsat_env()
    env.step("bits=" + "0" * 15)
    env.step("bits=" + "1" + "0" * 14)
    text = env.handoff_message()
    assert "fewest 0s: x0 (0 in 1/2), x1 (0 in 2/2)" in text
    assert "fewest 1s: x1 (1 in 0/2), x2 (1 in 0/2)" in text
    assert "Best assignment found (bits for x0..x14)" in text


# --- snapshot / replay / rewards / metric -----------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(picks=st.lists(st.integers(0, 50), min_size=1, max_size=15), cut=st.integers(0, 14))
def test_tree_restore_then_replay_is_identical(picks, cut):
    env = tree_env(budget=12, params={"r_trap": 2, "r_good": 2, "b": 2, "d_trap": 4,
                                      "d_good": 4})
    actions = []
    for k in picks:  # a mix of valid frontier picks and invalid ids
        front = env.frontier()
        action = f"node={front[k % len(front)]}" if k % 3 else f"node={k}"
        actions.append(action)
        env.step(action)
        if env.done:
            break
    cut = min(cut, len(actions))
    fresh = tree_env(budget=12, params={"r_trap": 2, "r_good": 2, "b": 2, "d_trap": 4,
                                        "d_good": 4})
    texts = [fresh.step(a).obs.text for a in actions]
    again = tree_env(budget=12, params={"r_trap": 2, "r_good": 2, "b": 2, "d_trap": 4,
                                        "d_good": 4})
    for a in actions[:cut]:
        again.step(a)
    snap = again.snapshot()
    for a in actions[cut:]:
        again.step(a)
    again.restore(snap)
    assert [again.step(a).obs.text for a in actions[cut:]] == texts[cut:]


@settings(max_examples=25, deadline=None)
@given(xs=st.lists(st.floats(-1, 11), min_size=1, max_size=12))
def test_rewards_sum_to_the_normalised_best(xs):
    env = hill_env(budget=8)
    total, best = 0.0, 0.0
    for x in xs:
        step = env.step(f"x={x!r}")
        total += step.reward
        if step.valid:
            best = max(best, hill.hill_value(x, hill.H_B2))
        if env.done:
            break
    assert total == pytest.approx(best / env.optimum)
    assert env.grade() == pytest.approx(best / env.optimum)


def test_stop_ends_early_and_the_metric_replays():
    env = tree_env(budget=10)
    good = env.task.params["gateways"]["good"][0]
    actions = ["junk", f"node={good}", "STOP"]
    for a in actions:
        step = env.step(a)
    assert step.terminated and env.ended == "stop" and env.remaining == 9
    metrics = score_episode(env.task, {"actions": actions})
    assert metrics["normalized_reward"] == pytest.approx(1 / 45)
    assert metrics["valid_queries"] == 1 and metrics["invalid_attempts"] == 1
    assert metrics["ended_early"] == 1.0 and metrics["good_branch_found"] == 1.0


def test_metric_indicators():
    task = hill.generate_task({"instance": "H-B2", "budget": 3}, 0)
    assert score_episode(task, {"actions": ["x=2.77"]})["needle_found"] == 0.0
    assert score_episode(task, {"actions": ["x=2.77", "x=1.3"]})["needle_found"] == 1.0
    mtask = maxsat.generate_task({"instance": "M-main", "budget": 3}, 0)
    planted = mtask.params["planted"]
    m = score_episode(mtask, {"actions": [f"bits={planted}"]})
    assert m["gold_satisfied"] == 1.0 and m["normalized_reward"] == 1.0
    gold_var = mtask.params["gold"][0]
    flipped = planted[:gold_var] + ("1" if planted[gold_var] == "0" else "0") + planted[gold_var + 1:]
    m = score_episode(mtask, {"actions": [f"bits={flipped}"]})
    assert m["gold_satisfied"] == 0.0 and m["normalized_reward"] == pytest.approx(40 / 120)


def test_env_flags():
    for name in ("hillsearch", "treesearch", "maxsatsearch"):
        flags = make(name).flags
        assert not flags.supports_backtrack and flags.outcome_mode == "graded_at_end"
        assert flags.simulation_mode == "charged"


def test_task_for_other_env_is_rejected():
    with pytest.raises(ValueError, match="belongs to env"):
        make("hillsearch").reset(Task("treesearch", {"budget": 3}))


def test_tree_handoff_can_repeat_the_graph():
    task = treesearch.generate_task({"instance": "T-alt1", "budget": 5}, 0)
    plain, full = make("treesearch"), make("treesearch", handoff_include_graph=True)
    plain.reset(task)
    full.reset(task)
    assert "Graph (adjacency list)" not in plain.handoff_message()
    text = full.handoff_message()
    assert "Graph (adjacency list)" in text and text.count("\n") > 323
