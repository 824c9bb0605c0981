"""clew.agents.lm: the LM interface and its backends (vllm, openai, hf, fake).

``load_model("hf:PATH")`` builds a backend from a model spec string (docs/architecture.md#contracts); the vllm backend
is imported only when a ``vllm:`` spec is loaded.
"""

from clew.agents.lm.base import ChatRequest, Completion, LanguageModel, LMError, Sampling
from clew.agents.lm.fake import FakeLM
from clew.agents.lm.spec import load_model

__all__ = [
           "ChatRequest",
           "Completion",
           "FakeLM",
           "LMError",
           "LanguageModel",
           "Sampling",
           "load_model",
]
