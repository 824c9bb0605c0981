"""Tiny language models built locally, so tests and the demo never download weights (docs/architecture.md#tests-and-benchmarks).

``build_tiny_model(path)`` trains a byte-level BPE on a small built-in corpus, wraps it as a fast
tokenizer with a ChatML chat template (assistant turns marked with ``{% generation %}`` so TRL's
``assistant_only_loss`` works), creates a randomly initialised Llama-style model with head_dim 64
(a size vLLM's CPU attention accepts) and saves both with ``save_pretrained``. The result loads
with ``AutoTokenizer`` / ``AutoModelForCausalLM`` and with vLLM.

A Llama config, not Qwen2: with ``model_type: qwen2`` ``AutoTokenizer`` swaps in Qwen2's tokenizer
class and changes token ids (docs/scale-out.md#vllms-cpu-build-what-the-tests-rely-on).
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterable
from pathlib import Path

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# ChatML; the generation markers let TRL compute the loss on assistant turns only.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\n' }}{% generation %}{{ message['content'] + '<|im_end|>' }}"
    "{% endgeneration %}{{ '\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _corpus() -> list[str]:
    """Text that looks like what clew's prompts contain: moves, coordinates, actions, values."""
    words = [
        "up", "down", "left", "right", "move", "pick", "up", "open", "door", "key", "ball", "box",
        "room", "treasure", "query", "value", "state", "action", "backtrack", "explore", "goal",
        "task", "node", "achieved", "pending", "blocked", "observation", "position", "step",
        "reward", "the", "agent", "is", "at", "you", "can", "go", "to", "and", "a", "of", "in",
        "<actions>", "</actions>", "<intentions>", "</intentions>", "Action:", "Thought:",
        "yes", "no", "A", "B", "C", "D", "E", "score", "best", "found", "so", "far",
    ]
    lines = []
    for i in range(400):
        seq = [words[(i * 7 + j * 13) % len(words)] for j in range(12)]
        lines.append(" ".join(seq) + f" [{i % 10}, {(i * 3) % 10}] {i}.")
    return lines


def build_tiny_model(path: str | Path, *, vocab_size: int = 2048, hidden_size: int = 128,
                     num_layers: int = 2, num_heads: int = 2, max_positions: int = 8192,
                     seed: int = 0, corpus: Iterable[str] | None = None) -> Path:
    """Create a tiny chat model + tokenizer in ``path`` (idempotent: reuses a finished build).

    ``corpus``: texts to train the tokenizer on instead of the built-in lines, e.g. the chats
    of a loop's first round (``clew loop``): on an env's own text the BPE merges its frequent
    phrases, and a sample takes several times fewer tokens (docs/methods/loop.md).

    Processes that ask at once (``accelerate launch`` of ``clew train`` with ``tiny:PATH``)
    take turns on a lock file in ``path``: one builds, the others find its finished build."""
    path = Path(path)
    marker = path / "clew_tiny.json"
    if marker.exists():
        return path
    path.mkdir(parents=True, exist_ok=True)
    with open(path / ".clew_tiny.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)      # released when the file closes
        if not marker.exists():
            _build(path, marker, vocab_size=vocab_size, hidden_size=hidden_size,
                   num_layers=num_layers, num_heads=num_heads, max_positions=max_positions,
                   seed=seed, corpus=corpus)
    return path


def _build(path: Path, marker: Path, *, vocab_size: int, hidden_size: int, num_layers: int,
           num_heads: int, max_positions: int, seed: int, corpus: Iterable[str] | None) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    texts = list(corpus) if corpus is not None else _corpus()
    bpe.train_from_iterator(texts, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        unk_token=None,
    )
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(path)

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=hidden_size, intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers, num_attention_heads=num_heads,
        num_key_value_heads=num_heads, head_dim=hidden_size // num_heads,
        max_position_embeddings=max_positions, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
    )
    if config.head_dim not in (32, 64, 80, 96, 112, 128):
        raise ValueError(f"head_dim {config.head_dim} is not one vLLM's CPU attention supports")
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(path)
    marker.write_text(json.dumps({"vocab_size": len(tok), "hidden_size": hidden_size,
                                  "layers": num_layers, "max_positions": max_positions,
                                  "seed": seed, "corpus": "given" if corpus is not None
                                  else "built-in"}))
