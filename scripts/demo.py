"""``clew demo``: the whole loop on the embedded defaults, on a CPU machine with no model weights.

1. **Search** with MCTS on ``exploration-v1:train``; roles are heuristic (a policy sampling legal
   actions, a value = ground-truth progress + Gaussian noise, standing in for an imperfect LM
   judge). Every tree is recorded.
2. **Data**: the trees become Exploratory Learning (explore, evaluate, backtrack) and Imitation
   Learning (executed actions only) chat datasets (``clew data``).
3. **Train**: a tiny Llama-style model that clew builds itself (random weights, own BPE) is
   fine-tuned with TRL's SFTTrainer on each dataset (``clew train``; full fine-tuning, because
   LoRA on random frozen embeddings barely learns in the demo's few steps).
4. **Evaluate** on ``exploration-v1:test`` (unseen instances): the EL-distilled and IL-distilled
   models (learned, no search), the MCTS agent (heuristic roles, with search) and the random
   baseline, all with the same step cap and every metric, printed per environment family.

``--quick`` shrinks every stage for a smoke test.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clew.eval.config import EvalConfig, load_config
from clew.eval.evaluate import evaluate
from clew.eval.summary import aggregate, by_env, summary_table

# The heuristic search that generates the training data and is evaluated as "searched".
SEARCH_OPTIONS: dict[str, Any] = {
    "search": {"n_simulations": 10, "branching_factor": 4, "max_depth_actions": 4},
    "value": {"noise": 0.2},
    "label": "mcts-heuristic",
}
STEP_CAP = 40  # every agent gets the same number of real actions per episode


@dataclass
class Stage:
    name: str
    seconds: float = 0.0


def _say(text: str) -> None:
    print(f"[demo] {text}", flush=True)


def _eval(out: Path, agent: str, options: dict[str, Any], suite: str, quick: bool,
          concurrency: int = 4):
    # the demo's tiny models answer in their format only part of the time, by design: their
    # parse-failure rates are reported, not a reason to stop
    cfg = EvalConfig(agent=agent, agent_options=options, suite=suite, out=str(out),
                     concurrency=concurrency, max_steps=STEP_CAP,
                     limit=6 if quick else None, parse_failure_rate=None)
    return evaluate(cfg, progress=False)


def _train(data: Path, output: Path, model_dir: Path, quick: bool):
    from clew.training.sft import TrainConfig, train

    overrides = [f"data={data}", f"output_dir={output}", f"model=tiny:{model_dir}"]
    if quick:
        overrides.append("max_steps=10")
    # a preset shipped as package data: found the same from a source tree or an installed wheel
    cfg = load_config(TrainConfig, "full-tiny", overrides, presets="train")
    return train(cfg)


def _quiet_libraries() -> None:
    """The demo prints its own progress; library progress bars and notices would bury it."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)


def run_demo(out: Path, quick: bool = False) -> int:
    _quiet_libraries()
    from clew.training.datasets import DataConfig, build_datasets, save_datasets

    start = time.perf_counter()
    if out.exists():
        shutil.rmtree(out)  # the demo always starts fresh
    timings: list[Stage] = []

    t0 = time.perf_counter()
    _say("1/4 search: MCTS with heuristic roles on exploration-v1:train (trees recorded)")
    search_run, _ = _eval(out / "search-train", "mcts", SEARCH_OPTIONS, "exploration-v1:train",
                          quick)
    timings.append(Stage("search (train split)", time.perf_counter() - t0))

    t0 = time.perf_counter()
    _say("2/4 data: trees -> Exploratory Learning and Imitation Learning datasets")
    datasets, report = build_datasets(DataConfig(runs=[str(search_run.path)], el_max_actions=80))
    data_dir = save_datasets(datasets, report, out / "data")
    sizes = {name: ds.num_rows for name, ds in datasets.items()}
    _say(f"    samples: {sizes} from {report.get('selected')} successful episode(s)")
    timings.append(Stage("data", time.perf_counter() - t0))

    t0 = time.perf_counter()
    models = {}
    for kind, subset in (("el", "el"), ("il", "il_all")):
        if not sizes.get(subset):
            _say(f"3/4 train: no {subset} samples, skipping the {kind.upper()} model")
            continue
        _say(f"3/4 train: tiny model on the {kind.upper()} data (TRL SFTTrainer, CPU)")
        result = _train(data_dir / subset, out / "models" / kind, out / "models" / "tiny", quick)
        losses = result.losses
        if losses:
            _say(f"    loss {losses[0]:.2f} -> {losses[-1]:.2f} in {len(losses)} logged step(s)")
        models[kind] = result.output_dir
    timings.append(Stage("training", time.perf_counter() - t0))

    t0 = time.perf_counter()
    _say("4/4 evaluate on exploration-v1:test (unseen instances)")
    agents: list[tuple[str, str, dict[str, Any], str]] = [
        ("random", "random", {}, "heuristic, no search"),
        ("mcts-heuristic", "mcts", SEARCH_OPTIONS, "heuristic roles (oracle-noised value), search"),
    ]
    for kind, path in models.items():
        agents.append((f"{kind}-distilled", "distilled",
                       {"model": f"hf:{path}", "format": kind, "max_tokens": 64,
                        "label": f"{kind}-distilled"},
                       f"learned: tiny model fine-tuned on {kind.upper()} data, no search"))
    rows: dict[str, list[dict[str, Any]]] = {}
    for name, agent, options, _ in agents:
        _say(f"    {name}")
        run, _ = _eval(out / "eval" / name, agent, options, "exploration-v1:test", quick)
        rows[name] = run.episodes()
    timings.append(Stage("evaluation (test split)", time.perf_counter() - t0))

    print()
    print("What each agent is:")
    for name, _, _, what in agents:
        print(f"  {name:16s} {what}")
    families = sorted({env for records in rows.values() for env in by_env(records)})
    for env in families:
        print(f"\n## {env}  (exploration-v1:test, at most {STEP_CAP} actions per episode)\n")
        table = [(name, aggregate(by_env(records)[env])) for name, records in rows.items()
                 if env in by_env(records)]
        print(summary_table(table), end="")
    print("\nTiming: " + ", ".join(f"{s.name} {s.seconds:.0f} s" for s in timings)
          + f"; total {time.perf_counter() - start:.0f} s")
    print(f"Everything is in {out}/ (runs, trees, datasets, models); `clew report` compares runs.")
    return 0
