"""Old suite versions reproduce their tasks exactly (issue 13: version, don't overwrite).

The digests were computed from the suites as they were on ``main`` at commit a2e77a6, before the
v2 instance sets were added: SHA-256 over each task's JSON (sorted keys, compact separators, one
line per task, splits in sorted order). A change to a generator's old code path, to a frozen
layout file or to a suite builder shows up here as a changed digest.
"""

import hashlib
import json

import pytest
from clew.envs.suites import get_suite, suite_builders

PINNED = {
    "exploration-v1": ("6bd746d54e334e0079fc97ac20cf057a2604c7489acaf704738b4bf2b10a5959", 24),
    "gridmap-mini": ("1d6a2d01d7be30275464c46d0ff0e08e89c3bb0e90568b63c919674c162c3ee2", 8),
    "gridmap-semantic": ("a2b215236f4b5c75b5893f10776bb46133853f30ee2437425f1a4573d8209c22", 40),
    "gridmap-v1": ("9f225a715bf9ce3d179ced1d3466aef9eee4123bd350f852b96b37fae20b4ec0", 90),
    "paper-003-difficulty":
        ("1ceed24b553bc1f26a507bdb2ee708d57c6c6e4f38834280c8bb690a2c1a09bf", 63),
    "paper-003-general": ("e3dab7eed2343fde74af81690061a10f4ed3a2002db37afaec812f21f2c48f7e", 300),
    # the version-1 contents of the two fixed-instance suites, now under -v1 names
    "paper-003-main-v1": ("392042469d3eb8a53c17bebf94558494a0acd3b533c6f8e70cd002d6ae5be266", 77),
    "paper-003-additional-v1":
        ("96ffb50a794a82fcefbc1472418de9b0353141cecbfa2ca323d2f9f67506f33f", 84),
    "rooms-4x4": ("d3027129647033afd46b0cac1414a1a7036b8e8bb8dde5b3421eb47e69efdf29", 40),
    "rooms-5x5": ("1a4dcb812d536212b4d0cea898906f9af068288b146df95b7b1a65f4f8518143", 40),
    "rooms-7x7": ("0cbb0ce1aa2810589a4413e44270d2e219037561a549073f7140bfe07e9242ac", 40),
    "rooms-7x7-exploit": ("e9273eda746c547fec00e736d125ce397ca0ef4d7ac2f02831862504b8e7a58d", 40),
    "rooms-7x7-explore": ("52641373c887028a2f8aec9838e35236012425fb654f01bd0d7fbce2fcc15174", 40),
    "rooms-v1": ("4ea65eb3b55e1e50395dc7e6156b3103215e3a2c6f8fb59f855eaf903b1692e9", 120),
    # version 2 of the rooms suites, as on main at f214677, before version 3 existed
    "rooms-v2": ("b8ddeee01a70366d89fd07c39ab21c0a685a8ba13bb68747ab1fa9e1c6a911e8", 120),
    "rooms-v2-4x4": ("c60d18be7409f490fa0381549b94dbb44e3b2288fa1da9853abff6c9d1b6be62", 40),
    "rooms-v2-5x5": ("14da09472545f0e22b1598ff962cdd0fe4313bb00f699508c1e9891a36f20a85", 40),
    "rooms-v2-7x7": ("cb2d6b6fba74522c5734a6a9a45efd8a9905b341d5d423e10f4e1e74801f8c4e", 40),
    "rooms-v2-7x7-exploit":
        ("672278ead842d0c35fb396265fcd44f1d1d7fee12e6d95086b28b32955e5efc8", 40),
    "rooms-v2-7x7-explore":
        ("25ce139e7c12a9cd6408ab6019d1bae66c77cb125b2904eec35c4ee3c5a6db0a", 40),
    "exploration-v2": ("2f8a7373f6d1f51b79c95217dc6f463e0f9239e14a689dfbdc150962e47ac5a1", 24),
}


def digest(name: str) -> tuple[str, int]:
    suite = get_suite(name)
    h, n = hashlib.sha256(), 0
    for split in sorted(suite.splits):
        for task in suite.splits[split]:
            h.update(json.dumps(task.to_dict(), sort_keys=True, separators=(",", ":")).encode())
            h.update(b"\n")
            n += 1
    return h.hexdigest(), n


@pytest.mark.parametrize("name", sorted(PINNED))
def test_old_suite_reproduces_exactly(name):
    assert name in suite_builders(), f"old suite {name} must stay loadable"
    assert digest(name) == PINNED[name]


def test_superseded_suites_point_to_registered_current_ones():
    from clew.envs.suites import current_suite, replacements

    for old, new in replacements().items():
        assert old in suite_builders() and new in suite_builders()
        assert current_suite(old) not in replacements()
        assert get_suite(current_suite(old)).version > get_suite(old).version
    assert current_suite("gridmap-v1") == "gridmap-v2"
    assert current_suite("exploration-v2") == "exploration-v2"


def test_clew_suites_says_which_version_is_current(capsys):
    from clew.cli.main import main

    assert main(["suites"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "superseded by rooms-v3" in lines["rooms-v1"]
    assert "superseded by rooms-v3" in lines["rooms-v2"]
    assert "superseded by paper-003-main" in lines["paper-003-main-v1"]
    for name in ("gridmap-v2", "rooms-v3", "exploration-v2", "paper-003-main"):
        assert " current " in lines[name]


def test_exploration_v2_uses_the_v2_generators():
    v1, v2 = get_suite("exploration-v1"), get_suite("exploration-v2")
    assert v2.version == 2 and {len(v2.split(s)) for s in ("train", "test")} == {12}
    tasks = v2.split("all")
    assert all(t.id.startswith("xv2/") for t in tasks)
    assert not {t.id for t in tasks} & {t.id for t in v1.split("all")}
    for t in tasks:
        if t.env == "gridmap":
            assert t.params["presets"]["generator_version"] == 2
        if t.env == "rooms":
            assert t.params["layout"]["meta"]["generator_version"] == 2
            assert len(t.params["layout"]["doors"]) == 15  # a spanning tree of 4x4 rooms
    # families the versions do not touch give the same tasks under other ids
    same = [(t.env, t.params) for t in v1.split("all") if t.env not in ("gridmap", "rooms")]
    assert same == [(t.env, t.params) for t in tasks if t.env not in ("gridmap", "rooms")]
