"""ReAct: reason, then act, one completion per step (spec_002 §5.2, prompt §8.1).

Built on the Env API only, so it runs on every environment:

* **system**: ``env.instructions(variant)`` followed by ``env.action_help()`` (left out when the
  instructions already contain it). The environment owns the task text, the action grammar and
  the answer format; this module writes no env-specific prompt.
* **user turns**: the observation text at each decision, verbatim as sent.
* **assistant turns**: the raw completions that produced each executed action (§0.5, §8.1).
* **history**: every earlier (observation, completion) pair by default; an env may declare
  ``history_window = q`` (keep the last q pairs), and the ``history_window`` option overrides
  both. An env that manages its own chat memory hands it out as ``obs.info["chat_history"]``
  (chat messages; TextMiniGrid's last q = 5 decision steps, spec_004 §3.5, or an empty list when
  its memory is written into the observation text): that list is then the history, verbatim.
* **in-context examples**: if the env has ``examples()`` returning (user, assistant) pairs, they
  precede the history while fewer than 2 actions were taken (§8.1, ``icl_max_history_actions``).
* **sampling** (§5.2): temperature 0.7, top-p 0.9, at most 384 tokens, one sample; temperature 0
  is greedy. Each decision has its own seed derived from (agent seed, task seed, episode key, step,
  attempt) with CRC32, so episodes replay exactly with seeded backends.

**Parsing** (§8.1 [D], tolerant of the usual mess). In order, the first that parses wins:
(1) the first fenced block after the last occurrence of ``answer_phrase`` ("Next action:"),
(2) ``env.parse_action`` on the whole completion (the env's own format: a JSON object, an
``<actions>`` block, ...), (3) the last fenced block anywhere. An env may declare
``parse_retries = k`` (TextMiniGrid re-asks up to 2 more times, spec_004 §3.4): the same prompt is
sent again with a new seed, and every call's tokens are counted.

An unparsable answer is returned as ``Decision(action=<raw text>)``: the env's ``step`` then applies
its own rule for invalid actions (it never raises), and the episode records it as invalid. Usage
goes to ``episode.usage`` under role ``"policy"``. ``LMError`` (a dead server) propagates to the
runner, which keeps the episodes already finished.

Decision: the context-overflow elision of §8.1 (keep the first 2 and last 6 pairs) is not applied
automatically, since the agent does not know the model's context; ``max_history`` turns it on
(keep the first 2 and the last ``max_history - 2`` pairs).
"""

from __future__ import annotations

import re
import zlib
from typing import Any

from clew.agents.base import BaseAgent, Decision, Episode
from clew.agents.lm.base import ChatRequest, LanguageModel, Message, Sampling
from clew.agents.lm.calls import call
from clew.agents.lm.spec import load_model

FENCE = re.compile(r"```(.*?)```", re.DOTALL)
LANG_TAG = re.compile(r"[\w+.-]*")


def fenced_blocks(text: str) -> list[str]:
    """Contents of triple-backtick blocks.

    A first line that is a lone word (```json, ```python) is a language tag and dropped, unless
    nothing follows it (```right\n``` holds the action ``right``).
    """
    out = []
    for m in FENCE.finditer(text):
        inner = m.group(1)
        first, newline, rest = inner.partition("\n")
        if newline and LANG_TAG.fullmatch(first.strip()) and rest.strip():
            inner = rest
        out.append(inner.strip())
    return out


def answer_block(text: str, answer_phrase: str) -> str | None:
    """The first fenced block after the last occurrence of the answer phrase (§8.1)."""
    if not answer_phrase:
        return None
    i = text.rfind(answer_phrase)
    if i < 0:
        return None
    blocks = fenced_blocks(text[i + len(answer_phrase):])
    return blocks[0] if blocks else None


def _safe_parse(env: Any, text: str) -> str | None:
    try:
        action = env.parse_action(text)
    except Exception:  # noqa: BLE001 - an env parser bug must not end the episode
        return None
    if action is None or action == "":
        return None
    return str(action)


def parse_completion(env: Any, text: str, answer_phrase: str = "Next action:") -> str | None:
    """The env action a completion names, or None (see the module docstring for the order)."""
    block = answer_block(text, answer_phrase)
    if block is not None and (action := _safe_parse(env, block)) is not None:
        return action
    if (action := _safe_parse(env, text)) is not None:
        return action
    blocks = fenced_blocks(text)
    if blocks:
        return _safe_parse(env, blocks[-1])
    return None


def system_prompt(env: Any, variant: str) -> str:
    """Instructions, then the action grammar unless the instructions already hold it."""
    instructions = env.instructions(variant).strip()
    help_text = (env.action_help() or "").strip()
    if help_text and help_text not in instructions:
        return f"{instructions}\n\n{help_text}"
    return instructions


class ReActAgent(BaseAgent):
    """Reason-then-act LM agent; registered as ``react`` in ``clew.eval.agents``."""

    name = "react"
    kind = "lm"

    def __init__(self, model: str | LanguageModel, temperature: float = 0.7, top_p: float = 0.9,
                 max_tokens: int = 384, variant: str = "default", seed: int = 0,
                 history_window: int | None = None, max_history: int | None = None,
                 answer_phrase: str = "Next action:", max_obs_chars: int | None = None,
                 model_options: dict[str, Any] | None = None):
        if history_window is not None and history_window < 0:
            raise ValueError(f"react: history_window must be >= 0, got {history_window}")
        if max_history is not None and max_history < 2:
            raise ValueError(f"react: max_history must be >= 2, got {max_history}")
        self.lm = load_model(model, **(model_options or {}))
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens
        self.variant = variant
        self.seed = seed
        self.history_window = history_window
        self.max_history = max_history
        self.answer_phrase = answer_phrase
        self.max_obs_chars = max_obs_chars

    # --- prompt --------------------------------------------------------------------------
    def _window(self, env: Any) -> int | None:
        if self.history_window is not None:
            return self.history_window
        q = getattr(env, "history_window", None)
        return int(q) if q is not None else None

    def _history(self, env: Any, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        q = self._window(env)
        if q is not None:
            pairs = pairs[len(pairs) - q:] if q else []
        if self.max_history is not None and len(pairs) > self.max_history:
            pairs = pairs[:2] + pairs[len(pairs) - (self.max_history - 2):]
        return pairs

    def _user_text(self, episode: Episode) -> str:
        text = episode.obs.text
        if self.max_obs_chars is not None and len(text) > self.max_obs_chars:
            text = text[: self.max_obs_chars] + "\n[observation truncated]"
        return text

    def messages(self, episode: Episode, user: str) -> list[Message]:
        env = episode.env
        state = episode.scratch.setdefault("react", {"pairs": []})
        msgs: list[Message] = [{"role": "system", "content": system_prompt(env, self.variant)}]
        examples = getattr(env, "examples", None)
        if callable(examples) and episode.t < 2:
            for u, a in examples() or ():
                msgs += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
        env_history = episode.obs.info.get("chat_history")
        if env_history is not None:  # the env keeps its own chat memory
            msgs += [{"role": m["role"], "content": m["content"]} for m in env_history]
        else:
            for u, a in self._history(env, state["pairs"]):
                msgs += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
        msgs.append({"role": "user", "content": user})
        return msgs

    def _seed(self, episode: Episode, attempt: int) -> int:
        key = f"{self.seed}:{episode.task.seed}:{episode.key}:{episode.t}:{attempt}"
        return zlib.crc32(key.encode())

    # --- acting --------------------------------------------------------------------------
    async def act(self, episode: Episode) -> Decision:
        env = episode.env
        user = self._user_text(episode)
        messages = self.messages(episode, user)
        retries = max(0, int(getattr(env, "parse_retries", 0) or 0))
        raw = ""
        action = None
        attempt = 0
        for attempt in range(retries + 1):
            request = ChatRequest(messages, Sampling(
                n=1, temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens,
                seed=self._seed(episode, attempt)), role="policy")
            raw = (await call(self.lm, request, episode))[0].text
            action = parse_completion(env, raw, self.answer_phrase)
            if action is not None:
                break
        episode.scratch["react"]["pairs"].append((user, raw))
        info = {"parsed": action is not None, "attempts": attempt + 1}
        return Decision(action=action if action is not None else raw, raw=raw, info=info)
