"""ReAct: reason, then act, one completion per step (docs/methods/baselines.md).

Built on the Env API only, so it runs on every environment:

* **system**: ``env.instructions(variant)`` followed by ``env.action_help()`` (left out when the
  instructions already contain it). The environment owns the task text, the action grammar and
  the answer format; this module writes no env-specific prompt.
* **user turns**: the observation text at each decision, verbatim as sent.
* **assistant turns**: the raw completions that produced each executed action.
* **history**: every earlier (observation, completion) pair by default; an env may declare
  ``history_window = q`` (keep the last q pairs), and the ``history_window`` option overrides
  both. An env that manages its own chat memory hands it out as ``obs.info["chat_history"]``
  (chat messages; TextMiniGrid's last q = 5 decision steps, docs/methods/envs.md#textminigrid,
  or an empty list when
  its memory is written into the observation text): that list is then the history, verbatim.
* **in-context examples**: the env's ``prompt_examples()`` (user, assistant) pairs precede the
  history while fewer than 2 actions were taken.
* **sampling**: :data:`~clew.agents.options.ACT_SAMPLING` (temperature 0.7, top-p 0.9, at most
  384 tokens), one sample; temperature 0 is greedy. Each decision has its own seed
  (:func:`~clew.agents.seeds.derive_seed` of the agent seed, task seed, episode key, step and
  attempt), so episodes replay exactly with seeded backends.

**Constrained answers** (``constrain=True``, docs/methods/parsing.md#constrained-answers): each
request carries the env's ``legal_actions()`` as ``Sampling.choices``, so the completion ends
with ``Next action:`` and one legal action in the fence; an env without a list of legal actions
(the oracle-query tasks take free-form queries) is not constrained.

**Parsing**: :func:`clew.agents.parsing.parse_action`, the rule every role shares (with the
completion's finish reason: a cut one counts only with a complete answer in it); every
completion is counted as parsed or not under role ``policy``. An env may declare
``parse_retries = k``: the same prompt is sent again with a new seed, and every call's tokens
are counted.

An unparsable answer is returned as ``Decision(action=<raw text>)``: the env's ``step`` then applies
its own rule for invalid actions (it never raises), and the episode records it as invalid. Usage
goes to ``episode.usage`` under role ``"policy"``. ``LMError`` (a dead server) propagates to the
runner, which keeps the episodes already finished.

Context: the prompt is fitted to the model's context (:func:`clew.agents.fitting.fit_messages`:
the oldest turns after the first exchange go first, with a note where they were). ``max_history``
caps the history regardless of the context (keep the first 2 and the last ``max_history - 2``
pairs).
"""

from __future__ import annotations

from typing import Any

from clew.agents.base import BaseAgent, Decision, Episode
from clew.agents.fitting import fit_messages
from clew.agents.lm.base import ChatRequest, LanguageModel, Message, Sampling
from clew.agents.lm.calls import call
from clew.agents.lm.spec import load_model
from clew.agents.options import ACT_SAMPLING
from clew.agents.parsing import ANSWER_PHRASE, parse_action, record
from clew.agents.seeds import derive_seed


def system_prompt(env: Any, variant: str) -> str:
    """Instructions, then the action grammar unless the instructions already hold it."""
    instructions = env.instructions(variant).strip()
    help_text = (env.action_help() or "").strip()
    if help_text and help_text not in instructions:
        return f"{instructions}\n\n{help_text}"
    return instructions


class ReActAgent(BaseAgent):
    """Reason-then-act LM agent; registered as ``react`` in ``clew.runner.registry``."""

    name = "react"
    kind = "lm"

    def __init__(self, model: str | LanguageModel, temperature: float = ACT_SAMPLING.temperature,
                 top_p: float = ACT_SAMPLING.top_p, max_tokens: int = ACT_SAMPLING.max_tokens,
                 variant: str = "default", seed: int = 0,
                 history_window: int | None = None, max_history: int | None = None,
                 answer_phrase: str = ANSWER_PHRASE, max_obs_chars: int | None = None,
                 constrain: bool = False, model_options: dict[str, Any] | None = None):
        if history_window is not None and history_window < 0:
            raise ValueError(f"react: history_window must be >= 0, got {history_window}")
        if max_history is not None and max_history < 2:
            raise ValueError(f"react: max_history must be >= 2, got {max_history}")
        if not isinstance(constrain, bool):  # an option value: reported like the others
            raise ValueError(  # noqa: TRY004
                f"react: constrain must be true or false, got {constrain!r}")
        self.lm = load_model(model, **(model_options or {}))
        self.sampling = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}
        self.variant, self.seed, self.answer_phrase = variant, seed, answer_phrase
        self.history_window, self.max_history = history_window, max_history
        self.max_obs_chars = max_obs_chars
        self.constrain = constrain

    # --- prompt --------------------------------------------------------------------------
    def _window(self, env: Any) -> int | None:
        return self.history_window if self.history_window is not None else env.history_window

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
        if episode.t < 2:
            for u, a in env.prompt_examples():
                msgs += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
        env_history = episode.obs.info.get("chat_history")
        if env_history is not None:  # the env keeps its own chat memory
            msgs += [{"role": m["role"], "content": m["content"]} for m in env_history]
        else:
            for u, a in self._history(env, state["pairs"]):
                msgs += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
        msgs.append({"role": "user", "content": user})
        return msgs

    def _seed(self, episode: Episode, attempt: int) -> int | None:
        return derive_seed(self.seed, episode.task.seed, episode.key, episode.t, attempt)

    # --- acting --------------------------------------------------------------------------
    async def act(self, episode: Episode) -> Decision:
        env = episode.env
        user = self._user_text(episode)
        messages = self.messages(episode, user)
        retries = max(0, env.parse_retries)
        raw = ""
        action = None
        attempt = 0
        messages = fit_messages(self.lm, messages, self.sampling["max_tokens"], "policy")
        choices = (env.legal_actions() or None) if self.constrain else None
        for attempt in range(retries + 1):
            request = ChatRequest(messages, Sampling(n=1, seed=self._seed(episode, attempt),
                                                     choices=choices,
                                                     answer_phrase=self.answer_phrase,
                                                     **self.sampling), role="policy")
            completion = (await call(self.lm, request, episode.usage))[0]
            raw = completion.text
            action = parse_action(env, raw, self.answer_phrase, completion.finish_reason)
            record(episode.usage, "policy", self.lm.spec, [(action is not None, raw)])
            if action is not None:
                break
        episode.scratch["react"]["pairs"].append((user, raw))
        info = {"parsed": action is not None, "attempts": attempt + 1}
        return Decision(action=action if action is not None else raw, raw=raw, info=info)
