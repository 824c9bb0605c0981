"""Grid-map generator versions (issue 13): version 2's open-fraction floor, version 1 intact."""

import pytest
from clew.envs.gridmap.generator import (
    DAG_LEVELS,
    EXPLORATION_LEVELS,
    MIN_OPEN,
    generate_instance,
    generate_task,
)
from clew.envs.suites import get_suite


def pair(level, dag, seed):
    def inst(version):
        return generate_instance({"exploration_level": level, "dag_level": dag,
                                  "generator_version": version}, seed)
    return inst(1), inst(2)


@pytest.mark.parametrize("level", EXPLORATION_LEVELS)
@pytest.mark.parametrize("dag", DAG_LEVELS)
def test_v2_adds_open_cells_only_where_the_floor_asks(level, dag):
    for seed in range(8):
        v1, v2 = pair(level, dag, seed)
        box = v2.width * v2.height
        assert (v1.width, v1.height, v1.start) == (v2.width, v2.height, v2.start)
        assert [(n.name, n.cell, n.options) for n in v1.nodes] == [
            (n.name, n.cell, n.options) for n in v2.nodes]
        assert v1.cells <= v2.cells
        assert len(v2.cells) >= MIN_OPEN[level] * box
        assert v2.budget == 3 * len(v2.cells)
        if MIN_OPEN[level] == 0:
            assert v1.cells == v2.cells
        assert v2.presets["generator_version"] == 2 and v1.presets["generator_version"] == 1


def test_high_maps_were_sparse_in_v1_and_are_mostly_open_in_v2():
    # the observation (v1 hard/high 9x9 maps about 70% open) and the v2 fix
    fractions = {1: [], 2: []}
    for seed in range(20):
        for version, inst in zip((1, 2), pair("high", "hard", seed), strict=True):
            fractions[version].append(len(inst.cells) / 81)
    assert sum(fractions[1]) / 20 < 0.8 and min(fractions[2]) >= 0.9


def test_default_is_the_current_version_and_bad_versions_are_named():
    task = generate_task({"exploration_level": "high", "dag_level": "easy"}, 0)
    assert task.params["presets"]["generator_version"] == 2
    with pytest.raises(ValueError, match="generator_version 3"):
        generate_task({"generator_version": 3}, 0)
    with pytest.raises(ValueError, match="min_open needs generator_version 2"):
        generate_task({"generator_version": 1, "min_open": 0.5}, 0)
    with pytest.raises(ValueError, match="min_open"):
        generate_task({"min_open": 1.5}, 0)
    full = generate_instance({"exploration_level": "low", "min_open": 1.0}, 3)
    assert len(full.cells) == full.width * full.height


def test_gridmap_v2_suite():
    v1, v2 = get_suite("gridmap-v1"), get_suite("gridmap-v2")
    assert v2.version == 2
    for split in ("train", "test"):
        old, new = v1.split(split), v2.split(split)
        # same seeds and configurations, ids that say the version
        assert [t.id.replace("gridmap-", "gridmap-v2-") for t in old] == [t.id for t in new]
        for a, b in zip(old, new, strict=True):
            assert b.params["presets"]["generator_version"] == 2
            if a.params["presets"]["exploration_level"] != "high":
                assert a.params["cells"] == b.params["cells"]
            else:
                assert len(b.params["cells"]) >= 0.9 * b.params["width"] * b.params["height"]
