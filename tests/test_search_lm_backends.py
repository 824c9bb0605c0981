"""R-MCTS_MAD end to end with a real (tiny, random) model through the hf backend on CPU.

The tiny model writes gibberish, so expansions mostly end in NONE edges and judges rarely parse:
what is checked is the plumbing — requests of every role reach the model, usage is recorded per
role, trees are written, the improvement loop runs and writes into a persisted memory.
"""

from __future__ import annotations

import asyncio

import pytest
from clew.envs.base import Task
from clew.envs.registry import register
from clew.runner.episodes import run_episode
from clew.runner.registry import build_agent
from test_search_agents import ToyTreeEnv


class LenientToyEnv(ToyTreeEnv):
    """The toy tree, but any text parses (to a or b by its length), so a gibberish model still
    produces edges and every role gets called."""

    name = "toy-lenient"

    def parse_action(self, text: str):
        return "a" if len(text.strip()) % 2 else "b"


register("toy-lenient", "test_search_lm_backends:LenientToyEnv")
TASK = Task("toy-lenient", {"goal": ["b", "a"]}, seed=0, id="lenient-0")


@pytest.mark.slow
def test_rmcts_mad_runs_on_the_hf_backend(lively_model_dir, tmp_path, monkeypatch):
    # The random model never finishes within a dozen tokens, and a cut reply is a parse failure
    # (docs/methods/parsing.md); read its cut replies as complete so every role gets called.
    from clew.agents import parsing

    monkeypatch.setattr(parsing, "cut", lambda finish_reason: False)
    agent = build_agent(
        "rmcts-mad", model=f"hf:{lively_model_dir}",
        search={"branching_factor": 2, "n_simulations": 2},
        policy={"n_samples_min": 4, "max_tokens": 12},
        value={"debate": {"judge_samples_per_order": 1, "argue_max_tokens": 12,
                          "judge_max_tokens": 12}},
        reflection={"reflector": {"max_tokens": 12},
                    "policy": {"threshold": -1.0}, "value": {"threshold": -1.0}},
        memory={"dir": str(tmp_path / "memory")})
    assert agent.kind == "lm"

    async def play():
        trees = []
        rec = await run_episode(agent, TASK, max_steps=2, on_tree=lambda t, d: trees.append(d))
        await agent.memory.settle()
        return rec, trees

    rec, trees = asyncio.run(play())
    assert rec["outcome"]["steps"] >= 1 and trees
    assert {"policy", "debate", "judge"} <= set(rec["usage"])
    assert all(u["prompt_tokens"] > 0 for u in rec["usage"].values())
    report = agent.last_improvement
    assert report is not None
    # reflections (if any step was eligible) landed in the persisted memory
    written = len(report.policy_written) + len(report.value_written)
    lines = sum(len((tmp_path / "memory" / f"{s}.jsonl").read_text().splitlines())
                for s in ("policy", "value") if (tmp_path / "memory" / f"{s}.jsonl").exists())
    assert lines == written
