"""Distilled agents: a fine-tuned model run without search, in the EL or IL turn format.

spec_002 §6.10 (the distilled agent and ``backtrack S<k>``), §6.8 (user turns, formatted exactly
as at inference), §8.7 (explorer system prompt), §8.1 (answer phrase and action parsing).

The turn format lives here, in one place, and the EL/IL exporter (:mod:`clew.training.flatten`)
renders its training chats with the same functions, so training and inference agree:

* system: :func:`system_prompt` (``el``: explorer prompt with ``backtrack``; ``il``: the plain
  policy prompt, no examples, no reflections);
* first user turn: ``TASK: <env.instructions()>`` then ``[S0] OBSERVATION:`` and
  ``PREVIOUS ACTION: none``;
* later user turns: ``[S<k>] OBSERVATION: ... PREVIOUS ACTION: <env.canonical(action)>``; after a
  backtrack ``[S<k>] You returned to an earlier state.`` and ``PREVIOUS ACTION: backtrack S<k>``;
  after an invalid action ``[S<k>] Your previous action was invalid.`` with the env's explanation.

State ids are those of the runner (``episode.path``, eval/runner.py): S0 is the initial state and
every valid forward step creates the next id; a backtrack cuts the path back to an earlier id.

Decisions:

* The task text is ``env.instructions()`` in the first user turn; the system prompt holds only
  what is common to the env family (role, action grammar, rules), so it is one shared prefix.
* After a valid backtrack the user turn shows ``env.observation()`` of the restored state, not
  the runner's note, so the format does not depend on the runner's wording.
* A bare ``backtrack`` means the state before the current one on the path (§6.10).
* An answer without a parsable action is still sent to the env (the fenced text, or ``""``): the
  env rejects it as an invalid step, which is how the runner counts format failures.
* History longer than ``max_history_pairs`` (observation, action) pairs keeps the first 2 and the
  last ``max_history_pairs - 2`` pairs: the same elision as the EL samples (§6.8, §8.1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from clew.agents.base import BaseAgent, Decision, Episode, StepRecord
from clew.agents.lm.base import ChatRequest, LanguageModel, Message, Sampling
from clew.envs.base import Env

ANSWER_PHRASE = "Next action:"
BACKTRACK_RE = re.compile(r"^\s*backtrack(?:\s+S?(\d+))?\s*$", re.IGNORECASE)
_FENCE_RE = re.compile(r"```[^\n`]*?\n?(.*?)```", re.DOTALL)

BACKTRACK_TURN = ("This branch is not leading toward the goal, so I will return to an earlier "
                  "state and try a different option.")

Format = Literal["el", "il"]


# --- answers ----------------------------------------------------------------------------------
def extract_action(text: str, phrase: str = ANSWER_PHRASE) -> str | None:
    """The action of a completion (spec_002 §8.1, D30): the first fenced block after the last
    answer phrase; without the phrase, the last fenced block; ``None`` when there is none."""
    at = text.rfind(phrase)
    if at >= 0:
        m = _FENCE_RE.search(text, at + len(phrase))
        if m:
            return m.group(1).strip()
    blocks = _FENCE_RE.findall(text)
    return blocks[-1].strip() if blocks else None


def parse_backtrack(action: str | None) -> tuple[bool, int | None]:
    """``(is_backtrack, target)``: ``backtrack S3`` -> (True, 3); bare ``backtrack`` -> (True,
    None); anything else -> (False, None)."""
    if action is None:
        return False, None
    m = BACKTRACK_RE.match(action)
    if not m:
        return False, None
    return True, (int(m.group(1)) if m.group(1) is not None else None)


def answer(action: str, phrase: str = ANSWER_PHRASE) -> str:
    """The fixed answer line for ``action``."""
    return f"{phrase} ```{action}```"


# --- prompts and turns ------------------------------------------------------------------------
def system_prompt(env: Env, fmt: Format = "el", backtrack: bool | None = None) -> str:
    """Explorer system prompt (§8.7) for ``el``; the plain policy prompt (§8.1) for ``il``."""
    if backtrack is None:
        backtrack = fmt == "el" and env.flags.supports_backtrack
    lines = [
        "You are an autonomous agent that solves tasks in a text environment by issuing actions.",
        "Each turn you receive the task (first turn only), the id [S<k>] and observation of your "
        "current state, and your previous action.",
        "",
        env.action_help(),
    ]
    if backtrack:
        lines += [
            "You may also return to an earlier state on your current path with "
            "`backtrack S<k>`, where S<k> is the id shown with that state.",
        ]
    lines += ["", "Rules:", "- Issue exactly one action per turn, valid in the current state."]
    if fmt == "el":
        lines += [
            "- When unsure, explore to gather information; think about the consequences of an "
            "action before taking it.",
        ]
        if backtrack:
            lines.append("- Whenever the current branch looks wrong, backtrack to an earlier "
                         "state and try something else.")
        lines.append("- Start each turn with 'Assessment:' about the current state, then reason, "
                     "then give the action.")
    else:
        lines.append("- Reason step by step about the task and the history before acting; "
                     "try to finish in few actions.")
    lines.append(f"- End with '{ANSWER_PHRASE}' followed by the action in triple backticks, "
                 f"e.g. {answer('ACTION')}; write nothing after it.")
    return "\n".join(lines)


def first_user(env: Env, sid: int, obs: str) -> str:
    return f"TASK: {env.instructions()}\n[S{sid}] OBSERVATION:\n{obs}\nPREVIOUS ACTION: none"


def forward_user(sid: int, obs: str, prev_action: str) -> str:
    return f"[S{sid}] OBSERVATION:\n{obs}\nPREVIOUS ACTION: {prev_action}"


def returned_user(sid: int, obs: str) -> str:
    return (f"[S{sid}] You returned to an earlier state.\nOBSERVATION:\n{obs}\n"
            f"PREVIOUS ACTION: backtrack S{sid}")


def invalid_user(sid: int, obs: str, action: str) -> str:
    return (f"[S{sid}] Your previous action was invalid.\nOBSERVATION:\n{obs}\n"
            f"PREVIOUS ACTION: {action or '(none)'}")


def elide(messages: list[Message], max_pairs: int | None, keep_first: int = 2) -> list[Message]:
    """Keep the system turn, the first ``keep_first`` and the last ``max_pairs - keep_first``
    (user, assistant) pairs, plus a trailing user turn (§6.8 elision; no marker at the cut)."""
    if max_pairs is None:
        return list(messages)
    head = [m for m in messages[:1] if m["role"] == "system"]
    body = messages[len(head):]
    pairs = [body[i:i + 2] for i in range(0, len(body) - 1, 2)]
    tail = body[len(pairs) * 2:]
    if len(pairs) <= max_pairs:
        return list(messages)
    keep_last = max_pairs - keep_first
    kept = pairs[:keep_first] + (pairs[-keep_last:] if keep_last > 0 else [])
    return head + [m for p in kept for m in p] + tail


# --- the agent --------------------------------------------------------------------------------
@dataclass
class _Chat:
    messages: list[Message] = field(default_factory=list)
    seen_steps: int = 0


def user_turn_for_step(env: Env, step: StepRecord, sid: int) -> str:
    """The user turn that follows an executed step (what the runner did, in the EL format)."""
    if not step.valid:
        return invalid_user(sid, step.obs, step.action)
    if "backtrack" in step.info:
        return returned_user(sid, env.observation().text)
    return forward_user(sid, step.obs, env.canonical(step.action))


class DistilledAgent(BaseAgent):
    """Runs a (fine-tuned) chat model with the EL (or IL) turn format; no search (§6.10).

    ``model`` is a spec string (``hf:BASE+lora:ADAPTER``, ``vllm:BASE+lora:ADAPTER``, a merged
    ``hf:PATH`` ...) or a :class:`LanguageModel`. Sampling defaults are the ReAct ones of §6.10
    (temperature 0.7, top-p 0.9); ``greedy=True`` decodes greedily.
    """

    name = "distilled"
    kind = "learned"

    def __init__(self, model: str | LanguageModel, format: Format = "el",
                 temperature: float = 0.7, top_p: float = 0.9, max_tokens: int = 384,
                 greedy: bool = False, seed: int | None = 0, max_history_pairs: int | None = 8,
                 label: str | None = None, model_options: dict[str, Any] | None = None):
        if format not in ("el", "il"):
            raise ValueError(f"distilled agent: format must be 'el' or 'il', got {format!r}")
        self.model = model
        self.model_options = dict(model_options or {})
        self.format: Format = format
        #: the runner keeps state snapshots only for agents that may backtrack
        self.backtracks = format == "el"
        self.sampling = dict(temperature=0.0 if greedy else temperature, top_p=top_p,
                             max_tokens=max_tokens)
        self.seed = seed
        self.max_history_pairs = max_history_pairs
        self._lm: LanguageModel | None = model if isinstance(model, LanguageModel) else None
        if label:
            self.name = label

    @property
    def lm(self) -> LanguageModel:
        if self._lm is None:
            from clew.agents.lm.spec import load_model

            self._lm = load_model(self.model, **self.model_options)
        return self._lm

    def _chat(self, episode: Episode) -> _Chat:
        chat = episode.scratch.get("distilled_chat")
        env = episode.env
        if chat is None:
            chat = episode.scratch["distilled_chat"] = _Chat([
                {"role": "system", "content": system_prompt(env, self.format)},
                {"role": "user", "content": first_user(env, episode.path[-1],
                                                       episode.observations[0].text)},
            ])
        for step in episode.steps[chat.seen_steps:]:
            # the runner calls act() after every step, so only the last one is new
            chat.messages.append({"role": "user",
                                  "content": user_turn_for_step(env, step, episode.path[-1])})
        chat.seen_steps = len(episode.steps)
        return chat

    async def act(self, episode: Episode) -> Decision:
        chat = self._chat(episode)
        seed = None if self.seed is None else self.seed * 100_003 + episode.t
        request = ChatRequest(elide(chat.messages, self.max_history_pairs),
                              Sampling(n=1, seed=seed, **self.sampling), role="policy")
        completion = (await self.lm.generate([request]))[0][0]
        episode.usage.record("policy", completion.usage)
        chat.messages.append({"role": "assistant", "content": completion.text})
        return decide(completion.text, episode.path)


def decide(text: str, path: list[int]) -> Decision:
    """The runner decision for a completion, given the current path of state ids."""
    action = extract_action(text)
    is_back, target = parse_backtrack(action)
    if is_back:
        if target is None and len(path) > 1:
            target = path[-2]
        return Decision(f"backtrack S{target}" if target is not None else "backtrack",
                        raw=text, info={"backtrack": target})
    if action is None:
        return Decision("", raw=text, info={"parse_error": "no fenced action in the answer"})
    return Decision(action, raw=text)


def make_distilled(model: str, format: Format = "el", temperature: float = 0.7,
                   top_p: float = 0.9, max_tokens: int = 384, greedy: bool = False,
                   seed: int | None = 0, max_history_pairs: int | None = 8,
                   label: str | None = None,
                   model_options: dict[str, Any] | None = None) -> DistilledAgent:
    """Factory registered as ``distilled`` in :mod:`clew.eval.agents`."""
    return DistilledAgent(model, format=format, temperature=temperature, top_p=top_p,
                          max_tokens=max_tokens, greedy=greedy, seed=seed,
                          max_history_pairs=max_history_pairs, label=label,
                          model_options=model_options)
