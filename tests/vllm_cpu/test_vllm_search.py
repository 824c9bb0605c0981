"""Search agents through the in-process vLLM engine on the tiny model (issue 5): MCTS with the
debate value, and R-MCTS_MAD with its reflection loop and FAISS memory end to end.

Runs in .venv-vllm (scripts/setup_vllm_cpu.sh); skipped where vllm is not installed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm.sampling_params")  # a stray folder named vllm must not count

from clew.envs.base import Task
from clew.envs.registry import register
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent
from vllm_helpers import reflecting_rmcts_mad

sys.path.insert(0, str(Path(__file__).parents[1]))
from test_search_lm_backends import LenientToyEnv  # noqa: F401  (the env class)

pytestmark = pytest.mark.vllm
register("toy-lenient", "test_search_lm_backends:LenientToyEnv")


def test_mcts_mad_runs_on_the_vllm_engine(base_engine, monkeypatch):
    # The random model never finishes within a few tokens, and a cut reply is a parse failure
    # (docs/methods/parsing.md); read its cut replies as complete so every role gets called.
    from clew.agents import parsing

    monkeypatch.setattr(parsing, "cut", lambda finish_reason: False)
    agent = build_agent(
        "rmcts-mad", model=base_engine, reflection=False, memory={"enabled": False},
        search={"branching_factor": 2, "n_simulations": 3},
        policy={"n_samples_min": 8, "max_tokens": 16},
        value={"debate": {"judge_samples_per_order": 2, "argue_max_tokens": 16,
                          "judge_max_tokens": 16}})
    trees = []
    rec = asyncio.run(run_episode(agent, Task("toy-lenient", {"goal": ["b", "a"]}, id="v"),
                                  max_steps=2, on_tree=lambda t, d: trees.append(d)))
    assert trees and rec["outcome"]["steps"] >= 1
    assert {"policy", "debate", "judge"} <= set(rec["usage"])
    policy = rec["usage"]["policy"]
    # one request per expansion with 8 samples: completions are counted per sample
    assert policy["calls"] == sum(t["counters"]["policy_calls"] for t in trees)


def test_rmcts_mad_with_reflection_memory_on_the_vllm_engine(base_engine, tmp_path, monkeypatch):
    """R-MCTS end to end on vLLM: search, debate value, then reflections written to the
    persisted memory after the episode (their usage in the record), retrieved by the next."""
    # The random model never finishes within a few tokens, and a cut reply is a parse failure
    # (docs/methods/parsing.md); read its cut replies as complete so every role gets called.
    from clew.agents import parsing

    monkeypatch.setattr(parsing, "cut", lambda finish_reason: False)
    memory_dir = tmp_path / "memory"

    def agent():
        return reflecting_rmcts_mad(base_engine, max_tokens=12, n_samples_min=4,
                                    memory={"dir": str(memory_dir), "min_score": -1.0})

    task = Task("toy-lenient", {"goal": ["b", "a"]}, id="v1")
    first = agent()
    rec = asyncio.run(run_episode(first, task, max_steps=2))
    written = first.last_improvement
    assert written is not None
    n_written = len(written.policy_written) + len(written.value_written)
    assert n_written > 0, "thresholds of -1 make every step eligible for reflection"
    assert rec["usage"]["reflection"]["calls"] > 0  # the runner awaited the reflection loop
    lines = sum(len((memory_dir / f"{s}.jsonl").read_text().splitlines())
                for s in ("policy", "value") if (memory_dir / f"{s}.jsonl").exists())
    assert lines == n_written
    # a fresh agent on the same store retrieves them into its prompts
    second = agent()
    trees = []
    asyncio.run(run_episode(second, Task("toy-lenient", {"goal": ["b", "a"]}, id="v2"),
                            max_steps=1, on_tree=lambda t, d: trees.append(d)))
    retrieved = [n.get("retrieved_policy_refl") for t in trees for n in t["nodes"]]
    assert any(retrieved), "the second episode should retrieve the first one's reflections"
