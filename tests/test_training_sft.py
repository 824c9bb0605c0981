"""SFT with TRL + PEFT on the tiny local model (CPU): masks, loss, adapter vs merged model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from clew.agents.lm.base import ChatRequest, Sampling
from clew.cli.main import main
from clew.envs import registry
from clew.training.config import TrainConfig, TrainResult
from clew.training.datasets import DataConfig, build_datasets, save_datasets
from clew.training.sft import EnvBatches, prepare_dataset, to_prompt_completion
from clew.training.train import build_trainer
from training_toys import write_run

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "train"


def msg(role, content, weight=None):
    return {"role": role, "content": content, "weight": weight}


def test_weights_become_prompt_and_completion():
    chat = [msg("system", "s"), msg("user", "u0"), msg("assistant", "a0", 0),
            msg("user", "u1"), msg("assistant", "a1", 1)]
    pc = to_prompt_completion(chat)
    assert [m["content"] for m in pc["prompt"]] == ["s", "u0", "a0", "u1"]
    assert pc["completion"] == [{"role": "assistant", "content": "a1"}]
    full = to_prompt_completion([msg("user", "u"), msg("assistant", "a", 1),
                                 msg("user", "v"), msg("assistant", "b")])   # no weight = 1
    assert [m["content"] for m in full["completion"]] == ["a", "v", "b"]
    assert to_prompt_completion([msg("user", "u"), msg("assistant", "a", 0)]) is None
    with pytest.raises(ValueError, match="row 7: assistant message 3 has weight 0"):
        to_prompt_completion([msg("user", "u"), msg("assistant", "a", 1), msg("user", "v"),
                              msg("assistant", "b", 0)], "row 7")


def test_shipped_configs_are_valid():
    from clew.runner.config import load_config

    for file in sorted(CONFIGS.glob("*.yaml")):
        cfg = load_config(TrainConfig, str(file), [])
        assert cfg.output_dir and cfg.data
    big = load_config(TrainConfig, str(CONFIGS / "lora-7b.yaml"), [])
    assert big.method == "lora" and big.trainer("gradient_checkpointing") and big.merge


def test_old_training_keys_are_read_as_their_sft_fields_with_a_warning(capsys):
    """The trainer settings that were clew's own fields still work, each with a warning naming
    the sft key, and they override a preset's sft section like the new key would."""
    from clew.runner.config import load_config

    cfg = load_config(TrainConfig, "lora-tiny", ["max_steps=50", "batch_size=2",
                                                 "save_checkpoints=true", "learning_rate=1e-4"],
                      presets="train")
    assert cfg.trainer("max_steps") == 50 and cfg.trainer("per_device_train_batch_size") == 2
    assert cfg.trainer("save_strategy") == "steps" and cfg.trainer("learning_rate") == "1e-4"
    err = capsys.readouterr().err
    assert "warning: max_steps is deprecated and read as sft.max_steps" in err
    assert "batch_size is deprecated and read as sft.per_device_train_batch_size" in err
    with pytest.raises(ValueError, match="max_steps and sft.max_steps are the same setting"):
        TrainConfig(model="m", data="d", output_dir="o", max_steps=5, sft={"max_steps": 6})


def test_config_errors_name_the_field(capsys):
    assert main(["train", "--model", "tiny:x", "--data", "d", "--out", "o", "lora.r=0"]) == 2
    assert "lora.r" in capsys.readouterr().err
    assert main(["train", "--model", "tiny:x", "--data", "d", "--out", "o", "nope=1"]) == 2
    assert "nope" in capsys.readouterr().err
    with pytest.raises(ValueError, match="report_to: wandb needs"):
        import importlib.util

        from clew.training.config import _check_reporters
        if importlib.util.find_spec("wandb"):
            pytest.skip("wandb is installed here")
        _check_reporters(["wandb"])


@pytest.fixture(scope="module")
def el_data(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(registry.ENVS, "toy-tree", registry.EnvEntry("training_toys:TreeEnv"))
        root = tmp_path_factory.mktemp("sft")
        run = write_run(root / "run", n_tasks=4, failed=False, without_trees=False)
        ds, report = build_datasets(DataConfig(runs=[str(run)], subsets=["el"]))
        save_datasets(ds, report, root / "data")
    return root


def tiny_config(root, model, **kw):
    sft = {"max_length": 256, "max_steps": 24, "per_device_train_batch_size": 4,
           "gradient_accumulation_steps": 1, "learning_rate": 3e-3,
           "lr_scheduler_type": "constant", "logging_steps": 4, "save_strategy": "no", "seed": 0}
    base = {"model": str(model), "data": str(root / "data" / "el"),
            "output_dir": str(root / "out"), "lora": {"r": 8, "alpha": 16, "dropout": 0.0}}
    return TrainConfig(**{**base, **kw, "sft": {**sft, **kw.get("sft", {})}})


def test_loss_only_on_weighted_assistant_turns(el_data, tiny_model_dir):
    trainer, tok, _, empty = build_trainer(tiny_config(el_data, tiny_model_dir, limit=4))
    assert empty == 0
    for i in range(4):
        row = trainer.train_dataset[i]
        target = [t for t, lab in zip(row["input_ids"], row["labels"]) if lab != -100]
        text = tok.decode(target)
        # the EL target turns of the worked example: only the last assistant turn is trained
        assert text.endswith("<|im_end|>") and "OBSERVATION" not in text
        assert text.count("Next action:") == 1


def test_sft_section_goes_to_trl_and_bad_names_are_errors(el_data, tiny_model_dir):
    """``sft``: TRL's own SFTConfig fields, passed through (here the length-grouped sampler,
    which keeps short samples out of batches padded to a long one)."""
    cfg = tiny_config(el_data, tiny_model_dir, method="full",
                      sft={"train_sampling_strategy": "group_by_length"})
    trainer, *_ = build_trainer(cfg)
    assert trainer.args.train_sampling_strategy == "group_by_length"
    sampler = trainer.get_train_dataloader().batch_sampler.sampler
    assert type(sampler).__name__ == "LengthGroupedSampler"
    with pytest.raises(ValueError, match="sft.nope: not a field of TRL's SFTConfig"):
        build_trainer(tiny_config(el_data, tiny_model_dir, sft={"nope": 1}))
    with pytest.raises(ValueError, match="bf16: clew sets it from precision"):
        tiny_config(el_data, tiny_model_dir, sft={"bf16": True})
    with pytest.raises(ValueError, match="sft.packing: not read when objective is dpo"):
        tiny_config(el_data, tiny_model_dir, objective="dpo", sft={"packing": True})


def test_env_batches_hold_one_env_each_and_cover_every_sample():
    groups = ["a"] * 10 + ["b"] * 3 + ["c"] * 8
    sampler = EnvBatches(groups, batch_size=4, seed=1)
    assert len(sampler) == 12 + 4 + 8      # a: 3 batches (topped up), b: 1, c: 2
    epochs = [list(sampler) for _ in range(3)]
    for order in epochs:
        assert len(order) == len(sampler)
        batches = [order[k:k + 4] for k in range(0, len(order), 4)]
        assert all(len({groups[i] for i in b}) == 1 for b in batches)
        assert set(order) == set(range(len(groups)))   # every sample, every epoch
    assert epochs[0] != epochs[1]                      # a new shuffle per epoch
    again = EnvBatches(groups, batch_size=4, seed=1)
    assert list(again) == epochs[0]                    # deterministic in seed and epoch
    again.set_epoch(2)
    assert list(again) == epochs[2]
    # the batches' envs are mixed, not one env after the other
    firsts = [groups[epochs[0][k]] for k in range(0, len(epochs[0]), 4)]
    assert firsts != sorted(firsts)


def test_batch_by_env_in_the_trainer(el_data, tiny_model_dir, tmp_path):
    """The trainer's batches come from EnvBatches over the rows' env (a JSONL's meta.env)."""
    rows = [json.loads(line) for line in (el_data / "data" / "el.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):
        row["meta"]["env"] = "long" if i % 3 == 0 else "short"
    data = tmp_path / "two-envs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = tiny_config(el_data, tiny_model_dir, method="full", data=str(data), batch_by_env=True)
    trainer, *_ = build_trainer(cfg)
    envs = trainer.batch_envs
    assert envs.count("long") == len(rows[::3]) and set(envs) == {"long", "short"}
    order = list(trainer._get_train_sampler())
    assert all(len({envs[i] for i in order[k:k + 4]}) == 1 for k in range(0, len(order), 4))
    assert len(list(trainer.get_train_dataloader())) == len(order) // 4
    for row in rows:
        del row["meta"]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match="batch_by_env: dataset .* does not name every row's env"):
        build_trainer(cfg)
    with pytest.raises(ValueError, match="batch_by_env: packing joins"):
        tiny_config(el_data, tiny_model_dir, batch_by_env=True, sft={"packing": True})
    with pytest.raises(ValueError, match="batch_by_env: not read when objective is dpo"):
        tiny_config(el_data, tiny_model_dir, objective="dpo", batch_by_env=True)


def test_envs_train_on_the_samples_of_those_envs_only(el_data, tiny_model_dir, tmp_path):
    """``envs`` keeps the rows whose env it names (a family's model in clew loop)."""
    rows = [json.loads(line) for line in (el_data / "data" / "el.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):
        row["meta"]["env"] = "a" if i % 3 == 0 else "b"
        row["messages"][-1]["content"] += f" row {i}"      # which row a sample came from
    data = tmp_path / "two-envs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for envs, expected in ((["a"], rows[::3]), (["a", "b"], rows), (None, rows)):
        ds, empty = prepare_dataset(tiny_config(el_data, tiny_model_dir, data=str(data),
                                                envs=envs))
        assert empty == 0 and [r["completion"][-1]["content"] for r in ds] == [
            r["messages"][-1]["content"] for r in expected], envs
    with pytest.raises(ValueError, match=r"envs: dataset .* has no sample of \['c'\]"):
        prepare_dataset(tiny_config(el_data, tiny_model_dir, data=str(data), envs=["c"]))
    with pytest.raises(ValueError, match="envs: not read when objective is dpo"):
        tiny_config(el_data, tiny_model_dir, objective="dpo", envs=["a"])


def test_a_bad_trl_section_is_one_error_line_from_the_command(el_data, tiny_model_dir, capsys):
    code = main(["train", "--model", str(tiny_model_dir), "--data", str(el_data / "data" / "el"),
                 "--out", str(el_data / "bad-sft"), "method=full", "sft.max_steps=1",
                 "sft={nope: 1}"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: sft.nope: not a field of TRL's SFTConfig")
    assert "Traceback" not in err and not (el_data / "bad-sft" / "clew_train.json").exists()


@pytest.fixture(scope="module")
def trained(el_data, lively_model_dir):
    """`clew train` with configs/train/lora-tiny.yaml, shortened for a test.

    The "lively" tiny model (larger random weights) gives varied greedy output, so equal outputs
    of adapter and merged model are not a coincidence of a constant answer."""
    out = el_data / "out"
    code = main(["train", "--config", str(CONFIGS / "lora-tiny.yaml"),
                 "--model", str(lively_model_dir), "--data", str(el_data / "data" / "el"),
                 "--out", str(out), "sft.max_steps=24", "sft.max_length=256",
                 "sft.learning_rate=3e-3", "sft.logging_steps=4"])
    assert code == 0
    record = json.loads((out / "clew_train.json").read_text())
    cfg = TrainConfig(**record["config"])
    return cfg, TrainResult(out, out / "merged", record["losses"], record["metrics"])


def test_training_lowers_the_loss(trained):
    cfg, result = trained
    losses = result.losses
    assert len(losses) >= 4 and result.metrics["global_step"] == cfg.trainer("max_steps")
    first, last = sum(losses[:2]) / 2, sum(losses[-2:]) / 2
    assert last < first - 0.5, losses  # nats per token; a random model starts near ln(2048)
    assert (result.output_dir / "adapter_config.json").exists()
    assert (result.output_dir / "clew_train.json").exists()


def test_adapter_and_merged_model_give_the_same_greedy_output(trained):
    import torch
    from clew.agents.lm.hf import HFModel
    from clew.training.datasets import load_chat_dataset
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    cfg, result = trained
    base = cfg.model
    rows = load_chat_dataset(cfg.data).select(range(3))
    prompts = [[{"role": m["role"], "content": m["content"]} for m in r["messages"][:-1]]
               for r in rows]
    requests = [ChatRequest(p, Sampling(temperature=0.0, max_tokens=24)) for p in prompts]

    async def texts(lm):
        out = await lm.generate(requests)
        await lm.aclose()
        return [c[0].text for c in out]

    via_adapter = asyncio.run(texts(HFModel(base, adapter=str(result.output_dir))))
    via_merged = asyncio.run(texts(HFModel(str(result.merged_dir))))
    assert via_adapter == via_merged
    # and the adapter really changed the model (same logits merged or not, not the base's)
    ids = torch.tensor([[5, 17, 42, 99, 7]])
    with torch.no_grad():
        plain = AutoModelForCausalLM.from_pretrained(base)
        before = plain(ids).logits
        peft = PeftModel.from_pretrained(plain, str(result.output_dir))
        adapted = peft(ids).logits
        merged = AutoModelForCausalLM.from_pretrained(str(result.merged_dir))(ids).logits
    assert torch.allclose(adapted, merged, atol=1e-4)
    assert (adapted - before).abs().max() > 1e-2


def test_distilled_agent_runs_the_adapter(trained, monkeypatch):
    """The distilled agent loads hf:BASE+lora:ADAPTER and plays an episode through the runner."""
    from clew.agents.distilled import DistilledAgent
    from clew.runner.episodes import run_episode
    from training_toys import worked_example

    monkeypatch.setitem(registry.ENVS, "toy-tree", registry.EnvEntry("training_toys:TreeEnv"))
    cfg, result = trained
    _, _, task = worked_example()
    agent = DistilledAgent(f"hf:{cfg.model}+lora:{result.output_dir}", greedy=True,
                           max_tokens=16, model_options={"shared": False})
    record = asyncio.run(run_episode(agent, task, max_steps=3, max_invalid_streak=None))
    assert record["outcome"]["steps"] == 3 and record["agent_kind"] == "learned"
    assert all(s["raw"] is not None for s in record["steps"])
    assert record["usage"]["policy"]["calls"] == 3


def test_full_fine_tuning_writes_a_complete_model(el_data, tiny_model_dir):
    from clew.agents.lm.hf import HFModel

    out = el_data / "full"
    code = main(["train", "--config", str(CONFIGS / "full-tiny.yaml"), "--model",
                 str(tiny_model_dir), "--data", str(el_data / "data" / "el"), "--out", str(out),
                 "sft.max_steps=3", "sft.max_length=128", "sft.logging_steps=1"])
    assert code == 0
    assert (out / "config.json").exists() and not (out / "adapter_config.json").exists()
    lm = HFModel(str(out))  # loads as a plain model, with the chat template
    assert lm.tokenizer.chat_template
    losses = json.loads((out / "clew_train.json").read_text())["losses"]
    assert len(losses) == 3
