"""Distilled agents: a fine-tuned model run without search, in the EL or IL turn format.

docs/methods/exploratory-learning.md#distilled-agent (the distilled agent and ``backtrack S<k>``;
user turns formatted exactly as at training; the explorer system prompt; the answer phrase).

The turn format lives here, in one place, and the EL/IL exporter (:mod:`clew.training.flatten`)
renders its training chats with the same functions, so training and inference agree:

* system: :func:`system_prompt` (``el``: explorer prompt with ``backtrack``; ``il``: the plain
  policy rules, no examples, no reflections): role, action grammar, rules;
* first user turn: ``TASK: <env.instructions()>`` then ``[S0] OBSERVATION:`` and
  ``PREVIOUS ACTION: none``;
* later user turns: ``[S<k>] OBSERVATION: ... PREVIOUS ACTION: <env.canonical(action)>``; after a
  backtrack ``[S<k>] You returned to an earlier state.`` and ``PREVIOUS ACTION: backtrack S<k>``;
  after an invalid action ``[S<k>] Your previous action was invalid.`` with the env's explanation.

State ids are those of the runner (``episode.path``, runner/episodes.py): S0 is the initial state and
every valid forward step creates the next id; a backtrack cuts the path back to an earlier id.

Decisions:

* The task text g is ``env.task_description()`` (no reply format of the env's own, which would
  contradict the fenced answer), once, after ``TASK:`` in the first user turn; inside the fence
  the training data writes the canonical action, which every env's ``parse_action`` reads;
  the system prompt holds the role, the action grammar and the rules. Unlike
  the search policy prompt (:mod:`clew.agents.prompts`, which also puts the instructions in the
  system turn) the task is not repeated: env instructions run to hundreds of tokens, and the
  distilled models (small, short contexts) see every prompt in full.
* IL uses the same turns with the plain policy rules instead of the explorer rules, so
  EL and IL models differ only in what they were trained on.
* Answers are read by the shared parser (:func:`clew.agents.parsing.answer_text`, no env: a
  backtrack is not an env action); an answer whose action is ``backtrack S<k>`` / ``backtrack``
  becomes a runner backtrack decision.
* After a valid backtrack the user turn shows ``env.observation()`` of the restored state, not
  the runner's note, so the format does not depend on the runner's wording.
* A bare ``backtrack`` means the state before the current one on the path.
* An answer without a valid action is still sent to the env (whatever the parser found): the
  env rejects it as an invalid step, which is how the runner counts format failures.
* The prompt is the chat cut to its ``window`` (:class:`~clew.agents.window.ChatWindow`: by
  default the system turn, the first 2 and the last 6 (observation, action) pairs), the same
  window ``clew data`` cut the training samples with, so the model sees at inference what it
  was trained on. ``window: {keep_first_pairs: 0, keep_last_pairs: 1}`` sends the current turn
  alone; with ``keep_system: false`` the system turn goes too, the shortest prompt, a few dozen
  tokens on a grid map (docs/methods/loop.md#what-was-tried). When the model's context
  (``context_tokens``, else the backend's ``context_length``) would still overflow, the oldest
  kept pairs after the first exchange go (:mod:`clew.agents.fitting`), counted in
  ``episode.scratch["distilled_context_cuts"]``; a prompt that cannot fit even then fails the
  episode with reason ``context_length``.
* Answers are read with the completion's finish reason (a cut one needs a complete answer) and
  counted as parsed or not under role ``policy``.
* ``constrain=True`` (docs/methods/parsing.md#constrained-answers) sends :func:`answer_choices`
  as ``Sampling.choices``: the env's legal actions and, in the EL format on an env that supports
  backtracking, ``backtrack S<k>`` for every earlier state on the current path; the answer is
  then always one of them. An env without a list of legal actions (the oracle-query tasks take
  free-form queries) is not constrained.

The same model can be a search agent's policy (:class:`DistilledPolicy`, the ``distilled_policy``
option): at each node it sends the chat this agent would have there (:func:`chat_at`) and
turns ``n_samples`` answers into proposals with frequency priors. :func:`completion_text` is the
assistant turn of an executed step the model did not write (shared with the exporter).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from clew.agents.base import BaseAgent, Decision, Episode, StepRecord
from clew.agents.fitting import fit_messages
from clew.agents.lm.base import ChatRequest, LanguageModel, Message, Sampling
from clew.agents.lm.calls import call
from clew.agents.lm.spec import load_model
from clew.agents.options import ACT_SAMPLING, DistilledPolicyOptions
from clew.agents.parsing import ANSWER_PHRASE, answer_text, record
from clew.agents.policy import LMPolicy, Proposal, mix_uniform
from clew.agents.prompts import labelled
from clew.agents.seeds import derive_seed
from clew.agents.window import ChatWindow, legacy_window
from clew.envs.base import Env
from clew.envs.trace import BACKTRACK_RE, parse_backtrack  # noqa: F401  (shared with the metric replays)

if TYPE_CHECKING:
    from clew.agents.prompts import Context
    from clew.agents.usage import UsageByRole

BACKTRACK_TURN = ("This branch is not leading toward the goal, so I will return to an earlier "
                  "state and try a different option.")

Format = Literal["el", "il"]


# --- answers ----------------------------------------------------------------------------------
def answer(action: str, phrase: str = ANSWER_PHRASE) -> str:
    """The answer line for ``action``, as EL data writes it."""
    return f"{phrase} ```{action}```"


def completion_text(raw: str | None, action: str | None) -> str:
    """The assistant turn of an executed action, as EL/IL data writes it: the sampled
    completion when it states its action (answer phrase or a fence), else the answer line
    alone: heuristic policies record the bare action as their "completion", which after an
    assessment line would no longer parse."""
    if raw and raw.strip() and (ANSWER_PHRASE in raw or "```" in raw):
        return raw
    return answer(action if action is not None else (raw or "none").strip())


def answer_choices(env: Env, fmt: Format, path: Sequence[int]) -> list[str] | None:
    """The answers a constrained distilled model may give at the end of ``path`` (state ids):
    the env's legal actions, and for ``el`` with backtracking a ``backtrack S<k>`` per earlier
    state on the path and the bare ``backtrack`` (the state before); ``None`` (no constraint)
    when the env lists no legal actions."""
    legal = [str(a) for a in env.legal_actions()]
    if not legal:
        return None
    if fmt == "el" and env.flags.supports_backtrack and len(path) > 1:
        legal += [f"backtrack S{k}" for k in path[:-1]] + ["backtrack"]
    return legal


# --- prompts and turns ------------------------------------------------------------------------
def system_prompt(env: Env, fmt: Format = "el", backtrack: bool | None = None) -> str:
    """Explorer system prompt for ``el``; the plain policy prompt (its rules, no examples, no
    reflections) for ``il``. The task itself is in the first user turn."""
    grammar = env.action_help()
    if backtrack is None:
        backtrack = fmt == "el" and env.flags.supports_backtrack
    if backtrack:
        grammar += ("\nbacktrack S<k>: return to the earlier state S<k> on your current path "
                    "(the world goes back to how it was there; the step still counts).")
    rules = [("Issue exactly one action per turn, and only actions that are valid in the "
              "current observation.")]
    if fmt == "el":
        rules.append("When unsure, explore to gather information; think about the consequences "
                     "of an action before taking it.")
        if backtrack:
            rules.append("Whenever the current branch looks wrong, backtrack to an earlier state "
                         "and try a different option.")
        rules.append("Start each reply with \"Assessment:\" on how promising the current state "
                     "is, then reason, then give the action.")
    else:
        rules += ["Try to finish the task in as few actions as possible.",
                  ("Think step by step about the task, the observation and the history "
                   "before acting.")]
    rules += [(f"End your reply with the phrase \"{ANSWER_PHRASE}\" followed by the action "
               "inside a triple-backtick fence, and write nothing after it."),
              "When the task is done, issue the completion action if the environment has one."]
    role = ("You are an autonomous agent that explores a text environment and solves tasks by "
            "issuing actions." if fmt == "el" else
            "You are an autonomous agent that solves tasks in a text environment by issuing "
            "actions.")
    return (f"{role}\nEach turn you receive the task (first turn), the id [S<k>] and the "
            "observation of your current state, and your previous action.\n\n"
            f"ACTIONS:\n{grammar}\n\nRULES:\n"
            + "\n".join(f"{i}. {r}" for i, r in enumerate(rules, 1)))


# User turns show the env's neutral observation: the reply instructions some envs write into
# every observation (TextMiniGrid's <actions> block) would contradict the answer rule of the
# system prompt, and cost a small model's context at every turn.
def _obs(env: Env, obs: str) -> str:
    return labelled("OBSERVATION", env.neutral_observation(obs))


def first_user(env: Env, sid: int, obs: str) -> str:
    return f"TASK: {env.task_description()}\n[S{sid}] {_obs(env, obs)}\nPREVIOUS ACTION: none"


def forward_user(env: Env, sid: int, obs: str, prev_action: str) -> str:
    return f"[S{sid}] {_obs(env, obs)}\nPREVIOUS ACTION: {prev_action}"


def returned_user(env: Env, sid: int, obs: str) -> str:
    return (f"[S{sid}] You returned to an earlier state.\n{_obs(env, obs)}\n"
            f"PREVIOUS ACTION: backtrack S{sid}")


def invalid_user(env: Env, sid: int, obs: str, action: str) -> str:
    return (f"[S{sid}] Your previous action was invalid.\n{_obs(env, obs)}\n"
            f"PREVIOUS ACTION: {action or '(none)'}")


# --- the trail: where the agent is and what it left (the window's ``trail``) -------------------
ESTIMATE_RE = re.compile(r"progress estimate: ([0-9]*\.?[0-9]+)")
TRAIL_MOVES = 8


@dataclass
class Trail:
    """The compact history a user turn shows when the window's ``trail`` is on
    (docs/methods/exploratory-learning.md#the-trail): the path of state ids and actions from
    S0 to the current state, and the branches already left from the current state with the best
    progress estimate the agent wrote in them. It is how a one-turn prompt shows why a search
    went back and where it can go: training data and the agent update it alike, from the
    assistant turns' texts and the state ids."""

    path: list[tuple[int, str | None]] = field(default_factory=lambda: [(0, None)])
    left: dict[int, list[tuple[str, float | None]]] = field(default_factory=dict)
    estimate: dict[int, float] = field(default_factory=dict)

    def assess(self, sid: int, text: str) -> None:
        """Remember the progress estimate of an assistant turn written in state ``sid``."""
        found = ESTIMATE_RE.search(text)
        if found:
            self.estimate[sid] = float(found.group(1))

    def forward(self, sid: int, action: str) -> None:
        self.path.append((sid, action))

    def back(self, k: int) -> None:
        """Back to state ``k`` on the path: the branch below it is left, with its best estimate."""
        ids = [s for s, _ in self.path]
        if k not in ids[:-1]:
            return
        cut = self.path[ids.index(k) + 1:]
        best = [self.best_below(s) for s, _ in cut]
        known = [b for b in best if b is not None]
        self.left.setdefault(k, []).append((cut[0][1] or "?", max(known) if known else None))
        del self.path[ids.index(k) + 1:]

    def best_below(self, sid: int) -> float | None:
        known = [v for v in (self.estimate.get(sid), *(b for _, b in self.left.get(sid, [])))
                 if v is not None]
        return max(known) if known else None

    def line(self) -> str:
        moves = self.path[1:]
        shown = [f"S{self.path[0][0]}"]
        if len(moves) > TRAIL_MOVES:
            shown.append("...")
            moves = moves[-TRAIL_MOVES:]
            shown.append(f"S{self.path[-TRAIL_MOVES - 1][0]}")
        shown += [f"-{a}-> S{s}" for s, a in moves]
        text = "PATH: " + " ".join(shown)
        here = self.left.get(self.path[-1][0])
        if here:
            text += "\nLEFT HERE: " + "; ".join(
                a if b is None else f"{a} (best {b:.2f})" for a, b in here)
        return text


def with_trail(turn: str, trail: Trail | None) -> str:
    return turn if trail is None else f"{turn}\n{trail.line()}"


# --- the agent --------------------------------------------------------------------------------
@dataclass
class _Chat:
    messages: list[Message] = field(default_factory=list)
    seen_steps: int = 0
    trail: Trail | None = None


def fit_chat(lm: LanguageModel, messages: list[Message], max_tokens: int,
             window: ChatWindow | None = None,
             context_tokens: int | None = None) -> list[Message]:
    """The chat as sent: cut to ``window`` like the training samples (none: every turn), then
    fitted to the model's context (``context_tokens`` when given) by leaving out the oldest kept
    pairs after the first exchange."""
    msgs = window.apply(messages) if window is not None else messages
    if context_tokens:
        lm = _WithContext(lm, context_tokens)
    return fit_messages(lm, msgs, max_tokens, "policy")


#: an option not given (``None`` is a value of ``max_history_pairs``)
OLD: Any = object()


def distilled_window(window: ChatWindow | dict[str, Any] | None, legacy: dict[str, Any],
                     who: str) -> ChatWindow:
    """The agent's window from its ``window`` option, or from the options it had before
    (``max_history_pairs``, ``keep_first_pairs``, ``keep_system``: read with a warning)."""
    if legacy:
        window = legacy_window({**legacy, **({"window": window} if window else {})},
                               who)["window"]
    return window if isinstance(window, ChatWindow) else ChatWindow.model_validate(window or {})


def user_turn_for_step(env: Env, step: StepRecord, sid: int) -> str:
    """The user turn that follows an executed step (what the runner did, in the EL format)."""
    if not step.valid:
        return invalid_user(env, sid, step.obs, step.action)
    if "backtrack" in step.info:
        return returned_user(env, sid, env.observation().text)
    return forward_user(env, sid, step.obs, env.canonical(step.action))


class DistilledAgent(BaseAgent):
    """Runs a (fine-tuned) chat model with the EL (or IL) turn format; no search.

    ``model`` is a spec string (``hf:BASE+lora:ADAPTER``, ``vllm:BASE+lora:ADAPTER``, a merged
    ``hf:PATH`` ...) or a :class:`LanguageModel`. Sampling defaults are the ReAct ones
    (:data:`~clew.agents.options.ACT_SAMPLING`); ``greedy=True`` decodes greedily;
    ``constrain=True`` constrains the answer to :func:`answer_choices`.
    """

    name = "distilled"
    kind = "learned"

    def __init__(self, model: str | LanguageModel, format: Format = "el",
                 temperature: float = ACT_SAMPLING.temperature, top_p: float = ACT_SAMPLING.top_p,
                 max_tokens: int = ACT_SAMPLING.max_tokens,
                 greedy: bool = False, seed: int | None = 0,
                 window: ChatWindow | dict[str, Any] | None = None,
                 context_tokens: int | None = None, label: str | None = None,
                 constrain: bool = False, model_options: dict[str, Any] | None = None,
                 max_history_pairs: Any = OLD, keep_first_pairs: Any = OLD,
                 keep_system: Any = OLD):
        if not isinstance(constrain, bool):  # an option value: reported like the others
            raise ValueError(  # noqa: TRY004
                f"distilled agent: constrain must be true or false, got {constrain!r}")
        # the last three are the window's options before it had one (read with a warning)
        legacy = {k: v for k, v in (("max_history_pairs", max_history_pairs),
                                    ("keep_first_pairs", keep_first_pairs),
                                    ("keep_system", keep_system)) if v is not OLD}
        self.window = distilled_window(window, legacy, "distilled agent")
        if format not in ("el", "il"):
            raise ValueError(f"distilled agent: format must be 'el' or 'il', got {format!r}")
        self.model = model
        self.model_options = dict(model_options or {})
        self.format: Format = format
        #: the runner keeps state snapshots only for agents that may backtrack
        self.backtracks = format == "el"
        self.sampling = {"temperature": 0.0 if greedy else temperature, "top_p": top_p,
                         "max_tokens": max_tokens}
        self.seed = seed
        self.context_tokens = context_tokens
        self.constrain = constrain
        self._lm: LanguageModel | None = model if isinstance(model, LanguageModel) else None
        if label:
            self.name = label

    @property
    def lm(self) -> LanguageModel:
        if self._lm is None:
            self._lm = load_model(self.model, **self.model_options)
        return self._lm

    def _chat(self, episode: Episode) -> _Chat:
        chat = episode.scratch.get("distilled_chat")
        env = episode.env
        if chat is None:
            trail = Trail() if self.window.trail else None
            chat = episode.scratch["distilled_chat"] = _Chat([
                {"role": "system", "content": system_prompt(env, self.format)},
                {"role": "user", "content": with_trail(
                    first_user(env, episode.path[-1], episode.observations[0].text), trail)},
            ], trail=trail)
        for step in episode.steps[chat.seen_steps:]:
            # the runner calls act() after every step, so only the last one is new
            if chat.trail is not None and step.valid:
                if "backtrack" in step.info:
                    chat.trail.back(episode.path[-1])
                else:
                    chat.trail.forward(episode.path[-1], env.canonical(step.action))
            chat.messages.append({"role": "user", "content": with_trail(
                user_turn_for_step(env, step, episode.path[-1]), chat.trail)})
        chat.seen_steps = len(episode.steps)
        return chat

    def _fit(self, messages: list[Message], episode: Episode) -> list[Message]:
        """The chat cut to the window; shorter still when the model's context would overflow."""
        msgs = self.window.apply(messages)
        # cut once, above: fit_chat only fits it to the context (no window)
        fitted = fit_chat(self.lm, msgs, self.sampling["max_tokens"], None, self.context_tokens)
        if len(fitted) < len(msgs):
            episode.scratch["distilled_context_cuts"] = (
                episode.scratch.get("distilled_context_cuts", 0) + 1)
        return fitted

    async def act(self, episode: Episode) -> Decision:
        chat = self._chat(episode)
        seed = derive_seed(self.seed, episode.key, episode.t)
        choices = (answer_choices(episode.env, self.format, episode.path) if self.constrain
                   else None)
        request = ChatRequest(self._fit(chat.messages, episode),
                              Sampling(n=1, seed=seed, choices=choices, **self.sampling),
                              role="policy")
        completion = (await call(self.lm, request, episode.usage))[0]
        chat.messages.append({"role": "assistant", "content": completion.text})
        if chat.trail is not None:
            chat.trail.assess(episode.path[-1], completion.text)
        decision = decide(completion.text, episode.path, completion.finish_reason)
        # read = a backtrack, or an action the env can parse (the env's step decides validity)
        read = "backtrack" in decision.info or (
            "parse_error" not in decision.info
            and episode.env.parse_action(decision.action) is not None)
        record(episode.usage, "policy", self.lm.spec, [(read, completion.text)])
        return decision


class _WithContext:
    """A model seen with a smaller context (the ``context_tokens`` option)."""

    def __init__(self, lm: LanguageModel, context_length: int):
        self.lm, self.context_length, self.spec = lm, context_length, lm.spec

    def count_tokens(self, messages: list[Message]) -> int:
        return self.lm.count_tokens(messages)


def decide(text: str, path: list[int], finish_reason: str | None = None) -> Decision:
    """The runner decision for a completion, given the current path of state ids."""
    action = answer_text(text, finish_reason=finish_reason)
    is_back, target = parse_backtrack(action)
    if is_back:
        if target is None and len(path) > 1:
            target = path[-2]
        return Decision(f"backtrack S{target}" if target is not None else "backtrack",
                        raw=text, info={"backtrack": target})
    if action is None:
        return Decision("", raw=text, info={"parse_error": "no fenced action in the answer"})
    return Decision(action, raw=text)


# --- the distilled model as a search policy -----------------------------------------------------
def chat_at(ctx: Context, fmt: Format = "el", trail: bool = False) -> list[Message]:
    """The chat the distilled agent would have at the state of ``ctx`` (a search node): the
    system prompt and the first user turn, then per action from the episode's start (executed
    steps, then the simulated path in the tree) the assistant turn and the user turn after it.

    The assistant turn is :func:`completion_text` of the action's raw completion: the model's
    own text where it wrote the step, the answer line where a step was not a model's answer
    (as the EL/IL data writes executed steps). State ids count the accepted actions (a search
    agent never backtracks), so they are the runner's; an action the env rejected gets the
    invalid turn (``ctx.valid``). The chat ends with the user turn of the node's state. With
    ``trail`` each user turn ends with the :class:`Trail` line (a search's path never goes
    back, so it is the path alone)."""
    env = ctx.env
    messages: list[Message] = [
        {"role": "system", "content": system_prompt(env, fmt)},
        {"role": "user", "content": first_user(env, 0, ctx.observations[0])},
    ]
    path = Trail() if trail else None
    if path is not None:
        messages[-1]["content"] = with_trail(messages[-1]["content"], path)
    sid = 0
    for i, action in enumerate(ctx.actions):
        raw = ctx.raws[i] if i < len(ctx.raws) else None
        text = completion_text(raw, action)
        messages.append({"role": "assistant", "content": text})
        obs = ctx.observations[i + 1]
        if path is not None:
            path.assess(sid, text)
        if ctx.accepted(i):
            sid += 1
            turn = forward_user(env, sid, obs, action)
            if path is not None:
                path.forward(sid, env.canonical(action))
        else:
            turn = invalid_user(env, sid, obs, action)
        messages.append({"role": "user", "content": with_trail(turn, path)})
    return messages


class ModelFromOptions:
    """A role whose model is its options' ``model`` (a spec string, loaded with
    ``model_options`` on first use, or a :class:`LanguageModel`)."""

    options: Any
    _lm: LanguageModel | None = None

    @property
    def lm(self) -> LanguageModel:
        if self._lm is None:
            model = self.options.model
            self._lm = (model if isinstance(model, LanguageModel)
                        else load_model(model, **self.options.model_options))
        return self._lm


class DistilledPolicy(ModelFromOptions, LMPolicy):
    """A search policy from a model fine-tuned by ``clew train``
    (docs/methods/exploratory-learning.md#as-a-search-policy).

    At a node it sends the chat the distilled agent would have there (:func:`chat_at`, fitted
    like the agent's: :func:`fit_chat`) as one request with ``n_samples`` samples, reads each
    completion as the agent does (:func:`decide`, then the env's ``parse_action``) and merges
    them into ranked proposals with priors from the sample frequencies, top-b kept
    (:func:`~clew.agents.policy.merge_samples`, as :class:`~clew.agents.policy.LMPolicy`).

    * A ``backtrack S<k>`` answer is not an action of the tree (the search does its own going
      back): it counts as a completion the policy could not read, like one without an action.
    * Every completion is counted as read or not under role ``policy`` (``usage.parses``).
    * Reflections are not shown: the model was not trained with them.
    * ``kind`` is ``learned``: a search agent with this policy reports as ``learned+search``.
    * ``constrain`` (option): the env's legal actions go as ``Sampling.choices`` (no backtracks:
      the tree does its own going back); an env without a list is not constrained.

    Requests, reading and merging are :class:`~clew.agents.policy.LMPolicy`'s; only the model,
    the chat and the reading of one completion differ.
    """

    kind = "learned"
    uses_oracle = False

    def __init__(self, options: DistilledPolicyOptions, branching_factor: int):
        self.options = options
        self.b = branching_factor
        self.n = options.n_samples
        self.format: Format = options.format
        self.sampling = {"temperature": options.temperature, "top_p": options.top_p,
                         "max_tokens": options.max_tokens}

    def messages(self, ctx: Context, reflections: Sequence[dict] = ()) -> list[Message]:
        """The request's chat: :func:`chat_at`, elided and fitted to the context (reflections
        are not shown: the model was not trained with them)."""
        return fit_chat(self.lm, chat_at(ctx, self.format, self.options.window.trail),
                        self.sampling["max_tokens"],
                        self.options.window, self.options.context_tokens)

    async def propose(self, ctx: Context, reflections: Sequence[dict] = (),
                      usage: UsageByRole | None = None, n: int | None = None) -> list[Proposal]:
        """The LM policy's proposals, then ``uniform_mix`` of the prior over the legal actions
        (:func:`~clew.agents.policy.mix_uniform`)."""
        props = await super().propose(ctx, reflections, usage, n)
        if not self.options.uniform_mix:      # off by default: no legal list to build
            return props
        legal = [str(a) for a in ctx.env.legal_actions()]
        return mix_uniform(props, legal, self.options.uniform_mix, self.b, ctx.env)

    def parse(self, ctx: Context, text: str, finish_reason: str | None = None) -> Proposal:
        """One completion as a proposal; ``action`` None when it names no env action (a
        backtrack included)."""
        env = ctx.env
        decision = decide(text, [0], finish_reason)
        if "backtrack" in decision.info or "parse_error" in decision.info:
            return Proposal(None, "", text, 1)
        action = env.parse_action(decision.action)
        if not action:
            return Proposal(None, "", text, 1)
        action = str(action)
        return Proposal(action, env.canonical(action), text, 1, 0.0, bool(env.is_stop(action)))
