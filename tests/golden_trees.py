"""Search trees pinned before leaf-parallel waves existed (issue 12): with ``wave_size = 1`` the
search must build exactly these trees again.

The pinned file ``tests/golden/mcts_k1_trees.json.gz`` was written by this module on the commit
before waves (``python tests/golden_trees.py --write``). It holds, per case, every tree of a few
grid-map episodes: heuristic roles (MCTS, MCTS with cached snapshots, best-first), and LM roles
with a model whose answers depend only on the request (single value and debate), so concurrent
calls cannot change what any call returns.

Only what the tree recorded before waves is compared: ``seconds`` (wall time) is dropped, the
fields added with waves are ignored, and ``meta.search_config`` is compared on the options that
existed then.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from clew.agents.lm.base import ChatRequest, Completion, LanguageModel
from clew.agents.usage import Usage

GOLDEN = Path(__file__).parent / "golden" / "mcts_k1_trees.json.gz"
MOVES = ("up", "down", "left", "right", "up", "left", "stay")


class HashLM(LanguageModel):
    """Answers that depend only on the request (messages, role, seed) and the sample index."""

    spec = "hash"

    def __init__(self, latency: float = 0.0):
        self.latency = latency
        self.calls: list[ChatRequest] = []

    def text(self, req: ChatRequest, j: int) -> str:
        blob = json.dumps([req.messages, req.role, req.sampling.seed, j]).encode()
        h = int.from_bytes(hashlib.sha256(blob).digest()[:8], "big")
        if req.role == "policy":
            return f"I think so.\nNext action: ```{MOVES[h % len(MOVES)]}```"
        if req.role in ("value", "judge"):
            return f"Thoughts: it looks {h % 7}.\nSTATUS CODE: {'ABCDE'[h % 5]}"
        return f"argument {h % 1000}"

    async def generate(self, requests: list[ChatRequest]) -> list[list[Completion]]:
        self.calls.extend(requests)
        if self.latency:
            await asyncio.sleep(self.latency)
        return [[Completion(t, "stop", Usage(10, len(t.split()), 1))
                 for t in (self.text(r, j) for j in range(r.sampling.n))] for r in requests]


def case_options() -> dict[str, tuple[str, dict[str, Any], int, int]]:
    """name -> (agent, options, tasks, max_steps); LM cases get ``model`` in :func:`run_case`."""
    heur = {"seed": 3, "value": {"noise": 0.3}}
    lm = {"seed": 5, "policy": {"n_samples_min": 6}, "search": {"branching_factor": 3}}
    return {
        "heuristic-mcts": ("mcts", {**heur, "search": {"n_simulations": 20}}, 3, 5),
        "heuristic-mcts-cached": ("mcts", {**heur, "search": {"n_simulations": 12,
                                                              "reexecute_edges": False}}, 2, 4),
        "heuristic-best-first": ("best-first", {**heur, "search": {"n_simulations": 10}}, 2, 3),
        "lm-single": ("mcts", {**lm, "value": {"single": {"n": 3}},
                               "search": {"branching_factor": 3, "n_simulations": 8}}, 1, 3),
        "lm-debate": ("mcts", {**lm, "value": {"kind": "debate"},
                               "search": {"branching_factor": 3, "n_simulations": 8}}, 1, 3),
    }


def run_case(name: str, search: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every tree of the case's episodes, in order; ``search`` adds search options."""
    from clew.envs.suites import resolve
    from clew.runner.episodes import run_episode
    from clew.runner.registry import build_agent

    agent, options, n_tasks, max_steps = case_options()[name]
    options = json.loads(json.dumps(options))
    options["search"] = {**options.get("search", {}), **(search or {})}
    if name.startswith("lm-"):
        options["model"] = HashLM()
    trees: list[dict[str, Any]] = []
    for task in resolve("gridmap-v1:test")[:n_tasks]:
        asyncio.run(run_episode(build_agent(agent, **options), task, max_steps=max_steps,
                                on_tree=lambda t, tree: trees.append(tree)))
    return trees


def comparable(tree: dict[str, Any], config_keys: set[str] | None = None) -> dict[str, Any]:
    """The part of a tree that existed before waves (see the module docstring)."""
    tree = json.loads(json.dumps(tree))
    tree["counters"].pop("seconds", None)
    tree.pop("waves", None)
    tree.pop("traversal_waves", None)
    for node in tree["nodes"]:
        node.pop("wave", None)
    cfg = tree["meta"].get("search_config")
    if cfg is not None and config_keys is not None:
        tree["meta"]["search_config"] = {k: v for k, v in cfg.items() if k in config_keys}
    return tree


def write() -> None:
    data = {name: [comparable(t) for t in run_case(name)] for name in case_options()}
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    raw = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    GOLDEN.write_bytes(gzip.compress(raw, mtime=0))
    print(GOLDEN, {k: len(v) for k, v in data.items()}, len(raw))


def load() -> dict[str, list[dict[str, Any]]]:
    return json.loads(gzip.decompress(GOLDEN.read_bytes()))


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
