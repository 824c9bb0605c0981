"""Stale score (docs/methods/metric-explore-exploit-error.md) against the six Appendix-B walks of docs/methods/metric-explore-exploit-error.md#worked-examples and brute force."""

import pytest
from clew.envs.gridmap.metrics import StaleWalk, stale_parts
from gridmap_cases import stale
from hypothesis import given
from hypothesis import strategies as st


def run(walk):
    """(c, e, n, S) after each prefix of ``walk``."""
    sw = StaleWalk(walk[0])
    rows = [(*sw.parts, sw.score)]
    for q in walk[1:]:
        preview = sw.preview(q)
        sw.append(q)
        assert preview == sw.parts
        rows.append((*sw.parts, sw.score))
    return rows


ZERO = (0, 0, 0, 0)


def test_case1_probe_and_back_out_is_free():
    assert run([(-1, 0), (0, 0), (1, 0), (0, 0), (-1, 0)]) == [ZERO] * 5


def test_case2_gateway_revisit_is_free():
    assert run([(-1, 0), (0, 0), (1, 0), (0, 0), (0, 1)]) == [ZERO] * 5


def test_case3_reentering_exhausted_branch():
    rows = run([(-1, 0), (0, 0), (1, 0), (0, 0), (-1, 0), (0, 0), (1, 0)])
    assert rows[:5] == [ZERO] * 5
    assert rows[5] == (0, 1, 1, 2)
    assert rows[6] == (0, 2, 1, 3)


def test_case4_repeating_a_cycle():
    walk = [(-1, -1), (0, -1), (0, 0), (-1, 0), (-1, -1), (0, -1), (0, 0), (-1, 0), (-1, -1)]
    rows = run(walk)
    assert rows[:4] == [ZERO] * 4
    assert rows[4:8] == [(1, 0, 0, 1)] * 4
    assert rows[8] == (1, 0, 1, 2)


def test_case5_corridor_oscillation():
    walk = [(0, 0), (0, 1), (0, 0), (0, -1), (0, 0), (0, 1), (0, 0), (0, -1)]
    rows = run(walk)
    assert rows[:4] == [ZERO] * 4
    assert rows[4:] == [(0, 0, 1, 1), (0, 1, 1, 2), (0, 2, 2, 4), (0, 3, 2, 5)]


def test_case6_comb():
    walk = [(-1, 0), (0, 0), (1, 0), (1, 1), (1, 0), (0, 0), (-1, 0), (0, 0), (0, 1)]
    rows = run(walk)
    assert rows[:7] == [ZERO] * 7
    assert rows[7] == (0, 1, 1, 2)
    assert rows[8] == (0, 1, 1, 2)


@pytest.mark.parametrize("walk", [[(0, 0)], [(0, 0), (0, 1)]])
def test_trivial_walks(walk):
    assert stale_parts(walk) == (0, 0, 0)


neighbour_walks = st.lists(st.sampled_from([(0, 1), (0, -1), (-1, 0), (1, 0)]), max_size=40).map(
    lambda steps: [(0, 0)] + [
        (sum(s[0] for s in steps[:i + 1]), sum(s[1] for s in steps[:i + 1]))
        for i in range(len(steps))])


@given(neighbour_walks)
def test_incremental_equals_brute_force_and_never_decreases(walk):
    sw = StaleWalk(walk[0])
    last = 0
    for i, q in enumerate(walk[1:], 2):
        sw.append(q)
        score, parts = stale(walk[:i])
        assert sw.parts == parts and sw.score == score
        assert score >= last  # invariant 4
        last = score
