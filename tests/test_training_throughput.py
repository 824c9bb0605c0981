"""Batches without padding waste give the same training step: token-balanced micro-batches,
padding-free rows and packed rows each train every sample as if it were alone (no attention
across samples, positions restarting per sample), and the CPU's labelled-positions LM head
gives the loss and gradient of the full one (docs/scale-out.md#training-throughput)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from clew.training.config import TrainConfig
from clew.training.sft import sft_config
from clew.training.train import build_trainer, run_trainer

WORDS = ["up", "down", "left", "right", "key", "door", "ball", "box", "room", "goal", "state",
         "node", "value", "the", "agent", "is", "at"]
ROOT = Path(__file__).resolve().parents[1]


def chat(i: int) -> dict:
    """A two-turn chat of a length that varies with ``i``; the first answer is context only."""
    text = " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(4 + (i * 37) % 90))
    return {"messages": [
        {"role": "system", "content": "You move an agent."},
        {"role": "user", "content": text},
        {"role": "assistant", "content": f"Next action: {WORDS[i % 4]}", "weight": 0},
        {"role": "user", "content": text[: 10 + 13 * i]},
        {"role": "assistant", "content": f"Next action: {WORDS[(i + 1) % 4]}", "weight": 1}],
        "meta": {"env": "a" if i % 2 else "b"}}


@pytest.fixture(scope="module")
def chats(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("throughput") / "chats.jsonl"
    path.write_text("".join(json.dumps(chat(i)) + "\n" for i in range(8)))
    return path


#: one padded batch of all 8 samples a step
ONE_BATCH = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1}


def config(tmp_path, model, data, **kw) -> TrainConfig:
    """One plain SGD step at rate 1 over all 8 samples: the weights move by minus the gradient."""
    base = {"model": str(model), "data": str(data), "output_dir": str(tmp_path / "out"),
            "method": "full"}
    sft = {"max_length": 1024, "max_steps": 1, "per_device_train_batch_size": 2,
           "gradient_accumulation_steps": 4, "learning_rate": 1.0, "lr_scheduler_type": "constant",
           "max_grad_norm": 1e9, "logging_steps": 1, "save_strategy": "no", "seed": 0,
           "optim": "sgd", **kw.pop("sft", {})}
    return TrainConfig(**{**base, **kw, "sft": sft})


def one_step(cfg: TrainConfig, labelled_only: bool = True):
    """The weights' change and the logged loss of one step, and the prepared samples."""
    trainer, *_ = build_trainer(cfg)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    run_trainer(trainer) if labelled_only else trainer.train()
    change = {n: before[n] - p.detach() for n, p in trainer.model.named_parameters()}
    return change, trainer.state.log_history[0]["loss"], trainer.train_dataset


def alone(model_dir: Path, samples) -> tuple[dict, float]:
    """Each sample trained alone: the gradient of its summed token loss, summed over samples and
    divided by all their target tokens (the step's mean), and that mean loss."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    total, tokens = 0.0, 0
    for row in samples:
        ids = torch.tensor([row["input_ids"]])
        labels = torch.tensor(row["labels"][1:])
        logits = model(input_ids=ids).logits[0, :-1]
        loss = torch.nn.functional.cross_entropy(logits, labels, ignore_index=-100,
                                                 reduction="sum")
        loss.backward()
        total, tokens = total + float(loss), tokens + int((labels != -100).sum())
    return {n: p.grad / tokens for n, p in model.named_parameters()}, total / tokens


def unpacked(samples):
    """The samples of a packed dataset, each cut back out of its row."""
    for row in samples:
        start = 0
        for n in row.get("seq_lengths") or [len(row["input_ids"])]:
            yield {"input_ids": row["input_ids"][start:start + n],
                   "labels": row["labels"][start:start + n]}
            start += n


@pytest.mark.parametrize("variant", [
    "balanced",        # the default: 4 micro-batches balanced by tokens, padded
    "one-batch",       # the transformers default sampler: one padded batch of 8
    "padding-free",    # TRL's padding-free rows: the 8 samples in one row
    "packed",          # TRL's best-fit packing into rows of at most 512 tokens
    "all-positions",   # TRL's LM head scoring every position, as it does by default on CPU
])
def test_each_sample_trains_as_if_alone(tmp_path, tiny_model_dir, chats, variant):
    options = {"balanced": {}, "all-positions": {},
               "one-batch": {"sft": {**ONE_BATCH, "train_sampling_strategy": "random"}},
               "padding-free": {"sft": {**ONE_BATCH, "max_length": None, "padding_free": True}},
               "packed": {"sft": {**ONE_BATCH, "packing": True, "max_length": 512,
                                  "truncation_mode": "keep_start"}}}[variant]
    change, loss, samples = one_step(config(tmp_path, tiny_model_dir, chats, **options),
                                     labelled_only=variant != "all-positions")
    singles = list(unpacked(samples))
    assert len(singles) == 8
    if variant == "packed":
        assert len(samples) < 8          # rows do hold several samples
    expected, expected_loss = alone(tiny_model_dir, singles)
    assert loss == pytest.approx(expected_loss, rel=1e-4)
    for name, grad in expected.items():
        torch.testing.assert_close(change[name], grad, rtol=1e-3, atol=2e-6, msg=name)


def test_balanced_micro_batches_keep_random_steps_with_little_padding(tmp_path, tiny_model_dir,
                                                                      chats):
    """A step's samples are a random draw (seeded with the run's seed); within the step they are
    cut by length, so micro-batches pad far less than random batches of the same size."""
    rows = [chat(i) for i in range(8)] * 8                 # 64 samples, 8 steps of 8
    data = tmp_path / "many.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def steps_and_padding(seed, sft=None):
        trainer, *_ = build_trainer(config(tmp_path, tiny_model_dir, data,
                                           sft={"seed": seed, **(sft or {})}))
        loader = trainer.get_train_dataloader()
        fed = real = 0
        for batch in loader:
            fed += batch["input_ids"].numel()
            real += int(batch["attention_mask"].sum())
        return trainer._get_train_sampler(), 1 - real / fed

    sampler, balanced = steps_and_padding(0)
    assert sampler.seed == 0
    micro = list(sampler)
    steps = [sorted(i for b in micro[k:k + 4] for i in b) for k in range(0, len(micro), 4)]
    assert [len(s) for s in steps] == [8] * 8
    assert sorted(i for s in steps for i in s) == list(range(64))     # each sample once an epoch
    assert any(len(b) != 2 for b in micro)                           # sized by tokens
    other, _ = steps_and_padding(1)
    assert [sorted(i for b in list(other)[k:k + 4] for i in b) for k in range(0, 32, 4)] != steps
    _, random = steps_and_padding(0, sft={"train_sampling_strategy": "random"})
    assert balanced < 0.05 < random / 2


def test_sampling_defaults_and_packing_truncation(tmp_path, tiny_model_dir, chats):
    cfg = config(tmp_path, tiny_model_dir, chats)
    assert sft_config(cfg).train_sampling_strategy == "batch_rebalance"
    cfg = config(tmp_path, tiny_model_dir, chats, sft={"train_sampling_strategy": "random"})
    assert sft_config(cfg).train_sampling_strategy == "random"
    cfg = config(tmp_path, tiny_model_dir, chats, batch_by_env=True)
    assert sft_config(cfg).train_sampling_strategy == "random"   # EnvBatches decide
    with pytest.raises(ValueError, match="packing: TRL's packing cuts a sample"):
        config(tmp_path, tiny_model_dir, chats, sft={"packing": True})


def test_bench_train_prints_every_figure(tmp_path):
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_train.py"), "--steps", "2",
         "--warmup", "1", "--samples", "24", "--lengths", "20-60,80-200", "--plain",
         "sft.max_length=256", "sft.learning_rate=1e-3"],   # 1e-3 reads as text in YAML 1.1
        capture_output=True, text=True, check=True, cwd=tmp_path)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    for key in ("tokens_per_s", "padding_share", "flops_per_token", "flops_per_token_recompute",
                "achieved_tflops", "peak_tflops", "ratio_to_peak", "peak_memory_gb",
                "outside_share", "plain_random_s_per_step", "plain_similar_lengths_s_per_step"):
        assert isinstance(figures[key], (int, float)), key
    assert 0 <= figures["padding_share"] < 0.05 and 0 <= figures["outside_share"] < 1
    assert 0 < figures["ratio_to_peak"] < 1


def test_gpu_kernels_only_where_installed_and_never_on_the_cpu():
    from clew.training.sft import gpu_kernels

    everything = lambda name: True
    assert gpu_kernels(True, "float32", everything) == {}
    assert gpu_kernels(False, "bfloat16", lambda name: False) == {}
    assert gpu_kernels(False, "bfloat16", everything) == {
        "attn_implementation": "flash_attention_2", "use_liger_kernel": True}
    assert gpu_kernels(False, "float32", everything) == {"use_liger_kernel": True}


def test_a_launcher_precision_that_disagrees_is_refused(tmp_path, tiny_model_dir, chats,
                                                        monkeypatch):
    """accelerate's mixed precision would silently replace fp32 (transformers reads it when
    neither bf16 nor fp16 is set)."""
    cfg = config(tmp_path, tiny_model_dir, chats)
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    with pytest.raises(ValueError, match="precision: the config trains in fp32 but accelerate"):
        sft_config(cfg)
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "no")
    assert not sft_config(cfg).bf16
