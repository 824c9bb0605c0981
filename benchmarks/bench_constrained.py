"""Benchmark: the cost of constrained answers on the hf backend (docs/methods/parsing.md#constrained-answers).

Seconds per completion with and without ``Sampling.choices`` on clew's tiny model (redrawn at a
larger weight scale, as the tests' lively model, so its output varies), prompted with the
distilled agent's first EL chat on a gridmap-mini task; the choices are the legal moves plus
``backtrack S0``. One completion at a time, greedy and at temperature 0.7. Prints one JSON line.

    python benchmarks/bench_constrained.py [--model-dir DIR] [--reps 12] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from clew.agents.distilled import first_user, system_prompt
from clew.agents.lm.base import ChatRequest, Sampling
from clew.agents.lm.hf import HFModel
from clew.agents.lm.tiny import build_tiny_model
from clew.envs.registry import make_for
from clew.envs.suites import resolve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-dir", default="/tmp/clew-bench-constrained")
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import make_lively

    root = Path(args.model_dir)
    lm = HFModel(make_lively(build_tiny_model(root / "tiny"), root / "lively"))
    task = resolve("gridmap-mini:test")[0]
    env = make_for(task)
    obs = env.reset(task)
    messages = [{"role": "system", "content": system_prompt(env, "el")},
                {"role": "user", "content": first_user(env, 0, obs.text)}]
    choices = [*env.legal_actions(), "backtrack S0"]
    out = {"prompt_tokens": lm.count_tokens(messages), "choices": len(choices),
           "max_tokens": args.max_tokens, "reps": args.reps}
    for temperature in (0.0, 0.7):
        for name, ch in (("free", None), ("constrained", choices)):
            def one(seed: int, ch=ch, temperature=temperature):
                request = ChatRequest(messages, Sampling(temperature=temperature, seed=seed,
                                                         max_tokens=args.max_tokens, choices=ch))
                return asyncio.run(lm.complete(request))[0]

            one(10**6)   # warm-up
            start = time.perf_counter()
            for seed in range(args.reps):
                one(seed)
            out[f"s_per_completion_{name}_t{temperature}"] = round(
                (time.perf_counter() - start) / args.reps, 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
