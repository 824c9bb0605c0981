"""vLLM engine settings chosen without vLLM (issue 17): LoRA ranks, batch limits per device, the
default context, one engine per model per process, engine-only options. The same code runs a
real CPU engine in tests/vllm_cpu/test_vllm_settings.py."""

from __future__ import annotations

import json

import pytest
from clew.agents.lm import spec as lm_spec
from clew.agents.lm.base import LMError
from clew.agents.lm.fake import FakeLM
from clew.agents.lm.spec import ENGINE_ONLY_OPTIONS, experiment_options, load_model
from clew.agents.lm.vllm_backend import (
    DEFAULT_MAX_MODEL_LEN,
    LORA_RANKS,
    Device,
    _lora_rank,
    batch_limits,
    check_batch_invariant,
    choose_engine_args,
    round_lora_rank,
)

H100 = Device("cuda", "NVIDIA H100 80GB HBM3", 79.2, "9.0")
A100_80 = Device("cuda", "NVIDIA A100-SXM4-80GB", 79.2, "8.0")
A100_40 = Device("cuda", "NVIDIA A100-SXM4-40GB", 39.4, "8.0")
L4 = Device("cuda", "NVIDIA L4", 22.0, "8.9")
CPU = Device("cpu", "cpu")


@pytest.mark.parametrize("rank, served", [(1, 1), (2, 8), (4, 8), (8, 8), (12, 16), (16, 16),
                                          (24, 32), (48, 64), (96, 128), (200, 256),
                                          (300, 320), (400, 512), (512, 512)])
def test_lora_rank_rounds_up_to_one_vllm_accepts(rank, served):
    assert round_lora_rank(rank) == served
    assert served in LORA_RANKS


def test_lora_rank_above_vllms_largest_is_a_clear_error():
    with pytest.raises(LMError, match="LoRA rank 1024 is above the largest rank vLLM serves"):
        round_lora_rank(1024)


def test_adapter_rank_includes_per_module_ranks(tmp_path):
    (tmp_path / "adapter_config.json").write_text(json.dumps(
        {"r": 12, "rank_pattern": {"q_proj": 24}}))
    assert _lora_rank(str(tmp_path)) == 24
    assert round_lora_rank(_lora_rank(str(tmp_path))) == 32
    (tmp_path / "adapter_config.json").write_text("{}")
    with pytest.raises(LMError, match="cannot read the LoRA rank"):
        _lora_rank(str(tmp_path))


@pytest.mark.parametrize("device, world, seqs, tokens", [
    (H100, 1, 1024, 16384),
    (A100_80, 1, 1024, 8192),     # larger token budgets were slower on A100 (vLLM's finding)
    (A100_40, 1, 512, 8192),
    (A100_40, 2, 1024, 8192),     # the KV cache spreads over the tensor-parallel group
    (L4, 1, 256, 8192),
    (L4, 2, 512, 8192),
])
def test_batch_limits_follow_the_device(device, world, seqs, tokens):
    assert batch_limits(device, world) == {"max_num_seqs": seqs, "max_num_batched_tokens": tokens}


def test_batch_limits_on_cpu_and_unknown_platforms():
    assert batch_limits(CPU) == {"max_num_seqs": 256}
    assert batch_limits(Device("rocm", "MI300X", 192.0)) == {}   # vLLM's own defaults


def test_engine_args_chosen_for_a_gpu_and_named():
    args, chosen = choose_engine_args({}, H100, model_context=131072)
    assert args == {"max_model_len": DEFAULT_MAX_MODEL_LEN, "max_num_seqs": 1024,
                    "max_num_batched_tokens": 16384}
    assert chosen == sorted(args)
    # a model with a shorter context keeps its own
    assert choose_engine_args({}, H100, 8192)[0]["max_model_len"] == 8192
    # the tensor-parallel group's memory counts
    assert choose_engine_args({"tensor_parallel_size": 2}, A100_40, 32768)[0]["max_num_seqs"] \
        == 1024


def test_user_options_win_and_auto_context_is_vllms():
    args, chosen = choose_engine_args({"max_num_seqs": 64, "max_model_len": 4096}, H100, 131072)
    assert args == {"max_num_batched_tokens": 16384} and chosen == ["max_num_batched_tokens"]
    args, _ = choose_engine_args({"max_model_len": "auto"}, L4, 131072)
    assert args["max_model_len"] == -1   # vLLM fits the longest context its KV cache holds


def test_cpu_engine_keeps_prefill_whole():
    args, _ = choose_engine_args({}, CPU, 8192)
    assert args == {"max_model_len": 8192, "max_num_seqs": 256,
                    "enable_chunked_prefill": False, "max_num_batched_tokens": 8192}
    args, _ = choose_engine_args({"max_model_len": 256}, CPU, 8192)
    assert args["max_num_batched_tokens"] == 2048
    args, _ = choose_engine_args({"enable_chunked_prefill": True}, CPU, 8192)
    assert "enable_chunked_prefill" not in args and "max_num_batched_tokens" not in args


def test_batch_invariant_mode_needs_a_recent_nvidia_gpu():
    check_batch_invariant("vllm:m", H100)
    check_batch_invariant("vllm:m", A100_40)
    with pytest.raises(LMError, match="compute capability 8.0 or newer.*runs on cpu"):
        check_batch_invariant("vllm:m", CPU)
    with pytest.raises(LMError, match="runs on cuda Tesla T4 7.5"):
        check_batch_invariant("vllm:m", Device("cuda", "Tesla T4", 15.0, "7.5"))


# --- one model instance per process -----------------------------------------------------------
class FakeEngine(FakeLM):
    """Stands in for a vLLM engine: answers ReAct-style, reports settings, can be closed."""

    built = 0

    def __init__(self, options):
        super().__init__(lambda request, i: "Thought: onwards.\nNext action: right")
        FakeEngine.built += 1
        self.options = dict(options)
        self.settings = {"max_num_seqs": options.get("max_num_seqs", 1024),
                         "tensor_parallel_size": options.get("tensor_parallel_size", 1)}
        self.closed = False

    def close(self):
        self.closed = True


def fake_engines(monkeypatch):
    """A fresh model cache whose vllm: models are FakeEngines (no vLLM needed)."""
    monkeypatch.setattr(lm_spec, "_CACHE", {})
    monkeypatch.setattr(FakeEngine, "built", 0)
    real = lm_spec._build

    def build(parsed, options):
        return FakeEngine(options) if parsed.backend == "vllm" else real(parsed, options)

    monkeypatch.setattr(lm_spec, "_build", build)
    return FakeEngine


@pytest.fixture
def engines(monkeypatch):
    return fake_engines(monkeypatch)


def test_same_model_spec_gives_one_engine(engines, tmp_path, monkeypatch):
    model = tmp_path / "model"
    model.mkdir()
    first = load_model(f"vllm:{model}", tensor_parallel_size=2, max_model_len=4096)
    monkeypatch.chdir(tmp_path)
    assert load_model(f"vllm:{model}") is first             # a role asking without options
    assert load_model("vllm:./model/") is first              # the same folder, written otherwise
    assert load_model(f"vllm:{model}", max_model_len=4096) is first
    assert engines.built == 1
    with pytest.raises(LMError, match="Options that differ: max_model_len"):
        load_model(f"vllm:{model}", max_model_len=8192)
    assert load_model("vllm:Qwen/Qwen2.5-7B-Instruct") is not first   # another model
    first.close()   # a closed engine is replaced, not handed out
    assert load_model(f"vllm:{model}") is not first and engines.built == 3


def test_light_backends_build_another_instance_for_other_options(engines):
    a = load_model("openai:http://127.0.0.1:9/v1#m", timeout=5.0)
    assert load_model("openai:http://127.0.0.1:9/v1/#m") is a
    b = load_model("openai:http://127.0.0.1:9/v1#m", timeout=9.0)
    assert b is not a and load_model("openai:http://127.0.0.1:9/v1#m", timeout=9.0) is b


def test_roles_share_the_runs_engine(engines):
    from clew.runner.registry import build_agent

    spec = "vllm:Qwen/Qwen2.5-7B-Instruct"
    build_agent("rmcts", model=spec, model_options={"gpu_memory_utilization": 0.9},
                role_models={"policy": spec, "value": spec}, reflection=False,
                memory={"enabled": False})
    [engine] = [m for entries in lm_spec._CACHE.values() for _, m in entries]
    assert engines.built == 1 and engine.options == {"gpu_memory_utilization": 0.9}


def test_engine_only_options_are_not_part_of_the_experiment():
    opts = {"model": "vllm:M", "seed": 1, "model_options": {
        "tensor_parallel_size": 4, "gpu_memory_utilization": 0.8, "max_num_seqs": 64,
        "max_model_len": 8192, "dtype": "bfloat16"}}
    assert experiment_options(opts) == {"model": "vllm:M", "seed": 1, "model_options": {
        "max_model_len": 8192, "dtype": "bfloat16"}}
    assert opts["model_options"]["tensor_parallel_size"] == 4     # the input is not changed
    served = {"model": "openai:http://h:8000/v1#M", "model_options": {"timeout": 30.0}}
    assert experiment_options(served)["model_options"] == {}
    assert experiment_options({"seed": 1}) == {"seed": 1}
    assert "max_model_len" not in ENGINE_ONLY_OPTIONS["vllm"]
