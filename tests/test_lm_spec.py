"""Model spec strings and load_model (docs/architecture.md#contracts "Language models")."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from clew.agents.lm.base import ChatRequest, LMError
from clew.agents.lm.fake import FakeLM
from clew.agents.lm.spec import ModelSpec, ModelSpecError, load_model, parse_spec


@pytest.mark.parametrize("spec, expected", [
    ("vllm:Qwen/Qwen2.5-7B-Instruct", ModelSpec("vllm", "Qwen/Qwen2.5-7B-Instruct")),
    ("vllm:/models/base+lora:/ckpt/adapter", ModelSpec("vllm", "/models/base", "/ckpt/adapter")),
    ("hf:/tmp/tiny", ModelSpec("hf", "/tmp/tiny")),
    ("hf:/tmp/tiny+lora:/tmp/lora", ModelSpec("hf", "/tmp/tiny", "/tmp/lora")),
    ("openai:http://host:8000/v1#Qwen/Qwen2.5-7B-Instruct",
     ModelSpec("openai", "Qwen/Qwen2.5-7B-Instruct", url="http://host:8000/v1")),
    ("openai:https://api.example.org/v1/",
     ModelSpec("openai", "", url="https://api.example.org/v1")),
    ("fake:hello|world", ModelSpec("fake", "hello|world")),
    ("HF:/x", ModelSpec("hf", "/x")),
])
def test_parse_accepted_forms(spec, expected):
    got = parse_spec(spec)
    assert (got.backend, got.model, got.adapter, got.url) == (
        expected.backend, expected.model, expected.adapter, expected.url)
    assert str(got) == spec


@pytest.mark.parametrize("spec, fragment", [
    ("Qwen/Qwen2.5-7B", "no backend prefix"),
    ("torch:/x", "unknown backend 'torch'"),
    ("hf:", "no model path"),
    ("vllm:  +lora:/a", "no model path"),
    ("hf:/m+lora:", "not followed by an adapter"),
    ("hf:/m+lora:/a+lora:/b", "only one LoRA adapter"),
    ("openai:host:8000/v1#m", "must start with http"),
    ("openai:http:///v1#m", "no host"),
    ("openai:http://h/v1#m+lora:/a", "adapter"),
])
def test_malformed_specs_are_clear_errors(spec, fragment):
    with pytest.raises(ModelSpecError) as err:
        parse_spec(spec)
    assert fragment in str(err.value)
    assert repr(spec) in str(err.value) or "string" in str(err.value)


def test_non_string_spec():
    with pytest.raises(ModelSpecError, match="must be a string"):
        parse_spec(42)


def test_fake_spec_cycles_its_texts():
    lm = load_model("fake:a|b|c", shared=False)
    reqs = [ChatRequest([{"role": "user", "content": "x"}]) for _ in range(4)]
    out = asyncio.run(lm.generate(reqs))
    assert [c[0].text for c in out] == ["a", "b", "c", "a"]
    assert lm.spec == "fake:a|b|c"


def test_language_model_passes_through_and_scripted_models_are_never_shared():
    fake = FakeLM(["x"])
    assert load_model(fake) is fake
    assert load_model("fake:q") is not load_model("fake:q")


def test_vllm_backend_without_vllm_is_a_clear_error():
    try:  # a stray folder named vllm on sys.path can make `import vllm` find a namespace
        import vllm.sampling_params  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vllm is installed here")
    with pytest.raises(LMError, match="vllm package is not installed"):
        load_model("vllm:/nowhere", shared=False)


def test_importing_the_lm_layer_and_agents_never_imports_vllm():
    code = ("import sys, clew.agents.lm, clew.agents.lm.spec, clew.agents.lm.hf, "
            "clew.agents.lm.openai_backend, clew.agents.lm.vllm_backend, clew.agents.react, "
            "clew.runner.registry; assert 'vllm' not in sys.modules, 'vllm imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_tiny_spec_builds_the_local_model_on_first_use(tmp_path):
    import asyncio

    from clew.agents.lm import ChatRequest, Sampling, load_model

    path = tmp_path / "tiny"
    lm = load_model(f"hf:tiny:{path}", shared=False)
    assert (path / "config.json").exists() and (path / "tokenizer.json").exists()
    req = ChatRequest([{"role": "user", "content": "move up"}], Sampling(max_tokens=4,
                                                                         temperature=0.0))
    out = asyncio.run(lm.complete(req))
    assert len(out) == 1 and out[0].usage.completion_tokens >= 1


def test_check_model_accepts_what_loads_and_names_what_does_not(tmp_path):
    from clew.agents.lm.spec import check_model

    base, adapter = tmp_path / "base", tmp_path / "lora"
    base.mkdir()
    adapter.mkdir()
    (base / "config.json").write_text("{}")
    (adapter / "adapter_config.json").write_text("{}")
    for good in (f"hf:{base}", f"vllm:{base}+lora:{adapter}", f"hf:tiny:{tmp_path}/new",
                 "vllm:Qwen/Qwen2.5-0.5B-Instruct", "openai:http://h:1/v1#m", "fake:up"):
        assert check_model(good).raw == good
    for bad, why in ((f"hf:{adapter}", "LoRA adapter without its base"),
                     (f"hf:{tmp_path}", "holds no model"),
                     (f"hf:{base}+lora:{base}", "holds no LoRA adapter"),
                     (f"hf:{base}+lora:{tmp_path}/gone", "does not exist"),
                     ("hfx:m", "unknown backend")):
        with pytest.raises(ModelSpecError, match=why):
            check_model(bad)
