"""Shared by the vLLM integration tests: prompts, settings for a small CPU engine."""

from __future__ import annotations

import os

from clew.agents.lm.base import ChatRequest, Sampling

# A small CPU engine (docs/scale-out.md): 1 GiB KV cache, short context, no graph capture, float32 so
# greedy output matches the transformers backend exactly.
ENGINE = {"dtype": "float32", "max_model_len": 256, "enforce_eager": True}
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

CHATS = [
    [{"role": "system", "content": "You are an agent."},
     {"role": "user", "content": f"move {w} to the key {i} and open the door"}]
    for i, w in enumerate(["up", "down", "left", "right", "up up", "back"])
] + [[
    {"role": "system", "content": "You explore rooms."},
    {"role": "user", "content": "You are at [0, 3]. Legal moves: up, right."},
    {"role": "assistant", "content": "Thought: go up.\nAction: up"},
    {"role": "user", "content": "You are at [0, 2]. A door is here."},
]]


def greedy(messages, max_tokens: int = 32, **kw) -> ChatRequest:
    return ChatRequest(messages, Sampling(temperature=0.0, max_tokens=max_tokens, **kw))


def summary(completions) -> list[tuple]:
    """What must agree between backends: text, finish reason, token counts."""
    return [(c.text, c.finish_reason, c.usage.prompt_tokens, c.usage.completion_tokens)
            for c in completions]


def reflecting_rmcts_mad(model, max_tokens: int, n_samples_min: int, memory: dict):
    """R-MCTS_MAD at the smallest settings that still call every role (two simulations, two
    children, one judge sample per order), every step eligible for a reflection (thresholds -1)."""
    from clew.runner.registry import build_agent

    return build_agent(
        "rmcts-mad", model=model,
        search={"branching_factor": 2, "n_simulations": 2},
        policy={"n_samples_min": n_samples_min, "max_tokens": max_tokens},
        value={"debate": {"judge_samples_per_order": 1, "argue_max_tokens": max_tokens,
                          "judge_max_tokens": max_tokens}},
        reflection={"reflector": {"max_tokens": max_tokens},
                    "policy": {"threshold": -1.0}, "value": {"threshold": -1.0}},
        memory=memory)
