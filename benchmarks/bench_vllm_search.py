"""Benchmark (c): vLLM throughput during a tree search, and its prefix-cache hit rate.

A search agent with LM roles plays one or several grid-map tasks at once through the episode
runner: ``--agent rmcts-mad`` (the default: LM policy with ``n`` samples per expansion, the
debate value: two arguments, then the judge with ``n/2`` samples in each order) or ``--agent
mcts`` (single-agent value with ``n`` samples and a rubric); no reflection, because the memory
needs FAISS, which the vLLM venv lacks. In ``--variants``, ``4p`` is a wave size with
``wave_pipeline`` (docs/methods/mcts.md#pipelined-waves) and ``d`` the waves the agent's preset
sets (configs/agents/). Its model is the in-process ``vllm`` backend
(:class:`clew.agents.lm.vllm_backend.VLLMModel`, prefix caching on) serving one of two tiny local
models (``--model``):

* ``formatted`` (the default): the tiny model, its tokenizer trained on the roles' prompts, then
  fine-tuned for about half a minute to answer them as an instruct model does: a few words, the
  answer line, the end of turn (:func:`formatted_model`). Its samples mostly end by themselves.
* ``lively``: random weights at a larger scale, so that output varies (as the tests' "lively"
  model). It never writes the answer phrase, so nearly every constrained sample is cut at the
  token limit and finished by a second, dependent request.

A wrapper logs every request the search
sends (for the roles), and every engine request the backend makes of them (token ids and
``SamplingParams``, seeds included; with constrained answers also the short second request that
finishes a sample cut before its answer). Then the same engine requests go to
``vllm.LLM.generate`` as one offline batch on an engine with the same settings (same outputs).

``--constrain`` (the default) constrains the policy's answers to the legal moves and the value's
to a status code (``policy.constrain``, ``value.constrain``;
docs/methods/parsing.md#constrained-answers). Either model then answers in the roles' format:
every value sample parses, values are backed up, and a single episode grows the trees a real
model would (without it, most values are unknown, nothing is backed up, and one episode sends a
handful of requests). ``--no-constrain`` gives the earlier, unconstrained run.

Figures:

* ``throughput_ratio``: generated tokens per second of the search run (wall time of the whole
  run, framework time included) over that of the offline batch. Targets: >= 0.8 for
  one episode at the preset's wave size, >= 0.9 for 16 episodes.
  ``--repeats R`` runs each variant R times and reports the run of median ratio, with all R.
* ``prefix_cache_hit_rate``: vLLM's own counters ``vllm:prefix_cache_hits`` /
  ``vllm:prefix_cache_queries`` over the search run, i.e. prompt tokens served from the cache per
  prompt token queried. vLLM V1 runs the ``n`` samples of a request as ``n`` engine requests that
  all query the cache, so this counts each prompt ``n`` times. Target >= 0.6.
* ``sequences_in_flight``: engine sequences (samples) in flight, averaged over the run's busy
  span: the parallelism the search offers the engine, whatever the hardware; with
  ``search_idle_seconds``, the time no request was in flight.
* ``ratio_to_capped_batch`` (single episodes): the search's tokens per second over those of the
  same offline batch on an engine that runs at most ``sequences_in_flight`` sequences at once
  (``max_num_seqs``). At 1 or above, the framework loses nothing at the parallelism the tree
  offers, and the rest of the gap to the full batch is that parallelism.
* ``capped_curve`` (with ``--caps``): the first single-episode run's batch on engines capped at
  each number of sequences, over the same batch uncapped (medians of ``--repeats`` replays): how
  much parallelism this engine needs to approach its full batch, whatever the search.
* ``cross_request_hit_rate``: the stricter figure, each request's prompt counted once: the
  logged requests are replayed one at a time in arrival order, ``n=1`` and one output token, on the
  offline engine with its prefix cache reset, summing ``RequestOutput.num_cached_tokens``. It
  measures how much of a prompt an earlier request had already computed, without the free reuse
  between samples of one request.

The tiny models' text is gibberish, so the grid-map env used here parses any text to a legal move
(a crc32 of the text picks it); otherwise no proposal would parse and no tree would grow. Prompts,
trajectories and request shapes are the real ones. Unconstrained (``--no-constrain``) the values
fail to parse and stay unknown, so little is backed up and the trees barely grow.

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
import collections
import contextlib
import dataclasses
import json
import shutil
import statistics
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

    def copy(self) -> LenientGridMapEnv:
        # GridMapEnv.copy builds a GridMapEnv: without this the search's simulator would parse
        # strictly and its trees would hold NONE edges only
        other = super().copy()
        other.__class__ = LenientGridMapEnv
        return other


register(LENIENT, f"{__name__}:LenientGridMapEnv")


@dataclass
class EngineRequest:
    """One request the backend sent to the engine."""

    ids: list[int]
    params: object          # vllm.SamplingParams
    sent: float
    done: float
    tokens: int             # generated, over its n samples


def record_engine(backend, log: list[EngineRequest]) -> None:
    """Log every engine request ``backend`` (a VLLMModel) makes, with its times."""
    generate = backend._generate

    async def logged(ids, params):
        sent = time.perf_counter()
        final = await generate(ids, params)
        log.append(EngineRequest(list(ids), params, sent, time.perf_counter(),
                                 sum(len(o.token_ids) for o in final.outputs)))
        return final
    backend._generate = logged


class RecordingLM(LanguageModel):
    """Passes requests to ``inner`` and logs them (the roles' requests; their timing and the
    replay come from the engine-level log, :func:`record_engine`)."""

    def __init__(self, inner: LanguageModel):
        self.inner, self.spec, self.name = inner, inner.spec, getattr(inner, "name", inner.spec)
        self.log: list[ChatRequest] = []

    async def generate(self, requests: list[ChatRequest]) -> list[list[Completion]]:
        self.log.extend(requests)
        return await self.inner.generate(requests)


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


# words of the formatted model's short reasoning before its answer
FILLER = ("the", "agent", "is", "at", "goal", "so", "move", "up", "down", "left", "right",
          "explore", "node", "state", "value", "best", "found", "far", "step", "pending",
          "blocked")


def formatted_model(dst: Path, args, wave: str) -> Path:
    """The tiny model fine-tuned, for about half a minute, to answer the roles' own prompts as
    an instruct model does: a few words, then the answer line (``Next action: ```up``` ``,
    ``STATUS CODE: ```B``` ``), then the end of turn, well inside ``max_tokens``. Its samples then
    mostly end by themselves, as a real model's do, and the backend seldom sends the second
    request that finishes a sample cut before its answer (about one constrained sample in nine,
    measured; the lively model needs one for almost every sample).

    The prompts are those of a search with a scripted backend (:class:`~clew.agents.lm.fake.
    FakeLM`) answering the same way at random: real prompts and request shapes, no engine needed.
    The targets' words and answers are drawn at random, so the model learns a distribution and
    its samples vary; each from a generator seeded by its request and sample index, and the rows
    shuffled with ``--seed``, so the model does not depend on the order in which the search's
    calls reach the fake."""
    import random

    from clew.agents.lm.base import answer_suffix
    from clew.agents.lm.fake import FakeLM
    from clew.agents.lm.tiny import build_tiny_model
    from clew.training.config import TrainConfig
    from clew.training.train import train

    rows = []
    samples: collections.Counter = collections.Counter()

    def answer(request: ChatRequest, i: int) -> str:
        # drawn from the request itself (and which of its samples this is), and the rows put in
        # a seeded order below: the model does not depend on the order in which the search's
        # calls reach the fake
        prompt = json.dumps([args.seed, request.messages])
        key = f"{prompt}:{samples[prompt]}"
        samples[prompt] += 1
        rng = random.Random(zlib.crc32(key.encode()))
        s = request.sampling
        text = " ".join(rng.choice(FILLER) for _ in range(rng.randint(1, 4)))
        if s.choices:
            text += "\n" + answer_suffix(rng.choice(s.choices), s.answer_phrase)
        rows.append({"messages": [*request.messages, {"role": "assistant", "content": text}]})
        return text

    asyncio.run(search_run(RecordingLM(FakeLM(answer)), args, wave, 4))
    rows.sort(key=json.dumps)
    random.Random(args.seed).shuffle(rows)
    data = dst.parent / "formatted.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows[:args.format_rows]))
    # its tokenizer learns the prompts' text (as ``clew loop`` does): prompts take fewer tokens
    # and the answer lines a handful, so a minute of training teaches the format
    base = build_tiny_model(dst.parent / "tiny-formatted", corpus=[
        m["content"] for r in rows[:300] for m in r["messages"]])
    with contextlib.redirect_stdout(sys.stderr):   # the trainer prints its logs
        train(TrainConfig(model=str(base), data=str(data), output_dir=str(dst), method="full",
                          device="cpu", cpu_threads=2,
                          sft={"max_length": 4096, "max_steps": args.format_steps,
                               "gradient_accumulation_steps": 1, "learning_rate": 2e-3,
                               "save_strategy": "no", "logging_steps": 50}))
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


def ending_after(agent, steps: int):
    """``agent``, ending its episode after ``steps`` searches: the step limit stays the env's,
    so the trees' horizon is the one a real run has."""
    act = agent.act

    async def act_then_end(episode):
        decision = await act(episode)
        if episode.t + 1 >= steps:
            decision.info["end_episode"] = True
        return decision
    agent.act = act_then_end
    return agent


async def search_run(lm: RecordingLM, args, wave: str, episodes: int) -> dict:
    """``episodes`` tasks at once with waves ``wave`` (``K``, or ``Kp``: K with
    ``wave_pipeline``)."""
    from clew.records import RunDir
    from clew.runner.episodes import run_suite
    from clew.runner.registry import build_agent

    if preset_option(args.agent, "value", "kind", "single") == "debate":
        # two arguments, then the judge's samples in both orders (n in all)
        value = {"debate": {"judge_samples_per_order": max(1, args.samples // 2),
                            "argue_max_tokens": args.max_tokens,
                            "judge_max_tokens": args.max_tokens}}
    else:
        value = {"single": {"n": args.samples, "max_tokens": args.max_tokens}}
    # no reflection: the memory needs FAISS, which the vLLM venv lacks
    extra = {"reflection": False, "memory": {"enabled": False}} \
        if preset_option(args.agent, "reflection", None, None) is not None else {}

    def agent():
        return ending_after(build_agent(
            args.agent, model=lm, seed=args.seed,
            search={"n_simulations": args.simulations, "branching_factor": args.branching,
                    **wave_options(wave)},
            policy={"n_samples_min": args.samples, "max_tokens": args.max_tokens,
                    "constrain": args.constrain},
            value={"constrain": args.constrain, **value}, **extra), args.steps)

    tasks = lenient_tasks(args.suite, episodes)
    with tempfile.TemporaryDirectory() as tmp:
        run = RunDir(f"{tmp}/run")
        run.open({"benchmark": BENCHMARK}, resume=False)
        t0 = time.perf_counter()
        counts = await run_suite(agent, tasks, run, concurrency=episodes, progress=False)
        seconds = time.perf_counter() - t0
    if counts["finished"] != len(tasks):
        raise SystemExit(f"{BENCHMARK}: episodes failed: {counts} (see the run's errors.jsonl)")
    return {"seconds": seconds, "episodes": counts["finished"]}


def replay_batch(llm, requests: list[EngineRequest]) -> tuple[float, int, list[int]]:
    """All requests as one ``LLM.generate`` call: (seconds, generated tokens, per-request)."""
    from vllm.inputs import TokensPrompt

    t0 = time.perf_counter()
    outs = llm.generate([TokensPrompt(prompt_token_ids=e.ids) for e in requests],
                        [e.params for e in requests], use_tqdm=False)
    seconds = time.perf_counter() - t0
    per = [sum(len(o.token_ids) for o in out.outputs) for out in outs]
    return seconds, sum(per), per


def median_rate(llm, requests: list[EngineRequest], repeats: int) -> float:
    """Median generated tokens per second of ``repeats`` replays of one batch, each from an
    empty prefix cache (a single replay on this CPU varies by about a tenth)."""
    rates = []
    for _ in range(max(1, repeats)):
        llm.reset_prefix_cache()
        seconds, tokens, _ = replay_batch(llm, requests)
        rates.append(tokens / seconds)
    return statistics.median(rates)


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


def in_flight(log: list[EngineRequest]) -> tuple[float, float]:
    """(mean sequences in the engine over the run's busy span, seconds with no request in it):
    how much parallelism the search offers the engine, whatever the hardware."""
    events = sorted([(e.sent, e.params.n) for e in log] + [(e.done, -e.params.n) for e in log])
    seqs = seq_seconds = idle = 0.0
    last = events[0][0]
    for t, change in events:
        seq_seconds += seqs * (t - last)
        if seqs == 0:
            idle += t - last
        seqs, last = seqs + change, t
    return seq_seconds / max(last - events[0][0], 1e-9), idle


def wave_options(k: str) -> dict:
    """``search`` options of a variant's waves: ``K`` or ``Kp`` (K pipelined)."""
    return {"wave_size": int(k.rstrip("p")), "wave_pipeline": k.endswith("p")}


def parse_variants(text: str, default_k: str) -> list[tuple[str, int]]:
    """``K:E,...`` (waves : concurrent episodes): K is a wave size, ``Kp`` a wave size with
    ``wave_pipeline``, ``d`` the preset's own."""
    out = []
    for item in text.split(","):
        k, _, e = item.partition(":")
        k = default_k if k == "d" else k
        wave_options(k)         # a wave size, or a clear ValueError
        out.append((k, int(e)))
    return out


def parse_caps(text: str) -> list[int]:
    """``--caps``: positive sequence caps, comma-separated."""
    caps = [int(c) for c in text.split(",") if c.strip()]
    if any(c < 1 for c in caps):
        raise argparse.ArgumentTypeError(f"caps must be positive integers, got {text!r}")
    return caps


def preset_option(agent: str, section: str, key: str | None, default):
    """``agent_options.SECTION.KEY`` (the section itself when ``key`` is None) as the preset
    ``agent`` sets it, following presets built on presets; ``default`` where none does."""
    from clew.runner.registry import load_preset, preset_names

    while agent in preset_names():
        data = load_preset(agent)
        value = (data.get("agent_options") or {}).get(section)
        if value is not None and key is not None:
            value = value.get(key)
        if value is not None:
            return value
        agent = data["agent"]
    return default


def main() -> None:
    from clew.search.mcts import MCTSConfig

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agent", default="rmcts-mad",
                    help="search preset: rmcts-mad (debate value) or mcts (single-agent value)")
    agent = ap.parse_known_args()[0].agent
    default_k = str(preset_option(agent, "search", "wave_size",
                                  MCTSConfig.model_fields["wave_size"].default))
    if preset_option(agent, "search", "wave_pipeline", False):
        default_k += "p"
    ap.add_argument("--suite", default="gridmap-v1:test")
    ap.add_argument("--variants", default="1:1,d:1,1:16,d:16",
                    help="wave size:concurrent episodes, comma-separated; Kp = K pipelined; "
                         f"d = the waves of the agent's preset ({default_k})")
    ap.add_argument("--steps", type=int, default=3, help="real steps (trees) per episode")
    ap.add_argument("--simulations", type=int, default=20, help="per search (20, as the waves were measured)")
    ap.add_argument("--branching", type=int, default=3)
    ap.add_argument("--samples", type=int, default=10, help="n of policy and value requests")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--block-size", type=int, default=None,
                    help="KV-cache block size (vLLM's CPU default: 128)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--constrain", action=argparse.BooleanOptionalAction, default=True,
                    help="constrained policy and value answers (see the module docstring)")
    ap.add_argument("--model", choices=("formatted", "lively"), default="formatted",
                    help="formatted: the tiny model fine-tuned to answer in the roles' format "
                         "(samples end by themselves); lively: random weights (most samples are "
                         "cut and finished by a second request)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs of each variant (the median ratio's run is reported)")
    ap.add_argument("--format-rows", type=int, default=2000,
                    help="training rows of the formatted model")
    ap.add_argument("--format-steps", type=int, default=300,
                    help="training steps of the formatted model")
    ap.add_argument("--caps", type=parse_caps, default=[],
                    help="also replay the first single-episode run's batch on engines capped at "
                         "each of these max_num_seqs (comma-separated), --repeats times each: how "
                         "many sequences in flight this engine needs to approach its full batch")
    args = ap.parse_args()
    variants = parse_variants(args.variants, default_k)

    from clew.agents.lm.vllm_backend import VLLMModel
    from vllm import LLM

    engine = {"dtype": "float32", "max_model_len": 4096, "enforce_eager": True,
              "enable_prefix_caching": True, "seed": args.seed}
    if args.block_size:
        engine["block_size"] = args.block_size
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = (formatted_model(Path(tmp) / "formatted", args, default_k)
                     if args.model == "formatted" else lively_model(Path(tmp) / "lively"))
        backend = VLLMModel(str(model_dir), **engine)
        engine_log: list[EngineRequest] = []
        record_engine(backend, engine_log)
        try:
            lm = RecordingLM(backend)
            asyncio.run(lm.generate([ChatRequest([{"role": "user", "content": "warm up"}])]))
            for k, episodes in [v for v in variants for _ in range(args.repeats)]:
                lm.log = []
                engine_log.clear()
                reset = asyncio.run_coroutine_threadsafe(backend.engine.reset_prefix_cache(),
                                                         backend._loop)
                reset.result()
                before = prefix_counters()
                run = asyncio.run(search_run(lm, args, k, episodes))
                after = prefix_counters()
                runs.append({"k": k, "episodes": episodes, "run": run, "log": lm.log,
                             "engine": list(engine_log), "in_flight": in_flight(engine_log),
                             "hits": after["hits"] - before["hits"],
                             "queries": after["queries"] - before["queries"]})
        finally:
            backend.close()

        # the offline engine gets exactly the backend's settings (CPU defaults included)
        llm = LLM(**{**backend.engine_args, "disable_log_stats": False})
        first = runs[0]
        replay_batch(llm, first["engine"][:4])  # warm-up
        for r in runs:
            llm.reset_prefix_cache()
            r["batch_s"], r["batch_tokens"], r["per"] = replay_batch(llm, r["engine"])
            r["cached"], r["total"] = cross_request_hits(llm, [e.ids for e in r["engine"]])
        block_size = llm.llm_engine.vllm_config.cache_config.block_size
        probe = next((r for r in runs if r["episodes"] == 1), None) if args.caps else None
        if probe:   # the uncapped reference of the curve, repeated as each of its points
            full_tps = median_rate(llm, probe["engine"], args.repeats)
        del llm

        def capped_llm(cap: int):
            """An offline engine with the backend's settings running at most ``cap`` sequences
            at once, warmed up."""
            llm = LLM(**{**backend.engine_args, "max_num_seqs": cap})
            replay_batch(llm, first["engine"][:4])
            return llm

        # the same batch on an engine that runs at most as many sequences at once as the search
        # kept in flight (single episodes): the part of the gap the framework could close
        for k in sorted({r["k"] for r in runs if r["episodes"] == 1}):
            same_k = [r for r in runs if r["k"] == k and r["episodes"] == 1]
            cap = max(1, round(same_k[0]["in_flight"][0]))
            llm = capped_llm(cap)
            for r in same_k:
                r["capped"] = {"cap": cap, "tokens_per_s": median_rate(llm, r["engine"], 1)}
            del llm
        curve = []
        for cap in args.caps if probe else []:
            llm = capped_llm(cap)
            tps = median_rate(llm, probe["engine"], args.repeats)
            curve.append({"max_sequences": cap, "tokens_per_s": round(tps, 1),
                          "of_full_batch": round(tps / full_tps, 3)})
            del llm

    out = {"benchmark": BENCHMARK,
           "model": {"formatted": "tiny, fine-tuned to answer in format (local)",
                     "lively": "tiny lively (local, random weights)"}[args.model],
           "agent": f"{args.agent} (LM roles, no reflection)", "suite": args.suite,
           "constrained": args.constrain,
           "steps": args.steps, "simulations": args.simulations, "branching": args.branching,
           "samples": args.samples, "max_tokens": args.max_tokens, "block_size": block_size,
           "default_wave_size": default_k, "variants": {}}
    for r in runs:
        log, engine_log = r["log"], r["engine"]
        seqs, idle = r["in_flight"]
        tokens = sum(e.tokens for e in engine_log)
        same = [e.tokens for e in engine_log] == r["per"]
        search_tps = tokens / r["run"]["seconds"]
        batch_tps = r["batch_tokens"] / r["batch_s"]
        roles = dict(collections.Counter(request.role for request in log))
        rate = r["hits"] / r["queries"] if r["queries"] else None
        out["variants"].setdefault(f"k{r['k']}_x{r['episodes']}", []).append({
            **wave_options(r["k"]),
            "episodes": r["episodes"], "requests": len(log),
            "engine_requests": len(engine_log),
            # the backend's second requests, finishing samples cut before their answer
            "finishing_requests": len(engine_log) - len(log), "requests_by_role": roles,
            "prompt_tokens": r["total"],
            "generated_tokens": tokens, "replay_same_token_counts": same,
            "search_seconds": round(r["run"]["seconds"], 2),
            "search_busy_seconds": round(max(e.done for e in engine_log)
                                         - min(e.sent for e in engine_log), 2),
            "search_idle_seconds": round(idle, 2), "sequences_in_flight": round(seqs, 1),
            "search_tokens_per_s": round(search_tps, 1),
            "batch_seconds": round(r["batch_s"], 2), "batch_tokens_per_s": round(batch_tps, 1),
            "throughput_ratio": round(search_tps / batch_tps, 3),
            **({"batch_max_sequences": r["capped"]["cap"],
                "capped_batch_tokens_per_s": round(r["capped"]["tokens_per_s"], 1),
                "ratio_to_capped_batch": round(search_tps / r["capped"]["tokens_per_s"], 3)}
               if "capped" in r else {}),
            "prefix_cache_hit_rate": round(rate, 3) if rate is not None else None,
            "cross_request_hit_rate": round(r["cached"] / r["total"], 3) if r["total"] else None,
        })
    for name, reps in out["variants"].items():
        # with repeats: the repeat of median ratio, and every repeat's ratio
        ratios = [x["throughput_ratio"] for x in reps]
        median = sorted(reps, key=lambda x: x["throughput_ratio"])[(len(reps) - 1) // 2]
        out["variants"][name] = {**median, "throughput_ratios": ratios} \
            if len(reps) > 1 else median
    if curve:   # one single-episode batch at each cap, over the same batch uncapped
        out["capped_curve"] = {"variant": f"k{probe['k']}_x1", "repeats": args.repeats,
                               "full_batch_tokens_per_s": round(full_tps, 1), "points": curve}
    v = out["variants"]
    single, many = v.get(f"k{default_k}_x1"), v.get(f"k{default_k}_x16")
    out["targets"] = {"single_episode_ratio": 0.8, "sixteen_episodes_ratio": 0.9}
    out["meets_target"] = bool(single and many and single["throughput_ratio"] >= 0.8
                               and many["throughput_ratio"] >= 0.9)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
