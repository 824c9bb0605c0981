"""Engine settings in the run config, and engine-only options across resume and merge (issue 17):
a shard rerun with another tensor-parallel size or memory fraction continues the same run."""

from __future__ import annotations

import pytest
import yaml
from clew.agents.lm import spec as lm_spec
from clew.envs.base import Task
from clew.records import RunDir
from clew.runner.config import ConfigError, EvalConfig
from clew.runner.evaluate import evaluate
from clew.runner.shards import MergeError, merge_shards
from test_lm_engine_settings import fake_engines
from toyenv import register

register()
SPEC = "vllm:Qwen/Qwen2.5-7B-Instruct"


@pytest.fixture
def engines(monkeypatch):
    return fake_engines(monkeypatch)


@pytest.fixture
def suite(tmp_path):
    tasks = [Task("toy-line", {"length": 2, "budget": 4}, seed=i, id=f"line-{i}")
             for i in range(4)]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(t.to_json() + "\n" for t in tasks))
    return str(path)


def run(suite, out, shard, resume=False, **model_options):
    lm_spec._CACHE.clear()   # each run is a new process: a new engine
    cfg = EvalConfig(agent="react", suite=suite, out=str(out), shard=shard, resume=resume,
                     agent_options={"model": SPEC, "max_tokens": 16,
                                    "model_options": {"max_model_len": 4096, **model_options}})
    return evaluate(cfg, progress=False)[0]


def test_engine_settings_are_recorded_in_the_run_config(engines, suite, tmp_path):
    rundir = run(suite, tmp_path / "s0", "0/2", tensor_parallel_size=2, max_num_seqs=512)
    config = rundir.config()
    assert config["engines"] == {SPEC: {"max_num_seqs": 512, "tensor_parallel_size": 2}}
    assert len(rundir.episodes()) == 2


def test_rerun_shard_with_other_engine_options_resumes_and_merges(engines, suite, tmp_path):
    s0 = run(suite, tmp_path / "s0", "0/2", tensor_parallel_size=2)
    # the node died after its first episode: drop the second, rerun with another layout and a
    # lower memory fraction (the usual out-of-memory fix)
    first = s0.episodes_file.read_text().splitlines()[0]
    s0.episodes_file.write_text(first + "\n")
    s0 = run(suite, tmp_path / "s0", "0/2", resume=True, tensor_parallel_size=1,
             gpu_memory_utilization=0.8, max_num_seqs=256)
    assert len(s0.episodes()) == 2
    assert s0.config()["engines"][SPEC] == {"max_num_seqs": 256, "tensor_parallel_size": 1}
    s1 = run(suite, tmp_path / "s1", "1/2", tensor_parallel_size=4)
    merged, counts = merge_shards([s0.path, s1.path], tmp_path / "merged")
    assert counts["episodes"] == 4
    assert [m["engines"][SPEC]["tensor_parallel_size"] for m in merged.config()["merged_from"]] \
        == [1, 4]


def test_options_that_change_the_experiment_still_refuse(engines, suite, tmp_path):
    run(suite, tmp_path / "s0", "0/2")
    with pytest.raises(ConfigError, match="cannot resume .*'agent_options'"):
        run(suite, tmp_path / "s0", "0/2", resume=True, max_model_len=8192)
    run(suite, tmp_path / "s1", "1/2", dtype="float32")
    with pytest.raises(MergeError, match="config field 'agent_options'"):
        merge_shards([tmp_path / "s0", tmp_path / "s1"], tmp_path / "merged")
    # what was recorded stays
    assert len(RunDir(tmp_path / "s0").episodes()) == 2
    assert "dtype" not in yaml.safe_load((tmp_path / "s0" / "config.yaml").read_text())[
        "agent_options"]["model_options"]
