"""clew.agents.lm: the LM interface and its backends (vllm, openai, hf, fake)."""

from clew.agents.lm.base import ChatRequest, Completion, LanguageModel, LMError, Sampling
from clew.agents.lm.fake import FakeLM

__all__ = ["ChatRequest", "Completion", "LanguageModel", "LMError", "Sampling", "FakeLM"]
