"""``clew demo``: ``clew loop`` with the ``demo`` preset (configs/loop/demo.yaml), always fresh.

The loop on the embedded defaults, on a CPU machine with no model weights: MCTS with heuristic
roles searches ``exploration-v1:train``, the trees become EL and IL chats, a tiny model that
clew builds itself is fine-tuned on each, and every agent is evaluated on the unseen
``exploration-v1:test`` with every metric, one table per family with a line saying what to read
in it (docs/methods/loop.md#the-demo). ``--quick`` shrinks every stage for a smoke test.
"""

from __future__ import annotations

import os
import shutil
import time
import warnings
from pathlib import Path

from clew.loop.pipeline import LoopConfig, run_loop
from clew.runner.config import load_config

#: what --quick changes in the demo preset: one task and one episode per family, a few training
#: steps, test episodes of at most 10 actions
QUICK = ["limit_train=1", "limit_test=1", "limit_repeats=1", "train.sft.max_steps=4",
         "limit_test_steps=10"]


def _quiet_libraries() -> None:
    """The demo prints its own progress; library progress bars and notices would bury it."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore", category=FutureWarning)


def run_demo(out: Path, quick: bool = False) -> int:
    _quiet_libraries()
    start = time.perf_counter()
    if out.exists():
        shutil.rmtree(out)  # the demo always starts fresh
    cfg = load_config(LoopConfig, "demo", QUICK if quick else [], base={"out": str(out)},
                      presets="loop")
    loop = run_loop(cfg, say=lambda s: print(f"[demo] {s}", flush=True), html=False)
    print()
    print((loop.out / "report.md").read_text(), end="")
    print(f"Total {time.perf_counter() - start:.0f} s. Everything is in {out}/ (runs, trees, "
          "datasets, models); `clew report` compares runs, `clew loop --config demo --out "
          f"{out} --resume rounds=2` adds a round.")
    return 0
