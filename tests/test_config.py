"""Config loading: YAML + flags + key=value overrides, validated up front, errors name the field."""

import pytest
from clew.runner.config import ConfigError, EvalConfig, load_config


def test_flags_win_over_file_and_overrides_win_over_flags(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("agent: random\nsuite: gridmap-mini:test\nconcurrency: 2\n")
    cfg = load_config(EvalConfig, str(f), ["concurrency=8", "agent_options.temperature=0.5"],
                      base={"concurrency": 4, "agent": "frontier"})
    assert cfg.concurrency == 8 and cfg.agent == "frontier"
    assert cfg.agent_options == {"temperature": 0.5}


@pytest.mark.parametrize("overrides,field", [
    (["concurrency=0"], "concurrency"),
    (["concurrency=many"], "concurrency"),
    (["suite=gridmap-v1"], "suite"),
    (["shard=3/2"], "shard"),
    (["colour=blue"], "colour"),
])
def test_bad_values_name_the_field(overrides, field):
    with pytest.raises(ConfigError, match=rf"\b{field}\b"):
        load_config(EvalConfig, None, ["agent=random", "suite=gridmap-mini:test", *overrides])


def test_bad_files_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(EvalConfig, str(tmp_path / "missing.yaml"), [])
    bad = tmp_path / "bad.yaml"
    bad.write_text("agent: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(EvalConfig, str(bad), [])
    with pytest.raises(ConfigError, match="key=value"):
        load_config(EvalConfig, None, ["agent"])
