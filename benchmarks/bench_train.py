"""Benchmark: ``clew train`` throughput against the same run's hardware peak
(docs/scale-out.md#training-throughput).

Builds a model of a named shape with random weights (``tiny``: the model clew builds itself, its
tokenizer trained on the data as ``clew loop`` does; ``0.5b``, ``1.5b``, ``7b``: Qwen2.5 shapes,
with the tiny tokenizer since no weights or tokenizer can be fetched), trains ``--steps`` steps
of a ``clew train`` preset on a clew dataset (``--data``) or on synthetic chats of a given length
distribution (``--lengths``), and prints one JSON line:

* ``tokens_per_s``: real (non-padding) tokens trained per second, after ``--warmup`` steps;
* ``padding_share``: padding tokens over all tokens the model was fed;
* ``flops_per_token``: by formula, forward + backward (2 FLOPs per weight of every matrix
  product, lm head included; backward twice that for full weights, once for frozen weights under
  LoRA, which need input gradients only; causal attention over each sample's own tokens), and
  ``flops_per_token_recompute``: plus the forward that activation checkpointing repeats;
* ``achieved_tflops`` (with recomputation, the work the device did) and ``peak_tflops``, a
  matrix product measured in this run on the same device and threads (bf16 on GPU, fp32 on
  CPU); ``ratio_to_peak`` is their ratio, ``mfu`` the same without recomputation;
* ``peak_memory_gb``: the device's high-water mark (CUDA allocator; the process's on CPU);
* ``outside_share``: the share of step time (from one step's end to the next) spent outside the
  model's forward, its backward and the optimizer step, timed around each of them (with a device
  synchronisation on GPU): collation, data loading, logging, the trainer's per-step work.

``--plain`` adds the reference of the training-throughput discussion: a plain PyTorch loop on the
same model and samples (chat template, right padding, forward, backward, AdamW; full weights), once
with random batches and once with batches of similar lengths, in seconds per step.

    python benchmarks/bench_train.py                                  # tiny, full-tiny, CPU
    python benchmarks/bench_train.py --data runs/demo/round-1/data/el --plain
    python benchmarks/bench_train.py --shape 7b --preset lora-7b --steps 20   # a GPU node
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

# Qwen2.5 shapes (the numbers of the released configs); vocabularies as released, so the lm head
# costs what it costs in the real model.
SHAPES: dict[str, dict[str, Any]] = {
    "0.5b": {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
             "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
             "tie_word_embeddings": True},
    "1.5b": {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
             "num_attention_heads": 12, "num_key_value_heads": 2, "vocab_size": 151936,
             "tie_word_embeddings": True},
    "7b": {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
           "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
           "tie_word_embeddings": False},
}
WORDS = ["up", "down", "left", "right", "move", "pick", "open", "door", "key", "ball", "box",
         "room", "treasure", "query", "value", "state", "action", "backtrack", "explore", "goal",
         "node", "achieved", "pending", "blocked", "observation", "position", "step", "the",
         "agent", "is", "at", "you", "can", "go", "to", "and", "a", "of", "in"]


# --- data -----------------------------------------------------------------------------------------
def synthetic_chats(lengths: str, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` one-turn chats whose word counts come from a mixture of uniform ranges
    (``"470-940,680-2400"``: half from each); the answer is a short action."""
    ranges = [tuple(int(x) for x in part.split("-")) for part in lengths.split(",")]
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        lo, hi = ranges[i % len(ranges)]
        words = [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]
        rows.append({"messages": [
            {"role": "user", "content": " ".join(words)},
            {"role": "assistant", "content": f"<actions>{rng.choice(WORDS[:4])}</actions>"}],
            "env": f"range-{i % len(ranges)}"})
    return rows


def plain_rows(data: str, envs: list[str] | None) -> list[dict[str, Any]]:
    from clew.training.datasets import load_chat_dataset

    return [row for row in load_chat_dataset(data) if envs is None or row.get("env") in envs]


def chat_texts(data: str) -> list[str]:
    from clew.training.datasets import load_chat_dataset

    return [m["content"] for row in load_chat_dataset(data) for m in row["messages"]]


# --- model ----------------------------------------------------------------------------------------
def build_model(shape: str, folder: Path, texts: list[str], device: str) -> Path:
    """A model of ``shape`` with random weights and a tokenizer clew builds, saved in ``folder``."""
    from clew.agents.lm.tiny import build_tiny_model

    build_tiny_model(folder / "tiny", corpus=texts)
    if shape == "tiny":
        return folder / "tiny"
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    tok = AutoTokenizer.from_pretrained(folder / "tiny")
    config = Qwen2Config(**SHAPES[shape], max_position_embeddings=32768,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    path = folder / shape
    model.save_pretrained(path)
    tok.save_pretrained(path)
    # AutoTokenizer reads the model type of config.json first: name the tokenizer's own class,
    # or a qwen2 config would swap in Qwen2's tokenizer and change the ids (docs/scale-out.md).
    cfg_file = path / "tokenizer_config.json"
    cfg = json.loads(cfg_file.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_file.write_text(json.dumps(cfg))
    del model
    return path


def linear_weights(model) -> int:
    """Weights of every matrix product of the base model (adapters aside), lm head included."""
    import torch

    return sum(m.in_features * m.out_features for name, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and "lora_" not in name)


# --- peak -----------------------------------------------------------------------------------------
def matmul_peak(device: str) -> float:
    """TFLOP/s of the best of several square matrix products (bf16 8192 on GPU, fp32 1024 on CPU
    with the threads training uses)."""
    import torch

    n, dtype = (8192, torch.bfloat16) if device == "cuda" else (1024, torch.float32)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    best = float("inf")
    for _ in range(12):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(4):
            a @ b
        sync(device)
        best = min(best, (time.perf_counter() - t0) / 4)
    return 2 * n ** 3 / best / 1e12


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


# --- probes ---------------------------------------------------------------------------------------
class Probe:
    """Times forward, backward and optimizer step of every training step, and counts tokens,
    padding and attention work of every batch the model is fed."""

    def __init__(self, trainer, device: str, pad_id: int):
        from transformers import TrainerCallback

        self.device, self.pad_id = device, pad_id
        self.steps: list[dict[str, float]] = []
        self.current = self.fresh()
        self.last_end: float | None = None
        self.t_fwd = self.t_opt = 0.0
        model = trainer.model
        model.register_forward_pre_hook(self.before_forward, with_kwargs=True)
        model.register_forward_hook(self.after_forward)
        backward = trainer.accelerator.backward

        def timed_backward(*args, **kwargs):
            sync(self.device)
            t0 = time.perf_counter()
            out = backward(*args, **kwargs)
            sync(self.device)
            self.current["backward"] += time.perf_counter() - t0
            return out

        trainer.accelerator.backward = timed_backward
        probe = self

        class Steps(TrainerCallback):
            def on_pre_optimizer_step(self, args, state, control, **kwargs):
                sync(probe.device)
                probe.t_opt = time.perf_counter()

            def on_optimizer_step(self, args, state, control, **kwargs):
                sync(probe.device)
                probe.current["optimizer"] += time.perf_counter() - probe.t_opt

            def on_step_end(self, args, state, control, **kwargs):
                sync(probe.device)
                now = time.perf_counter()
                if probe.last_end is not None:
                    probe.current["wall"] = now - probe.last_end
                    probe.steps.append(probe.current)
                probe.current, probe.last_end = probe.fresh(), now

        trainer.add_callback(Steps())

    @staticmethod
    def fresh() -> dict[str, Any]:
        return {"forward": 0.0, "backward": 0.0, "optimizer": 0.0, "tokens": 0, "fed": 0,
                "pairs": 0}

    def before_forward(self, module, args, kwargs):
        ids = kwargs.get("input_ids")
        if ids is not None and module.training:
            mask = kwargs.get("attention_mask")
            if mask is not None:
                lengths = mask.sum(-1).tolist()
            else:  # padding-free: each row holds samples whose positions restart at 0
                pos = kwargs["position_ids"].reshape(-1).tolist()
                starts = [i for i, p in enumerate(pos) if p == 0] + [len(pos)]
                lengths = [b - a for a, b in itertools.pairwise(starts)]
                lengths[-1] -= int((ids.reshape(-1)[-lengths[-1]:] == self.pad_id).sum())
            self.current["tokens"] += sum(lengths)
            self.current["fed"] += ids.numel()
            self.current["pairs"] += sum(n * (n + 1) // 2 for n in lengths)
        sync(self.device)
        self.t_fwd = time.perf_counter()

    def after_forward(self, module, args, output):
        sync(self.device)
        self.current["forward"] += time.perf_counter() - self.t_fwd


# --- the plain reference loop ---------------------------------------------------------------------
def plain_loop(model_dir: Path, rows: list[dict[str, Any]], batch: int, steps: int, lr: float,
               max_length: int, seed: int) -> dict[str, float]:
    """Mean seconds per step of a plain loop (full weights, AdamW, right padding, loss on every
    token) over ``steps`` batches drawn from one pass of random batches, and of batches of similar
    lengths (the samples sorted by length, then cut)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    seqs = [tok.apply_chat_template([{"role": m["role"], "content": m["content"]}
                                     for m in r["messages"]], return_dict=True)["input_ids"]
            [-max_length:] for r in rows]
    rng = random.Random(seed)
    out = {}
    for kind in ("random", "similar_lengths"):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_pretrained(model_dir)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
        order = rng.sample(range(len(seqs)), len(seqs))
        if kind == "similar_lengths":
            order.sort(key=lambda i: len(seqs[i]))
        batches = [order[k:k + batch] for k in range(0, len(order) - batch + 1, batch)]
        # batches drawn uniformly from one pass, so both kinds average the same tokens a step
        chosen = [rng.choice(batches) for _ in range(steps)]
        times = []
        for b in chosen:
            t0 = time.perf_counter()
            width = max(len(seqs[i]) for i in b)
            ids = torch.full((len(b), width), tok.pad_token_id)
            mask = torch.zeros((len(b), width), dtype=torch.long)
            for row, i in enumerate(b):
                ids[row, :len(seqs[i])] = torch.tensor(seqs[i])
                mask[row, :len(seqs[i])] = 1
            labels = ids.masked_fill(mask == 0, -100)
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            times.append(time.perf_counter() - t0)
        out[f"plain_{kind}_s_per_step"] = round(statistics.mean(times), 4)
    return out


# --- the run --------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=["tiny", *SHAPES], default="tiny")
    ap.add_argument("--preset", default="full-tiny", help="a clew train preset or YAML file")
    ap.add_argument("--data", help="a clew data subset folder or .jsonl (default: synthetic)")
    ap.add_argument("--lengths", default="470-940,680-2400",
                    help="synthetic chats: word-count ranges, one per mixture part (default: "
                         "the shape of the demo's EL data)")
    ap.add_argument("--samples", type=int, default=256, help="synthetic chats")
    ap.add_argument("--steps", type=int, default=12, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="steps before timing")
    ap.add_argument("--plain", action="store_true", help="also time the plain PyTorch loop")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    ap.add_argument("overrides", nargs="*", metavar="key=value",
                    help="clew train options on top of the preset, e.g. sft.per_device_train_batch_size=16")
    args = ap.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    import torch
    from clew.runner.config import load_config
    from clew.training.config import TrainConfig
    from clew.training.train import build_trainer, run_trainer, train_threads

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available()
                                                          else "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.data:
            data = args.data
        else:
            rows = synthetic_chats(args.lengths, args.samples, seed=0)
            data = str(tmp / "chats.jsonl")
            Path(data).write_text("".join(json.dumps(r) + "\n" for r in rows))
        texts = chat_texts(data)
        model_dir = build_model(args.shape, tmp / "models", texts, device)
        cfg = load_config(TrainConfig, args.preset, list(args.overrides), presets="train", base={
            "model": str(model_dir), "data": data, "output_dir": str(tmp / "out"),
            "merge": False, "device": device,
            "sft": {"max_steps": args.warmup + args.steps + 1, "save_strategy": "no",
                    "logging_steps": 10 ** 6, "report_to": []}})
        with train_threads(cfg):
            threads = torch.get_num_threads()
            peak = matmul_peak(device)
            trainer, tokenizer, _, _ = build_trainer(cfg)
            step_samples = (trainer.args.per_device_train_batch_size
                            * trainer.args.gradient_accumulation_steps)
            probe = Probe(trainer, device, tokenizer.pad_token_id)
            if device == "cuda":
                torch.cuda.reset_peak_memory_stats()
            run_trainer(trainer)
            steps = probe.steps[args.warmup:]
            base = trainer.model.get_base_model() if hasattr(trainer.model, "get_base_model") \
                else trainer.model
            weights = linear_weights(base)
            c = base.config
            head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
            plain = {}
            if args.plain:
                plain = plain_loop(model_dir, plain_rows(data, cfg.envs), step_samples,
                                   max(args.steps, 30), trainer.args.learning_rate,
                                   trainer.args.max_length or 10 ** 9, trainer.args.seed)
        if device == "cuda":
            memory = torch.cuda.max_memory_allocated() / 2 ** 30
        else:
            memory = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20

    wall = sum(s["wall"] for s in steps)
    tokens = sum(s["tokens"] for s in steps)
    fed = sum(s["fed"] for s in steps)
    inside = sum(s["forward"] + s["backward"] + s["optimizer"] for s in steps)
    # forward: 2 FLOPs per weight and token; attention: QK^T and AV over each causal pair
    attn_fwd = 4 * c.num_hidden_layers * c.num_attention_heads * head_dim \
        * sum(s["pairs"] for s in steps) / max(tokens, 1)
    fwd = 2 * weights + attn_fwd
    bwd = (4 if cfg.method == "full" else 2) * weights + 2 * attn_fwd
    model_flops = fwd + bwd
    recompute = getattr(trainer.args, "activation_checkpointing", None)
    if recompute is None:   # transformers below 5.23 knows only the old name
        recompute = trainer.args.gradient_checkpointing
    recompute_flops = model_flops + (fwd if recompute else 0)
    tokens_per_s = tokens / wall
    achieved = tokens_per_s * recompute_flops / 1e12
    print(json.dumps({
        "shape": args.shape, "preset": args.preset, "overrides": args.overrides,
        "device": torch.cuda.get_device_name() if device == "cuda" else f"cpu x{threads} threads",
        "data": args.data or f"synthetic {args.lengths}", "steps": len(steps),
        "s_per_step": round(wall / len(steps), 4),
        "samples_per_step": step_samples,
        "tokens_per_step": round(tokens / len(steps)),
        "tokens_per_s": round(tokens_per_s, 1),
        "padding_share": round(1 - tokens / fed, 4),
        "flops_per_token": round(model_flops), "flops_per_token_recompute": round(recompute_flops),
        "achieved_tflops": round(achieved, 4), "peak_tflops": round(peak, 4),
        "ratio_to_peak": round(achieved / peak, 4),
        "mfu": round(tokens_per_s * model_flops / 1e12 / peak, 4),
        "peak_memory_gb": round(memory, 2),
        "outside_share": round(1 - inside / wall, 4),
        "forward_s": round(sum(s["forward"] for s in steps) / len(steps), 4),
        "backward_s": round(sum(s["backward"] for s in steps) / len(steps), 4),
        "optimizer_s": round(sum(s["optimizer"] for s in steps) / len(steps), 4),
        **plain,
    }))


if __name__ == "__main__":
    main()
