"""One in-process vLLM engine on the lively tiny model, shared by the modules whose engine
options agree (engine, constrained answers, search): an engine start costs about a minute on a
2-core CPU, most of this folder's time. The modules that need other options (a LoRA adapter, a
merged model, a server, the soak's tokenizer, engine settings) start their own.
"""

from __future__ import annotations

import time

import pytest
from vllm_helpers import ENGINE


@pytest.fixture(scope="session")
def base_engine(lively_model_dir):
    """The lively tiny model on vLLM with ENGINE's options and room for search prompts."""
    from clew.agents.lm.spec import load_model

    start = time.monotonic()
    lm = load_model(f"vllm:{lively_model_dir}", shared=False, **{**ENGINE, "max_model_len": 2048})
    print(f"\n[vllm] engine start {time.monotonic() - start:.1f} s")
    yield lm
    lm.close()
