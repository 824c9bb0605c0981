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


def test_variants_read_the_presets_wave_size(bench):
    assert bench.parse_variants("1:1,d:1,d:16", 4) == [(1, 1), (4, 1), (4, 16)]
