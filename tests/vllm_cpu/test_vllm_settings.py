"""Engine settings on a real (CPU) vLLM engine (issue 17): limits chosen for the device and
recorded in the run config, one engine shared by roles, a LoRA rank vLLM does not list, and a
shard rerun with other engine options that resumes and merges.

Runs in .venv-vllm (scripts/setup_vllm_cpu.sh); skipped where vllm is not installed.
"""

from __future__ import annotations

import asyncio
import sys
import typing
from pathlib import Path

import pytest

pytest.importorskip("vllm.sampling_params")  # a stray folder named vllm must not count

from clew.agents.lm import spec as lm_spec
from clew.agents.lm.hf import HFModel
from clew.agents.lm.spec import load_model
from clew.agents.lm.vllm_backend import LORA_RANKS
from clew.cli.main import main
from clew.envs.base import Task
from clew.records import RunDir
from clew.runner.registry import build_agent
from clew.runner.shards import merge_shards
from vllm_helpers import CHATS, ENGINE, greedy, summary

sys.path.insert(0, str(Path(__file__).parents[1]))
from toyenv import register

pytestmark = pytest.mark.vllm
register()


async def _all(lm, requests):
    return await asyncio.gather(*(lm.complete(r) for r in requests))


def test_lora_ranks_are_the_ones_installed_vllm_accepts():
    from vllm.config.lora import MaxLoRARanks

    assert LORA_RANKS == typing.get_args(MaxLoRARanks)


def test_a_rank_4_adapter_is_served_with_rank_8(lively_model_dir, tmp_path, lora_maker):
    """vLLM refuses max_lora_rank=4; the adapter's rank is rounded up and it serves unchanged."""
    adapter = lora_maker(lively_model_dir, tmp_path / "lora-r4", rank=4)
    lm = load_model(f"vllm:{lively_model_dir}+lora:{adapter}", shared=False, **ENGINE)
    try:
        assert lm.settings["max_lora_rank"] == 8
        requests = [greedy(c) for c in CHATS[:3]]
        got = asyncio.run(_all(lm, requests))
    finally:
        lm.close()
    ref = HFModel(lively_model_dir, adapter=adapter)
    want = asyncio.run(_all(ref, requests))
    assert [summary(x) for x in got] == [summary(x) for x in want]


@pytest.fixture
def suite(tmp_path):
    tasks = [Task("toy-line", {"length": 2, "budget": 3}, seed=i, id=f"line-{i}")
             for i in range(4)]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(t.to_json() + "\n" for t in tasks))
    return str(path)


def _search(spec, suite, out, shard, *options, resume=False):
    argv = ["eval", "--agent", "react", "--model", spec, "--suite", suite, "--out", str(out),
            "--shard", shard, "--concurrency", "2", "max_episode_steps=2", "agent_options.max_tokens=8",
            *(f"agent_options.model_options.{k}={v}" for k, v in
              {"dtype": ENGINE["dtype"], "max_model_len": ENGINE["max_model_len"],
               "enforce_eager": ENGINE["enforce_eager"]}.items()),
            *options]
    return main(argv + (["--resume"] if resume else []))


def _close_engines():
    """What a process exit does: the next run starts its own engine."""
    for entries in list(lm_spec._CACHE.values()):
        for _, model in entries:
            close = getattr(model, "close", None)
            if close:
                close()
    lm_spec._CACHE.clear()


def test_engine_settings_recorded_and_a_rerun_shard_with_other_options_merges(
        lively_model_dir, suite, tmp_path):
    spec = f"vllm:{lively_model_dir}"
    try:
        # shard 0 with the engine limits clew chooses for this device (CPU)
        assert _search(spec, suite, tmp_path / "s0", "0/2") == 0
        engine = RunDir(tmp_path / "s0").config()["engines"][spec]
        assert engine["max_num_seqs"] == 256                # clew's CPU choice, not vLLM's 128
        assert engine["max_num_batched_tokens"] == 2048     # prefill kept whole on CPU
        assert engine["max_model_len"] == 256
        assert {"max_num_seqs", "enable_chunked_prefill"} <= set(engine["chosen_by_clew"])
        assert engine["device"]["platform"] == "cpu"

        # the roles of an R-MCTS agent on the same model share the run's engine
        lm = load_model(spec, dtype="float32", max_model_len=256, enforce_eager=True)
        agent = build_agent("rmcts", model=spec, model_options=dict(ENGINE),
                            role_models={"policy": spec, "value": f"{spec}/"},
                            reflection=False, memory={"enabled": False})
        assert agent.policy.lm is lm and agent.value.lm is lm

        # the node died after one episode; the rerun gets other engine options
        _close_engines()
        episodes = (tmp_path / "s0" / "episodes.jsonl").read_text().splitlines()
        (tmp_path / "s0" / "episodes.jsonl").write_text(episodes[0] + "\n")
        assert _search(spec, suite, tmp_path / "s0", "0/2",
                       "agent_options.model_options.max_num_seqs=32",
                       "agent_options.model_options.enable_prefix_caching=false",
                       resume=True) == 0
        s0 = RunDir(tmp_path / "s0")
        assert len(s0.episodes()) == 2
        assert s0.config()["engines"][spec]["max_num_seqs"] == 32
        assert s0.config()["engines"][spec]["enable_prefix_caching"] is False

        _close_engines()
        assert _search(spec, suite, tmp_path / "s1", "1/2") == 0
        merged, counts = merge_shards([tmp_path / "s0", tmp_path / "s1"], tmp_path / "merged")
        assert counts["episodes"] == 4
        assert [m["engines"][spec]["max_num_seqs"] for m in merged.config()["merged_from"]] == \
            [32, 256]
    finally:
        _close_engines()
