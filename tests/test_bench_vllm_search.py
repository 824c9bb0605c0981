"""The engine-use benchmark's own arithmetic (benchmarks/bench_vllm_search.py; the benchmark
itself needs the vLLM venv and runs with ``make bench``)."""

import importlib.util
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from clew.envs import registry

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def bench(monkeypatch):
    """The benchmark module; what it sets on import (an env in the registry, environment
    variables) goes when the test ends."""
    monkeypatch.setattr(registry, "ENVS", dict(registry.ENVS))
    monkeypatch.setattr(os, "environ", dict(os.environ))
    spec = importlib.util.spec_from_file_location(
        "bench_vllm_search", ROOT / "benchmarks" / "bench_vllm_search.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look it up there
    spec.loader.exec_module(module)
    return module


def test_sequences_in_flight_and_idle_time(bench):
    def req(n, sent, done):
        return bench.EngineRequest([1], SimpleNamespace(n=n), sent, done, n)

    # 2 samples over [0, 2], 4 over [1, 3], nothing over [3, 4], 1 over [4, 5]
    log = [req(4, 1.0, 3.0), req(2, 0.0, 2.0), req(1, 4.0, 5.0)]
    seqs, idle = bench.in_flight(log)
    assert abs(seqs - (2 * 1 + 6 * 1 + 4 * 1 + 0 + 1 * 1) / 5) < 1e-9
    assert abs(idle - 1.0) < 1e-9


def test_variants_read_the_presets_waves(bench):
    assert bench.parse_variants("1:1,d:1,d:16", "4") == [("1", 1), ("4", 1), ("4", 16)]
    assert bench.parse_variants("4p:1,d:16", "4p") == [("4p", 1), ("4p", 16)]
    with pytest.raises(ValueError):
        bench.parse_variants("x:1", "4")


def test_the_formatted_models_data_do_not_depend_on_call_order(bench, monkeypatch, tmp_path):
    # the fake's answers are drawn from each request, and the rows put in a seeded order, so
    # the search may reach the fake in any order
    from clew.agents.lm.base import ChatRequest, Sampling

    seen = {}

    def fake_train(cfg):
        seen.setdefault("rows", []).append(Path(cfg.data).read_text())

    async def fake_search(lm, args, wave, episodes):
        reqs = [ChatRequest([{"role": "user", "content": f"prompt {i}"}],
                            Sampling(choices=["up", "down"])) for i in range(6)]
        for r in (reqs if seen.get("reverse") is None else reqs[::-1]):
            await lm.generate([r])

    from clew.training import train
    monkeypatch.setattr(train, "train", fake_train)
    monkeypatch.setattr(bench, "search_run", fake_search)
    monkeypatch.setattr("clew.agents.lm.tiny.build_tiny_model", lambda dst, corpus=None: dst)
    args = SimpleNamespace(seed=0, format_rows=2000, format_steps=1)
    for reverse in (None, True):
        seen["reverse"] = reverse
        bench.formatted_model(tmp_path / "formatted", args, "4")
    assert len(seen["rows"]) == 2 and seen["rows"][0] == seen["rows"][1]
    assert seen["rows"][0].count("\n") == 6


def test_caps_are_positive_sequence_counts(bench):
    assert bench.parse_caps("16,48, 128") == [16, 48, 128]
    with pytest.raises(bench.argparse.ArgumentTypeError, match="positive"):
        bench.parse_caps("16,0")
