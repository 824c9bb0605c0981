"""Benchmark (c): vLLM throughput during a tree search, and its prefix-cache hit rate (issue 7).

An MCTS run with LM roles (the ``mcts`` preset: LM policy with ``n`` samples per
expansion, single-agent value with ``n`` samples and a rubric; no reflection, because the memory
needs FAISS, which the vLLM venv lacks) plays several grid-map tasks at once through the episode
runner. Its model is the in-process ``vllm`` backend (:class:`clew.agents.lm.vllm_backend.VLLMModel`,
prefix caching on) serving the tiny local model with larger random weights, so that output varies
and sometimes ends early (as the tests' "lively" model). A wrapper logs every request the search
sends. Then the same requests (same token ids, same ``SamplingParams`` via
:func:`~clew.agents.lm.vllm_backend.sampling_params`, seeds included, so the same outputs) go to
``vllm.LLM.generate`` as one offline batch on an engine with the same settings.

Figures:

* ``throughput_ratio``: generated tokens per second of the search run (wall time of the whole
  run, framework time included) over that of the offline batch. Target >= 0.7.
* ``prefix_cache_hit_rate``: vLLM's own counters ``vllm:prefix_cache_hits`` /
  ``vllm:prefix_cache_queries`` over the search run, i.e. prompt tokens served from the cache per
  prompt token queried. vLLM V1 runs the ``n`` samples of a request as ``n`` engine requests that
  all query the cache, so this counts each prompt ``n`` times. Target >= 0.6.
* ``cross_request_hit_rate``: the stricter figure, each request's prompt counted once: the
  logged requests are replayed one at a time in arrival order, ``n=1`` and one output token, on the
  offline engine with its prefix cache reset, summing ``RequestOutput.num_cached_tokens``. It
  measures how much of a prompt an earlier request had already computed, without the free reuse
  between samples of one request.

The tiny model is gibberish, so the grid-map env used here parses any text to a legal move
(a crc32 of the text picks it); otherwise no proposal would parse and no tree would grow. Prompts,
trajectories and request shapes are the real ones. Values all fail to parse (v = 0), which only
changes which leaves MCTS selects.

Runs with the vLLM venv (.venv-vllm, scripts/setup_vllm_cpu.sh). Started by another Python
(``make bench`` uses the main venv), it re-executes itself with .venv-vllm/bin/python when that
venv exists, and otherwise prints a one-line ``{"benchmark": ..., "skipped": reason}``. Prints one
JSON line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# stdout carries the JSON line only: vLLM's log (warnings and up) goes to stderr
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")

BENCHMARK = "vllm_search"
ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"


def _vllm_missing() -> str | None:
    """Why vllm cannot be used here, or None."""
    try:
        import vllm.sampling_params  # noqa: F401
    except ImportError as exc:
        return f"vllm is not importable ({exc})"
    return None


def _ensure_vllm() -> None:
    """Re-exec under .venv-vllm if vllm is missing here; print a skip line if that fails."""
    import json

    why = _vllm_missing()
    if why is None:
        return
    if VLLM_PYTHON.exists() and os.environ.get("CLEW_BENCH_VLLM_REEXEC") != "1":
        os.environ["CLEW_BENCH_VLLM_REEXEC"] = "1"  # never loop if that venv lacks vllm too
        sys.stdout.flush()
        os.execv(str(VLLM_PYTHON), [str(VLLM_PYTHON), str(Path(__file__).resolve()),
                                    *sys.argv[1:]])
    where = ("" if VLLM_PYTHON.exists()
             else f"; no vLLM venv at {VLLM_PYTHON} (scripts/setup_vllm_cpu.sh builds it)")
    print(json.dumps({"benchmark": BENCHMARK, "skipped": f"{why} in {sys.executable}{where}"}))
    sys.exit(0)


if __name__ == "__main__":
    _ensure_vllm()

# Below: only under a Python with vllm (the guard above re-executed or exited otherwise).
import argparse
import asyncio
import dataclasses
import json
import shutil
import tempfile
import time
import zlib
from dataclasses import dataclass

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB; the tiny model needs ~2 KiB/token

from clew.agents.lm.base import ChatRequest, Completion, LanguageModel
from clew.envs.gridmap.env import GridMapEnv
from clew.envs.registry import register

LENIENT = "bench-gridmap-lenient"


class LenientGridMapEnv(GridMapEnv):
    """Grid map whose parser maps any text to a legal move (crc32 of the text), so a gibberish
    model still grows trees; text that already parses keeps its meaning."""

    name = LENIENT

    def parse_action(self, text: str) -> str | None:
        action = super().parse_action(text)
        if action is not None:
            return action
        legal = self.legal_actions()
        return legal[zlib.crc32(text.encode()) % len(legal)] if legal else None


register(LENIENT, f"{__name__}:LenientGridMapEnv")


@dataclass
class Logged:
    request: ChatRequest
    sent: float
    done: float
    completions: list[Completion]


class RecordingLM(LanguageModel):
    """Passes requests to ``inner`` and logs each with its send and reply times."""

    def __init__(self, inner: LanguageModel):
        self.inner, self.spec, self.name = inner, inner.spec, getattr(inner, "name", inner.spec)
        self.log: list[Logged] = []

    async def generate(self, requests: list[ChatRequest]) -> list[list[Completion]]:
        sent = time.perf_counter()
        out = await self.inner.generate(requests)
        done = time.perf_counter()
        self.log.extend(Logged(r, sent, done, c) for r, c in zip(requests, out))
        return out


def lively_model(dst: Path, std: float = 0.2, seed: int = 0) -> Path:
    """The tiny model (``build_tiny_model``) with its weight matrices redrawn at std 0.2: the
    default init answers every prompt with one token; larger weights give varied output that
    ends on EOS now and then (as tests/conftest.py's ``make_lively``)."""
    import torch
    from clew.agents.lm.tiny import build_tiny_model
    from transformers import AutoModelForCausalLM

    src = build_tiny_model(dst.parent / "tiny")
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) * std)
    model.save_pretrained(dst)
    for f in src.iterdir():
        if f.is_file() and not f.name.startswith(("model", "config", "generation_config")):
            shutil.copy(f, dst / f.name)
    return dst


def prefix_counters() -> dict[str, float]:
    """vLLM's prefix-cache counters in this process (summed over engines and labels)."""
    from vllm.v1.metrics.reader import Counter, get_metrics_snapshot

    out = {"hits": 0.0, "queries": 0.0}
    for m in get_metrics_snapshot():
        if isinstance(m, Counter) and m.name in ("vllm:prefix_cache_hits",
                                                 "vllm:prefix_cache_queries"):
            out[m.name.rsplit("_", 1)[1]] += m.value
    return out


def lenient_tasks(suite: str, k: int):
    from clew.envs.suites import resolve

    tasks = [t for t in resolve(suite) if t.env == "gridmap"][:k]
    if len(tasks) < k:
        raise SystemExit(f"{suite}: only {len(tasks)} grid-map tasks, {k} asked")
    return [dataclasses.replace(t, env=LENIENT) for t in tasks]


async def search_run(lm: RecordingLM, args) -> dict:
    from clew.eval.agents import build_agent
    from clew.records import RunDir
    from clew.eval.runner import run_suite

    def agent():
        return build_agent("mcts", model=lm, seed=args.seed,
                           search={"n_simulations": args.simulations,
                                   "branching_factor": args.branching},
                           policy={"n_samples_min": args.samples, "max_tokens": args.max_tokens},
                           value={"single": {"n": args.samples, "max_tokens": args.max_tokens}})

    tasks = lenient_tasks(args.suite, args.episodes)
    with tempfile.TemporaryDirectory() as tmp:
        run = RunDir(f"{tmp}/run")
        run.open({"benchmark": BENCHMARK}, resume=False)
        t0 = time.perf_counter()
        counts = await run_suite(agent, tasks, run, concurrency=args.episodes,
                                 max_steps=args.steps, progress=False)
        seconds = time.perf_counter() - t0
    if counts["finished"] != len(tasks):
        raise SystemExit(f"{BENCHMARK}: episodes failed: {counts} (see the run's errors.jsonl)")
    return {"seconds": seconds, "episodes": counts["finished"]}


def replay_batch(llm, prompts, params) -> tuple[float, int, list[int]]:
    """All requests as one ``LLM.generate`` call: (seconds, generated tokens, per-request)."""
    from vllm.inputs import TokensPrompt

    t0 = time.perf_counter()
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params,
                        use_tqdm=False)
    seconds = time.perf_counter() - t0
    per = [sum(len(o.token_ids) for o in out.outputs) for out in outs]
    return seconds, sum(per), per


def cross_request_hits(llm, prompts) -> tuple[int, int]:
    """(cached, total) prompt tokens when each prompt is prefilled once, in arrival order."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    llm.reset_prefix_cache()
    one = SamplingParams(max_tokens=1, temperature=0.0)
    cached = total = 0
    for p in prompts:
        (out,) = llm.generate([TokensPrompt(prompt_token_ids=p)], one, use_tqdm=False)
        cached += out.num_cached_tokens or 0
        total += len(p)
    return cached, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="gridmap-v1:test")
    ap.add_argument("--episodes", type=int, default=8, help="episodes, all run concurrently")
    ap.add_argument("--steps", type=int, default=3, help="real steps (trees) per episode")
    ap.add_argument("--simulations", type=int, default=6)
    ap.add_argument("--branching", type=int, default=3)
    ap.add_argument("--samples", type=int, default=10, help="n of policy and value requests")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--block-size", type=int, default=None,
                    help="KV-cache block size (vLLM's CPU default: 128)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from clew.agents.lm.vllm_backend import VLLMModel, sampling_params
    from vllm import LLM

    engine = {"dtype": "float32", "max_model_len": 4096, "enforce_eager": True,
              "enable_prefix_caching": True, "seed": args.seed}
    if args.block_size:
        engine["block_size"] = args.block_size
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = lively_model(Path(tmp) / "lively")
        backend = VLLMModel(str(model_dir), **engine)
        try:
            lm = RecordingLM(backend)
            asyncio.run(lm.generate([ChatRequest([{"role": "user", "content": "warm up"}])]))
            lm.log.clear()
            before = prefix_counters()
            run = asyncio.run(search_run(lm, args))
            after = prefix_counters()
            prompts = [backend.prompt_ids(e.request.messages) for e in lm.log]
        finally:
            backend.close()
        log = lm.log
        search_tokens = sum(c.usage.completion_tokens for e in log for c in e.completions)
        busy = max(e.done for e in log) - min(e.sent for e in log)
        params = [sampling_params(e.request.sampling) for e in log]

        # the offline engine gets exactly the backend's settings (CPU defaults included)
        llm = LLM(**{**backend.engine_args, "disable_log_stats": False})
        replay_batch(llm, prompts[:4], params[:4])  # warm-up
        llm.reset_prefix_cache()
        batch_s, batch_tokens, per = replay_batch(llm, prompts, params)
        cached, total = cross_request_hits(llm, prompts)
        block_size = llm.llm_engine.vllm_config.cache_config.block_size

    same = [sum(c.usage.completion_tokens for c in e.completions) for e in log] == per
    search_tps = search_tokens / run["seconds"]
    batch_tps = batch_tokens / batch_s
    hits, queries = after["hits"] - before["hits"], after["queries"] - before["queries"]
    roles: dict[str, int] = {}
    for e in log:
        roles[e.request.role] = roles.get(e.request.role, 0) + 1
    ratio = search_tps / batch_tps
    rate = hits / queries if queries else None
    print(json.dumps({
        "benchmark": BENCHMARK, "model": "tiny lively (local, random weights)",
        "agent": "mcts (LM policy + SA value, no reflection)", "suite": args.suite,
        "episodes": run["episodes"], "concurrency": args.episodes, "steps": args.steps,
        "simulations": args.simulations, "branching": args.branching, "samples": args.samples,
        "max_tokens": args.max_tokens, "block_size": block_size,
        "requests": len(log), "requests_by_role": roles,
        "prompt_tokens": total, "mean_prompt_tokens": round(total / len(log), 1),
        "generated_tokens": search_tokens, "replay_same_token_counts": same,
        "search_seconds": round(run["seconds"], 2), "search_busy_seconds": round(busy, 2),
        "search_tokens_per_s": round(search_tps, 1),
        "batch_seconds": round(batch_s, 2), "batch_tokens_per_s": round(batch_tps, 1),
        "throughput_ratio": round(ratio, 3), "target_ratio": 0.7,
        "prefix_cache_hit_rate": round(rate, 3) if rate is not None else None,
        "prefix_cache_hits": int(hits), "prefix_cache_queries": int(queries),
        "cross_request_hit_rate": round(cached / total, 3) if total else None,
        "target_hit_rate": 0.6,
        "meets_target": bool(ratio >= 0.7 and rate is not None and rate >= 0.6),
    }))


if __name__ == "__main__":
    main()
