"""Model spec strings and ``load_model`` (DESIGN §2 "Language models").

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

Decision: models are cached per process by (spec, options) (``shared=True``), because building a
vLLM engine or loading weights twice in one run wastes minutes and memory; pass ``shared=False``
for a private instance. ``fake:`` models are never shared (each keeps its place in its script).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clew.agents.lm.base import LanguageModel

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


_CACHE: dict[tuple, LanguageModel] = {}


def _cache_key(spec: str, options: dict[str, Any]) -> tuple | None:
    try:
        key = (spec, tuple(sorted(options.items())))
        hash(key)
        return key
    except TypeError:  # unhashable option values: no sharing
        return None


def load_model(spec: str | LanguageModel, *, shared: bool = True, **options: Any) -> LanguageModel:
    """Build the backend a spec names (a LanguageModel passes through unchanged)."""
    if isinstance(spec, LanguageModel):
        return spec
    parsed = parse_spec(spec)
    # scripted models keep a position in their script: every user gets a fresh one
    key = _cache_key(spec, options) if shared and parsed.backend != "fake" else None
    if key is not None and key in _CACHE:
        return _CACHE[key]
    model = _build(parsed, options)
    model.spec = spec
    if key is not None:
        _CACHE[key] = model
    return model


def _looks_local(name: str) -> bool:
    """A model name written as a path (a hub id is ``org/name``, one slash, no dot first)."""
    return name.startswith(("/", "./", "../", "~")) or name.count("/") > 1 or name in (".", "..")


def check_local_paths(parsed: ModelSpec) -> None:
    """A model or adapter written as a path must exist: say so, instead of the hub client's
    "Repo id must use alphanumeric chars" about a path."""
    from pathlib import Path

    for what, name in (("model folder", parsed.model), ("adapter folder", parsed.adapter)):
        if name and _looks_local(name) and not Path(name).expanduser().exists():
            raise ModelSpecError(f"model {parsed.raw}: the {what} {name} does not exist")


def _build(parsed: ModelSpec, options: dict[str, Any]) -> LanguageModel:
    if parsed.backend in ("hf", "vllm") and not parsed.model.startswith("tiny:"):
        check_local_paths(parsed)
    if parsed.model.startswith("tiny:") and parsed.backend in ("hf", "vllm"):
        from dataclasses import replace

        from clew.agents.lm.tiny import build_tiny_model

        parsed = replace(parsed, model=str(build_tiny_model(parsed.model.removeprefix("tiny:"))))
    if parsed.backend == "fake":
        from clew.agents.lm.fake import FakeLM

        texts = parsed.model.split("|")
        return FakeLM(lambda request, i: texts[i % len(texts)], **options)
    if parsed.backend == "hf":
        from clew.agents.lm.hf import HFModel

        return HFModel(parsed.model, adapter=parsed.adapter, **options)
    if parsed.backend == "openai":
        from clew.agents.lm.openai_backend import OpenAIModel

        return OpenAIModel(parsed.url, parsed.model or None, **options)
    from clew.agents.lm.vllm_backend import VLLMModel

    return VLLMModel(parsed.model, adapter=parsed.adapter, **options)
