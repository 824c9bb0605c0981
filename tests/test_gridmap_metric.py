"""Exploration/exploitation error metric (docs/methods/metric-explore-exploit-error.md Tests A–D, docs/methods/metric-explore-exploit-error.md#target-set-and-cases invariants)."""

import math

import pytest
from clew.envs.gridmap.generator import generate_task
from clew.envs.gridmap.instance import Instance, build_instance
from clew.envs.gridmap.metrics import (
    aggregate,
    episode_metrics,
    exploration_fraction_bins,
    score_trajectory,
)
from clew.metrics import score_episode
from gridmap_cases import (
    actions_for,
    instance_a,
    instance_b,
    positions,
    reference_score,
    small_instances,
    walks,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TEST_A_PATH = [(1, 1), (2, 1), (2, 2), (2, 1), (1, 1), (1, 0), (0, 0), (0, 1), (1, 1), (1, 2),
               (2, 2)]
TEST_B_PATH = [(1, 1), (1, 2), (2, 2), (2, 1), (1, 1), (1, 0), (0, 0), (1, 0), (0, 0), (1, 0),
               (1, 1), (2, 1), (1, 1), (2, 1), (2, 2)]


def test_vector_a_no_errors():
    s = score_trajectory(instance_a(), actions_for(TEST_A_PATH))
    assert [lab.case for lab in s.labels] == [1] * 6 + [2] * 4
    assert all(lab.err == 0 for lab in s.labels)
    assert s.exploration_error == 0 and s.explore_steps == 6
    assert s.exploitation_error == 0 and s.exploit_steps == 4
    assert s.success and s.steps == 10


def test_vector_b_table():
    s = score_trajectory(instance_b(), actions_for(TEST_B_PATH))
    expected = [  # t: case, |T|, progress, gain, err  (docs/methods/metric-explore-exploit-error.md#worked-examples Test B)
        (1, 4, 1, 1, 0), (1, 5, 1, 1, 0), (1, 4, 1, 1, 0), (1, 4, 0, 1, 0), (1, 4, 1, 1, 0),
        (1, 4, 1, 1, 0), (4, 4, 0, 1, 0), (4, 4, 0, 1, 0), (4, 4, 0, 1, 1), (4, 4, 0, 1, 0),
        (4, 4, 1, 1, 0), (2, 1, 0, 0, 1), (2, 1, 0, 1, 0), (2, 1, 1, 1, 0),
    ]
    got = [(lab.case, lab.n_targets, int(lab.progress), int(lab.gain), lab.err)
           for lab in s.labels]
    assert got == expected
    assert (s.labels[8].S_before, s.labels[8].S_after) == (0, 1)  # third use of (0,0)-(1,0)
    assert s.labels[9].S_after == 1
    assert s.labels[6].pending == ("B",)
    assert math.isclose(s.exploration_error, 1 / 11)
    assert math.isclose(s.exploitation_error, 0.25)
    assert s.success
    # attribution: the case-4 error counts for both, the case-2 error for exploitation only
    assert (s.labels[8].err_explore, s.labels[8].err_exploit) == (1, 1)
    assert (s.labels[11].err_explore, s.labels[11].err_exploit) == (0, 1)


def test_vector_c_case1_dithering():
    path = [(1, 1), (2, 1), (1, 1), (2, 1), (1, 1), (1, 0)]
    s = score_trajectory(instance_a(), actions_for(path))
    assert [lab.err for lab in s.labels] == [0, 0, 0, 1, 0]
    assert s.labels[3].e == 1 and s.labels[3].n == 0  # (1,1) only at its second visit
    assert math.isclose(s.exploration_error, 0.2)
    assert math.isnan(s.exploitation_error)
    assert not s.success


def test_vector_d_unvisited_goal_is_not_pending():
    # A (the goal's parent) achieved first; the goal cell never visited yet: still Case 1.
    path = [(1, 1), (1, 0), (0, 0), (0, 1), (0, 2), (1, 2), (2, 2)]
    s = score_trajectory(instance_a(), actions_for(path))
    assert [lab.case for lab in s.labels] == [1] * 6
    assert all(lab.pending == () for lab in s.labels)
    assert s.success and s.labels[-1].progress


def test_invalid_actions_stay_err_by_case_and_skip_the_stale_walk():
    inst = instance_b()
    # at the start (1,1): an unknown word; later a blocked move at (0,0) while Case 4
    actions = ["jump"] + actions_for([(1, 1), (1, 0), (0, 0)]) + ["left", "down"]
    s = score_trajectory(inst, actions)
    first, blocked_left, blocked_down = s.labels[0], s.labels[3], s.labels[4]
    assert first.invalid and first.p == first.q == (1, 1) and first.err == 1
    assert first.case == 1 and first.err_explore == 1 and first.err_exploit == 0
    assert blocked_left.invalid and blocked_left.case == 1  # A achieved, but B not yet found
    assert blocked_left.S_after == blocked_left.S_before
    assert s.invalid_count == 3 and math.isclose(s.invalid_rate, 3 / 5)
    excl = score_trajectory(inst, actions, score_noop="exclude")
    assert excl.explore_steps == 2 and excl.explore_errors == 0
    assert blocked_down.err == 1


def test_invalid_step_attributed_to_both_in_case4():
    inst = instance_b()
    path = TEST_B_PATH[:7]  # ends on A at (0,0): Case 4 from there
    s = score_trajectory(inst, actions_for(path) + ["nonsense"])
    last = s.labels[-1]
    assert last.case == 4 and last.invalid and (last.err_explore, last.err_exploit) == (1, 1)


def test_case2_strict_flags_progress_away_from_goal():
    # a T-shaped map: G at (2,0) is found blocked, A at (0,0) makes it pending, then the agent
    # steps up into the unseen (1,1), away from the goal: progress with Gain 0 (D3)
    inst = build_instance(3, 2, [(0, 0), (1, 0), (2, 0), (1, 1)], (1, 0),
                          {"A": [], "G": [["A"]]}, {"A": (0, 0), "G": (2, 0)}, "G")
    acts = actions_for([(1, 0), (2, 0), (1, 0), (0, 0), (1, 0), (1, 1), (1, 0), (2, 0)])
    loose = score_trajectory(inst, acts)
    strict = score_trajectory(inst, acts, case2_strict=True)
    step = loose.labels[4]
    assert step.case == 2 and step.progress and not step.gain and step.err == 0
    assert strict.labels[4].err == 1
    assert loose.exploitation_error == 0 and strict.exploitation_error == 1 / 4


def test_known_distance_mode_differs_where_a_shortcut_is_unseen():
    # a 4x3 ring; the goal G at (3,0) is found blocked, then A at (1,2) is reached the long way
    # round. From A the true shortest way to G runs through (2,2),(3,2),(3,1); (3,2) is still
    # unknown, so the known map only offers the way back.
    ring = [(x, 0) for x in range(4)] + [(x, 2) for x in range(4)] + [(0, 1), (3, 1)]
    inst = build_instance(4, 3, ring, (1, 0), {"A": [], "G": [["A"]]},
                          {"A": (1, 2), "G": (3, 0)}, "G")
    path = [(1, 0), (2, 0), (3, 0), (2, 0), (1, 0), (0, 0), (0, 1), (0, 2), (1, 2), (0, 2)]
    s_true = score_trajectory(inst, actions_for(path))
    s_known = score_trajectory(inst, actions_for(path), distance_mode="known")
    last_true, last_known = s_true.labels[-1], s_known.labels[-1]
    assert last_true.case == last_known.case == 2
    assert not last_true.gain and last_true.err == 1
    assert last_known.gain and last_known.err == 0
    assert [lab.err for lab in s_true.labels[:-1]] == [lab.err for lab in s_known.labels[:-1]]


def test_budget_truncation_and_actions_after_the_goal_are_ignored():
    inst = instance_a()
    acts = actions_for(TEST_A_PATH) + ["up", "down"]
    s = score_trajectory(inst, acts)
    assert s.steps == 10 and s.ignored_actions == 2
    long = ["jump"] * (inst.budget + 5)
    s2 = score_trajectory(inst, long)
    assert s2.steps == inst.budget and s2.ignored_actions == 5 and not s2.success
    s3 = score_trajectory(inst, long, truncate_at_budget=False)
    assert s3.steps == inst.budget + 5
    # with 3 free retries only every 4th consecutive invalid action uses the clock
    longer = ["jump"] * (4 * inst.budget + 3)
    s4 = score_trajectory(inst, longer, invalid_policy="retry_without_step")
    assert s4.steps == 4 * inst.budget and s4.ignored_actions == 3


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="distance_mode"):
        score_trajectory(instance_a(), [], distance_mode="manhattan")
    with pytest.raises(ValueError, match="score_noop"):
        score_trajectory(instance_a(), [], score_noop="maybe")
    task = generate_task({}, 0)
    with pytest.raises(ValueError, match="actions"):
        episode_metrics(task, {"actions": "up"})


def test_episode_metrics_registry_and_aggregate():
    task = generate_task({"exploration_level": "low", "dag_level": "easy"}, 0)
    inst = Instance.from_params(task.params)
    acts = [inst.moves[inst.start][0]] * 3
    m = score_episode(task, {"actions": acts})
    assert {"success", "steps", "exploration_error", "exploitation_error", "invalid_rate",
            "labels"} <= set(m)
    assert len(m["labels"]) == m["steps"] and isinstance(m["labels"][0]["p"], list)
    a_task = generate_task({}, 1)
    ms = [
        {"success": True, "steps": 10, "exploration_error": 0.5, "exploitation_error": math.nan,
         "explore_steps": 4, "explore_errors": 2, "exploit_steps": 0, "exploit_errors": 0,
         "invalid_count": 1},
        {"success": False, "steps": 30, "exploration_error": 0.0, "exploitation_error": 0.25,
         "explore_steps": 6, "explore_errors": 0, "exploit_steps": 4, "exploit_errors": 1,
         "invalid_count": 0},
    ]
    agg = aggregate(ms)
    assert agg["success_rate"] == 0.5
    assert agg["exploration_error"] == 0.25 and agg["exploration_error_n"] == 2
    assert agg["exploitation_error"] == 0.25 and agg["exploitation_error_n"] == 1  # NaN skipped
    assert agg["exploration_error_pooled"] == 0.2
    assert agg["steps_success_mean"] == 10 and agg["steps_mean"] == 20
    assert agg["invalid_rate_pooled"] == 1 / 40
    assert a_task.env == "gridmap"


def test_exploration_fraction_bins():
    s = score_trajectory(instance_a(), actions_for(TEST_A_PATH))
    bins = exploration_fraction_bins(s.labels, bins=2)
    new = [lab.new_cell for lab in s.labels]
    assert bins == [sum(new[:5]) / 5, sum(new[5:]) / 5]


# --- property tests on random small maps ---------------------------------------------------------
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


@SETTINGS
@given(st.data())
def test_incremental_metric_equals_the_reference_scorer(data):
    inst = data.draw(small_instances())
    actions = data.draw(walks(inst))
    s = score_trajectory(inst, actions, truncate_at_budget=False)
    ref = reference_score(inst, positions(inst, actions))
    assert len(s.labels) == len(ref["rows"])
    for lab, row in zip(s.labels, ref["rows"]):
        assert (lab.p, lab.q, lab.case, lab.n_targets, lab.progress, lab.gain, lab.S_before,
                lab.S_after, lab.err) == (row["p"], row["q"], row["case"], row["nT"],
                                          row["progress"], row["gain"], row["S_before"],
                                          row["S_after"], row["err"])
        assert set(lab.pending) == row["P"]
        assert lab.p not in row["T"]  # invariant 1
    assert s.success == ref["success"]
    assert _same(s.exploration_error, ref["exploration_error"])
    assert _same(s.exploitation_error, ref["exploitation_error"])


@SETTINGS
@given(st.data())
def test_segment_invariants(data):
    inst = data.draw(small_instances())
    s = score_trajectory(inst, data.draw(walks(inst)), truncate_at_budget=False)
    seg_key = None
    last_s = None
    for lab in s.labels:
        key = (lab.case, lab.n_targets, lab.pending, lab.n_unobserved)
        if seg_key is not None:  # invariant 3: constant inside a no-progress segment
            assert key == seg_key
            assert lab.S_before >= last_s  # invariant 4
        assert lab.S_after >= lab.S_before
        if not lab.progress and lab.n_targets == 1:  # invariant 5
            assert lab.err == 1 - int(lab.gain)
        if lab.case == 2:
            assert lab.n_targets == 1
        seg_key = None if lab.progress else key
        last_s = lab.S_after
    # attribution and normalisation are consistent with the labels
    assert s.explore_errors == sum(lab.err_explore for lab in s.labels)
    assert s.exploit_errors == sum(lab.err_exploit for lab in s.labels)
    assert s.explore_steps == sum(lab.case in (1, 4) for lab in s.labels)
    assert s.exploit_steps == sum(lab.case in (2, 3, 4) for lab in s.labels)
