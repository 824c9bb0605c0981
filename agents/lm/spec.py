"""Model spec strings and ``load_model`` (docs/architecture.md#contracts "Language models").

A model is named by one string, the same in configs, on the command line and in run records:

=========================================  =====================================================
``vllm:MODEL``                              in-process vLLM engine (hub id or local folder)
``vllm:PATH+lora:ADAPTER``                  the same with a PEFT LoRA adapter folder
``openai:http://host:8000/v1#MODEL``        any OpenAI-compatible server; ``#MODEL`` may be left
                                            out when the server serves exactly one model
``hf:PATH`` / ``hf:PATH+lora:ADAPTER``      transformers ``generate`` (CPU or GPU), optional PEFT
``fake:TEXT`` / ``fake:A|B|C``              scripted answers for smoke tests: every request gets
                                            the texts in turn, cycling
=========================================  =====================================================

For ``hf:`` and ``vllm:``, a model written ``tiny:PATH`` (``hf:tiny:runs/models/tiny``) is the
tiny model clew builds itself (:mod:`clew.agents.lm.tiny`), created in PATH on first use: the
way to try LM agents on a laptop with no weights and no download.

``load_model(spec, **options)`` builds the backend; options go to its constructor (``dtype``,
``max_model_len``, ``max_concurrency``, ...). Backend modules are imported only when used, so
``import clew`` never imports vllm.

Decision: one model per process for each normalised spec (``shared=True``): the backend, the
model (local paths resolved) and the adapter or server. Building a vLLM engine twice wastes
minutes, and on a GPU the second engine does not fit at all (each reserves its
``gpu_memory_utilization`` share). So a later ``load_model`` of the same spec returns the same
instance when its options are none (how per-role ``role_models`` ask) or agree with the first
ones; other options are an error for ``vllm:`` (name them in the run's ``model_options``) and a
separate instance for the light backends. Pass ``shared=False`` for a private instance.
``fake:`` models are never shared (each keeps its place in its script).

Engine-only options (:data:`ENGINE_ONLY_OPTIONS`) change where and how fast a model runs, not
what an experiment is: resume and merge ignore them (:func:`experiment_options`), so a shard
rerun with another tensor-parallel size or a lower memory fraction continues the same run.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from clew.agents.lm.base import LanguageModel, LMError
from clew.agents.lm.fake import FakeLM
from clew.agents.lm.openai_backend import OpenAIModel
from clew.agents.lm.recording import SESSION
from clew.agents.lm.tiny import build_tiny_model
from clew.agents.lm.vllm_backend import VLLMModel

BACKENDS = ("vllm", "openai", "hf", "fake")
LORA_SEP = "+lora:"


class ModelSpecError(ValueError):
    """A malformed model spec string; the message quotes it and shows the accepted forms."""


_FORMS = ("vllm:MODEL, vllm:PATH+lora:ADAPTER, openai:http://HOST:PORT/v1#MODEL, hf:PATH, "
          "hf:PATH+lora:ADAPTER, fake:TEXT")


@dataclass(frozen=True)
class ModelSpec:
    """A parsed spec string. ``model`` is the hub id / path / served name; ``url`` for openai."""

    backend: str
    model: str
    adapter: str | None = None
    url: str | None = None
    raw: str = ""

    def __str__(self) -> str:
        return self.raw


def _bad(spec: str, why: str) -> ModelSpecError:
    return ModelSpecError(f"bad model spec {spec!r}: {why}; accepted forms: {_FORMS}")


def parse_spec(spec: str) -> ModelSpec:
    """Parse a model spec string (see the module docstring); raise ModelSpecError if malformed."""
    if not isinstance(spec, str):
        raise ModelSpecError(f"a model spec must be a string, got {type(spec).__name__}")
    backend, sep, rest = spec.partition(":")
    if not sep:
        raise _bad(spec, "no backend prefix")
    backend = backend.strip().lower()
    if backend not in BACKENDS:
        raise _bad(spec, f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    if backend == "fake":
        return ModelSpec("fake", rest, raw=spec)
    if backend == "openai":
        if LORA_SEP in rest:
            raise _bad(spec, "an openai server loads adapters itself; name the adapter's served "
                             "model after '#'")
        url, _, model = rest.partition("#")
        url, model = url.strip(), model.strip()
        if not url.startswith(("http://", "https://")):
            raise _bad(spec, f"the server URL {url!r} must start with http:// or https://")
        host = url.split("://", 1)[1].split("/", 1)[0]
        if not host:
            raise _bad(spec, "the server URL has no host")
        return ModelSpec("openai", model, url=url.rstrip("/"), raw=spec)
    model, sep, adapter = rest.partition(LORA_SEP)
    model = model.strip()
    if not model:
        raise _bad(spec, "no model path or name after the backend")
    if sep:
        adapter = adapter.strip()
        if not adapter:
            raise _bad(spec, "'+lora:' is not followed by an adapter path")
        if LORA_SEP in adapter:
            raise _bad(spec, "only one LoRA adapter can be named")
        return ModelSpec(backend, model, adapter=adapter, raw=spec)
    return ModelSpec(backend, model, raw=spec)


#: options of each backend that change where and how fast the model runs, not its outputs'
#: distribution (batching may still move the last bits of the logits; docs/scale-out.md).
#: ``max_model_len`` and ``dtype`` are not among them: they change which prompts fit and the
#: numbers computed.
ENGINE_ONLY_OPTIONS = {
    "vllm": frozenset({
        "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
        "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens",
        "enable_chunked_prefill", "enable_prefix_caching", "enforce_eager", "swap_space",
        "cpu_offload_gb", "kv_cache_memory_bytes", "block_size", "max_loras",
        "distributed_executor_backend", "disable_custom_all_reduce", "compilation_config",
        "batch_invariant", "disable_log_stats"}),
    "openai": frozenset({"api_key", "max_concurrency", "timeout", "retries", "backoff",
                         "max_backoff"}),
    "hf": frozenset({"batch_window", "max_batch_size"}),
    "fake": frozenset(),
}


def experiment_options(agent_options: Any) -> Any:
    """``agent_options`` without the engine-only keys of its ``model_options`` (what resume and
    merge compare; see the module docstring)."""
    if not isinstance(agent_options, dict) or not isinstance(
            agent_options.get("model_options"), dict):
        return agent_options
    model = agent_options.get("model")
    try:
        backends = [parse_spec(model).backend] if isinstance(model, str) else list(
            ENGINE_ONLY_OPTIONS)
    except ModelSpecError:
        return agent_options
    drop = frozenset().union(*(ENGINE_ONLY_OPTIONS[b] for b in backends))
    out = copy.deepcopy(agent_options)
    out["model_options"] = {k: v for k, v in out["model_options"].items() if k not in drop}
    return out


def _norm_path(path: str) -> str:
    """A local folder as its absolute path (``./m`` and ``m`` name one model); hub ids as given."""
    prefix = "tiny:" if path.startswith("tiny:") else ""
    p = Path(path.removeprefix(prefix)).expanduser()
    return prefix + str(p.resolve()) if prefix or p.exists() else path


def normalised(parsed: ModelSpec) -> tuple:
    """What makes two specs name the same model instance (the cache key)."""
    if parsed.backend == "openai":
        return ("openai", parsed.url, parsed.model)
    return (parsed.backend, _norm_path(parsed.model),
            _norm_path(parsed.adapter) if parsed.adapter else None)


#: normalised spec -> [(options, model)]: the first entry is the shared instance; light
#: backends may hold more, one per distinct set of options
_CACHE: dict[tuple, list[tuple[dict[str, Any], LanguageModel]]] = {}


def _agrees(asked: dict[str, Any], built: dict[str, Any]) -> bool:
    return all(k in built and built[k] == v for k, v in asked.items())


def load_model(spec: str | LanguageModel, *, shared: bool = True, **options: Any) -> LanguageModel:
    """Build the backend a spec names (a LanguageModel passes through unchanged).

    While a run records its LM calls, the model comes wrapped by the recording; while a run is
    replayed, no model is built: the replay answers for it (docs/methods/recording.md)."""
    session = SESSION.get()
    if session is not None and session.replaying:
        if isinstance(spec, str):
            parse_spec(spec)
        return session.model(spec)
    model = _load(spec, shared, options)
    return model if session is None else session.model(model)


def _load(spec: str | LanguageModel, shared: bool, options: dict[str, Any]) -> LanguageModel:
    if isinstance(spec, LanguageModel):
        return spec
    parsed = parse_spec(spec)
    # scripted models keep a position in their script: every user gets a fresh one
    if not shared or parsed.backend == "fake":
        model = _build(parsed, options)
        model.spec = spec
        return model
    key = normalised(parsed)
    entries = [(o, m) for o, m in _CACHE.get(key, []) if not getattr(m, "closed", False)]
    for built, model in entries:
        if _agrees(options, built):
            return model
    if entries and parsed.backend == "vllm":
        built = entries[0][0]
        differ = sorted(k for k in options if built.get(k, "<unset>") != options[k])
        raise LMError(
            f"{spec}: this process already runs an engine for this model with options "
            f"{built or '{}'}; another engine would need a second share of the GPU. Options "
            f"that differ: {', '.join(differ)}. Give every use of the model the same "
            f"model_options (per-role role_models take the run's)")
    model = _build(parsed, options)
    model.spec = spec
    _CACHE[key] = [*entries, (dict(options), model)]
    return model


def _looks_local(name: str) -> bool:
    """A model name written as a path (a hub id is ``org/name``, one slash, no dot first)."""
    return name.startswith(("/", "./", "../", "~")) or name.count("/") > 1 or name in (".", "..")


def check_local_paths(parsed: ModelSpec) -> None:
    """A model or adapter written as a path must exist: say so, instead of the hub client's
    "Repo id must use alphanumeric chars" about a path."""
    for what, name in (("model folder", parsed.model), ("adapter folder", parsed.adapter)):
        if name and _looks_local(name) and not Path(name).expanduser().exists():
            raise ModelSpecError(f"model {parsed.raw}: the {what} {name} does not exist")


def check_model(spec: str) -> ModelSpec:
    """What can be known about a model spec without loading it (docs/architecture.md, "Language
    models"), checked before any work: it parses (a known backend); a model or adapter written
    as a local path exists; a local model folder holds a model (``config.json``), and not only a
    LoRA adapter, which needs its base named (``hf:BASE+lora:ADAPTER``); a local adapter folder
    holds an adapter (``adapter_config.json``). ``tiny:`` models (built on first use), hub ids
    and servers are not looked at. Raises :class:`ModelSpecError`; returns the parsed spec."""
    parsed = parse_spec(spec)
    if parsed.backend not in ("hf", "vllm"):
        return parsed
    tiny = parsed.model.startswith("tiny:")  # built on first use: only its adapter is checked
    check_local_paths(replace(parsed, model="") if tiny else parsed)
    model = Path(parsed.model).expanduser()
    if not tiny and model.is_dir() and not (model / "config.json").exists():
        if (model / "adapter_config.json").exists():
            base = _adapter_base(model)
            raise ModelSpecError(
                f"model {parsed.raw}: {parsed.model} is a LoRA adapter without its base model; "
                f"name both: {parsed.backend}:BASE{LORA_SEP}{parsed.model}"
                + (f" (the adapter was trained on {base})" if base else ""))
        raise ModelSpecError(f"model {parsed.raw}: the model folder {parsed.model} holds no "
                             f"model (no config.json)")
    if parsed.adapter:
        adapter = Path(parsed.adapter).expanduser()
        if adapter.is_dir() and not (adapter / "adapter_config.json").exists():
            raise ModelSpecError(f"model {parsed.raw}: the adapter folder {parsed.adapter} holds "
                                 f"no LoRA adapter (no adapter_config.json)")
    return parsed


def _adapter_base(folder: Path) -> str | None:
    try:
        return json.loads((folder / "adapter_config.json").read_text()).get(
            "base_model_name_or_path")
    except (OSError, ValueError, AttributeError):
        return None


def _importable(module: str) -> bool:
    return find_spec(module) is not None


def loaded_engine_settings() -> dict[str, dict[str, Any]]:
    """spec -> engine settings of every shared model that reports them (vLLM engines), for the
    run's config: what the engine was actually built with."""
    return {m.spec: dict(m.settings) for entries in _CACHE.values() for _, m in entries
            if isinstance(getattr(m, "settings", None), dict)
            and not getattr(m, "closed", False)}


def _build(parsed: ModelSpec, options: dict[str, Any]) -> LanguageModel:
    # a missing vllm package is the first thing to say (the backend says it): paths after it
    if (parsed.backend == "hf" or parsed.backend == "vllm" and _importable("vllm")) \
            and not parsed.model.startswith("tiny:"):
        check_local_paths(parsed)
    if parsed.model.startswith("tiny:") and parsed.backend in ("hf", "vllm"):
        parsed = replace(parsed, model=str(build_tiny_model(parsed.model.removeprefix("tiny:"))))
    if parsed.backend == "fake":
        texts = parsed.model.split("|")
        return FakeLM(lambda request, i: texts[i % len(texts)], **options)
    if parsed.backend == "hf":
        # the transformers backend imports torch and transformers as it loads: only when used
        from clew.agents.lm.hf import HFModel

        return HFModel(parsed.model, adapter=parsed.adapter, **options)
    if parsed.backend == "openai":
        return OpenAIModel(parsed.url, parsed.model or None, **options)
    return VLLMModel(parsed.model, adapter=parsed.adapter, **options)
