"""`clew train` in two processes: `accelerate launch` with scripts/accelerate/ddp.yaml on CPU
(gloo), against one process with the same global batch (docs/scale-out.md#training-with-accelerate).

The tiny model learns here (its loss falls by about 0.7 in 8 steps), so equal losses are not the
flat loss of an untrained model: one process with half the batch (what a rank sees without the
gradients of the other) differed by up to 0.1 per step, the two-process run by 1e-6, and its
adapter's weights by 1.3e-5 (measured).
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from clew.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).with_name("ddp_probe.py")
STEPS = 8
# what the comparison needs fixed whatever the preset says: the batch, no dropout, a log per step
TRAIN = ["--config", "lora-tiny", f"sft.max_steps={STEPS}", "sft.gradient_accumulation_steps=1",
         "sft.logging_steps=1", "sft.learning_rate=2e-3", "sft.lr_scheduler_type=constant",
         "lora.dropout=0.0", "sft.seed=0", "sft.save_strategy=no", "merge=true"]


def write_chats(path: Path, n: int = 32) -> None:
    """Chats of varied lengths: a batch of 4 split in two pads differently from the whole."""
    rng = random.Random(0)
    moves = ["up", "down", "left", "right"]
    with path.open("w") as f:
        for i in range(n):
            seen = " ".join(rng.choice("abcdefgh") for _ in range(rng.randint(1, 30)))
            chat = [{"role": "system", "content": "You explore a grid."},
                    {"role": "user", "content": f"Observation: {seen}"},
                    {"role": "assistant", "content": f"Next action: {rng.choice(moves)} {i}"}]
            f.write(json.dumps({"messages": chat}) + "\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def adapter(out: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(out / "adapter_model.safetensors")


def test_two_processes_train_like_one_with_the_same_global_batch(tmp_path):
    accelerate = Path(sys.executable).with_name("accelerate")
    if not accelerate.exists():
        pytest.skip(f"no accelerate command next to {sys.executable}")
    data = tmp_path / "chats.jsonl"
    write_chats(data)
    # a model neither process has yet: both ask for it at once, one builds it
    model = f"tiny:{tmp_path / 'tiny'}"
    ddp, logs = tmp_path / "ddp", tmp_path / "probe"
    logs.mkdir()
    proc = subprocess.run(
        [str(accelerate), "launch", "--config_file", str(ROOT / "scripts/accelerate/ddp.yaml"),
         "--num_processes", "2", "--mixed_precision", "no", "--main_process_port",
         str(free_port()), str(PROBE), "train", *TRAIN, "sft.per_device_train_batch_size=2", f"model={model}",
         f"data={data}", f"output_dir={ddp}"],
        check=False, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PROBE_OUT": str(ddp), "PROBE_LOG": str(logs)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = [json.loads((logs / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert [(r["code"], r["world_size"], r["backend"]) for r in ranks] == [(0, 2, "gloo")] * 2
    # only the first process writes: the adapter, the tokenizer, the run record, the merged model
    assert ranks[1]["writes"] == []
    written = ranks[0]["writes"]
    for name in ("adapter_model.safetensors", "tokenizer_config.json", "clew_train.json",
                 "merged/model.safetensors"):
        assert any(w.endswith(f" {name}") for w in written), (name, written)
    assert proc.stdout.count("adapter written to") == 1, proc.stdout

    one = tmp_path / "one"
    assert main(["train", *TRAIN, "sft.per_device_train_batch_size=4", f"model={model}", f"data={data}",
                 f"output_dir={one}"]) == 0
    runs = [json.loads((out / "clew_train.json").read_text()) for out in (ddp, one)]
    assert [r["metrics"]["global_step"] for r in runs] == [STEPS, STEPS]
    ddp_losses, one_losses = (r["losses"] for r in runs)
    assert len(ddp_losses) == len(one_losses) == STEPS
    assert one_losses[0] - one_losses[-1] > 0.3                  # it learns
    assert ddp_losses == pytest.approx(one_losses, abs=1e-4)
    weights = [adapter(ddp), adapter(one)]
    assert weights[0].keys() == weights[1].keys()
    for name, w in weights[0].items():                      # 1.3e-5 apart (measured)
        assert (w - weights[1][name]).abs().max() < 1e-3, name
    trained = [w for name, w in weights[1].items() if "lora_B" in name]   # B starts at zero
    assert trained and all(w.abs().max() > 1e-3 for w in trained)
