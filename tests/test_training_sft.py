"""SFT with TRL + PEFT on the tiny local model (CPU): masks, loss, adapter vs merged model."""

from __future__ import annotations

import asyncio

import pytest
from training_toys import write_run

from clew.agents.lm.base import ChatRequest, Sampling
from clew.envs import registry
from clew.scripts.cli import main
from clew.training.datasets import DataConfig, build_datasets, save_datasets
from clew.training.sft import TrainConfig, build_trainer, to_prompt_completion, train


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


def test_config_errors_name_the_field(capsys):
    assert main(["train", "--model", "tiny:x", "--data", "d", "--out", "o", "lora.r=0"]) == 2
    assert "lora.r" in capsys.readouterr().err
    assert main(["train", "--model", "tiny:x", "--data", "d", "--out", "o", "nope=1"]) == 2
    assert "nope" in capsys.readouterr().err
    with pytest.raises(ValueError, match="report_to: wandb needs"):
        from clew.training.sft import _check_reporters
        import importlib.util
        if importlib.util.find_spec("wandb"):
            pytest.skip("wandb is installed here")
        _check_reporters(["wandb"])


@pytest.fixture(scope="module")
def el_data(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(registry.ENVS, "toy-tree", "training_toys:TreeEnv")
        root = tmp_path_factory.mktemp("sft")
        run = write_run(root / "run", n_tasks=4, failed=False, without_trees=False)
        ds, report = build_datasets(DataConfig(runs=[str(run)], subsets=["el"]))
        save_datasets(ds, report, root / "data")
    return root


def tiny_config(root, **kw):
    base = dict(model=f"tiny:{root.parent / 'tiny-model'}", data=str(root / "data" / "el"),
                output_dir=str(root / "out"), max_length=256, max_steps=24, batch_size=4,
                grad_accum=1, learning_rate=3e-3, lr_scheduler="constant", logging_steps=4,
                save_checkpoints=False, lora={"r": 8, "alpha": 16, "dropout": 0.0}, seed=0)
    return TrainConfig(**{**base, **kw})


def test_loss_only_on_weighted_assistant_turns(el_data):
    trainer, tok, _, empty = build_trainer(tiny_config(el_data, limit=4))
    assert empty == 0
    for i in range(4):
        row = trainer.train_dataset[i]
        target = [t for t, lab in zip(row["input_ids"], row["labels"]) if lab != -100]
        text = tok.decode(target)
        # the EL target turns of the worked example: only the last assistant turn is trained
        assert text.endswith("<|im_end|>") and "OBSERVATION" not in text
        assert text.count("Next action:") == 1


@pytest.fixture(scope="module")
def trained(el_data):
    cfg = tiny_config(el_data, merge=True)
    return cfg, train(cfg)


def test_training_lowers_the_loss(trained):
    cfg, result = trained
    losses = result.losses
    assert len(losses) >= 4 and result.metrics["global_step"] == cfg.max_steps
    first, last = sum(losses[:2]) / 2, sum(losses[-2:]) / 2
    assert last < first - 0.5, losses  # nats per token; a random model starts near ln(2048)
    assert (result.output_dir / "adapter_config.json").exists()
    assert (result.output_dir / "clew_train.json").exists()


def test_adapter_and_merged_model_give_the_same_greedy_output(trained):
    from clew.agents.lm.hf import HFModel

    cfg, result = trained
    base = cfg.model.removeprefix("tiny:")
    adapter = HFModel(base, adapter=str(result.output_dir))
    merged = HFModel(str(result.merged_dir))
    plain = HFModel(base)
    requests = [ChatRequest([{"role": "user", "content": f"[S0] OBSERVATION:\nroom {i}"}],
                            Sampling(temperature=0.0, max_tokens=24)) for i in range(3)]

    async def texts(lm):
        out = await lm.generate(requests)
        await lm.aclose()
        return [c[0].text for c in out]

    a, m, p = (asyncio.run(texts(lm)) for lm in (adapter, merged, plain))
    assert a == m
    assert a != p  # the adapter changed the model
