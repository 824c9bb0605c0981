"""Role prompts of the search agents (docs/methods/rmcts.md#policy-prompt), in one place, plus
the context they render.

Every prompt puts the shared prefix first — the role system text with the env's task
description and action grammar, then the trajectory — so vLLM's prefix cache hits across the
samples of a node, the nodes of a tree and the roles of a step (docs/architecture.md).
Variable material (reflections, the grading instruction, arguments) goes at the end.

What the env contributes is role-neutral (docs/methods/parsing.md#prompts): its task
description (``Env.task_description``, no reply format), its action grammar (``action_help``),
the notation of one action (``answer_format``, which the policy asks for inside its own fence)
and its observations as ``Env.neutral_observation`` shows them (without the env's own reply
instructions). No prompt of clew's roles carries an env's "reply with X only". Value, judge,
debate and rubric prompts show the trajectory as a transcript inside one user turn; the policy
replays it as chat turns, its own earlier completions as assistant turns. Per-step facts come
from the observations, never from text computed once per episode. Observation texts that carry
their own ``OBSERVATION:`` label are not labelled twice.

Every builder of a prompt with a history takes ``keep`` (recent steps shown in full; ``None``:
all); :mod:`clew.agents.fitting` picks the largest that fits the model's context.

Wording is ours: content and structure follow the methods, the words do not.
``PROMPTS_VERSION`` is logged with every tree and run.

Decisions:

* Task text g = ``env.task_description()`` (clew envs state the goal there and in the
  observation).
  The success criteria shown to value roles come from ``env.instructions("criteria")`` when the
  env answers it with a different text, else a generic paragraph covering clew's task kinds.
* ``task_key`` is a short form of the task (the first sentences of the instructions, at most
  40 words). Memory keys are not built here: they come from the env's compact view of the state
  (:func:`clew.agents.memory.memory_key`).
* In-context examples come from an optional ``env.prompt_examples()`` ([(user, assistant)]), shown
  while the trajectory has fewer than 2 actions; envs without it get none.
* Answers are read by :mod:`clew.agents.parsing` (one module for every role).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from clew.agents.fitting import elide_pairs, gap_note
from clew.agents.parsing import ANSWER_PHRASE, RUBRIC_END, RUBRIC_START, STATUS_PHRASE

PROMPTS_VERSION = "clew-prompts-3"
_OWN_LABEL = re.compile(r"^\s*OBSERVATION\s*:\s*", re.IGNORECASE)
REFLECTION_MAX_WORDS = 128   # a reflection's cap in prompts (about 128 tokens)

Message = dict[str, str]


# --- what a role sees --------------------------------------------------------------------------
@dataclass
class Context:
    """The trajectory from episode start to a node, as roles see it.

    ``observations`` = o_0 … o_k; ``actions`` / ``raws`` = a_0 … a_{k-1} (canonical text, and the
    raw completions that produced them, None where unknown); ``final_action`` = a STOP action that
    ends the trajectory without a following observation (a STOP node). ``env`` is the simulator at
    this state (heuristic roles; LM roles only parse their answers with it and, constrained, ask
    it for the legal actions). ``valid`` says per action whether
    the env accepted it (empty: all accepted): the distilled policy's chat shows a rejected one
    as an invalid turn, as the distilled agent sees it.
    """

    task: str
    observations: list[str]
    actions: list[str] = field(default_factory=list)
    raws: list[str | None] = field(default_factory=list)
    final_action: str | None = None
    final_raw: str | None = None
    action_help: str = ""
    criteria: str = ""
    examples: list[tuple[str, str]] = field(default_factory=list)
    task_id: str = ""
    task_key: str = ""
    env: Any = None
    seed: int | None = None
    answer_format: str = ""
    #: how roles show an observation text (the env's ``neutral_observation``); None: as is
    view: Callable[[str], str] | None = None
    valid: list[bool] = field(default_factory=list)

    @property
    def obs(self) -> str:
        return self.observations[-1]

    def shown(self, i: int) -> str:
        """Observation ``i`` as prompts show it."""
        text = self.observations[i]
        return self.view(text) if self.view is not None else text

    def at(self, observations: list[str], actions: list[str], raws: list[str | None],
           final_action: str | None = None, final_raw: str | None = None,
           env: Any = None, seed: int | None = None,
           valid: list[bool] | None = None) -> Context:
        """This task context with a trajectory (see :func:`task_context`)."""
        return replace(self, observations=observations, actions=actions, raws=raws,
                       final_action=final_action, final_raw=final_raw, env=env, seed=seed,
                       valid=list(valid or []))

    def accepted(self, i: int) -> bool:
        """Whether the env accepted action ``i`` (unknown counts as accepted)."""
        return self.valid[i] if i < len(self.valid) else True


def task_context(env: Any, task_id: str) -> Context:
    """The task part of every role's context, from the env: task description, grammar, answer
    notation, observation view, success criteria (when the env answers
    ``instructions("criteria")`` with a text of its own) and in-context examples; the trajectory
    is added per node with :meth:`Context.at`."""
    task = env.task_description()
    try:
        criteria = env.instructions("criteria")
    except Exception:  # noqa: BLE001 - an env may reject a variant it does not know, any way
        criteria = ""
    if criteria in (task, env.instructions()):
        criteria = ""
    return Context(task=task, observations=[], task_key=short_task(task),
                   action_help=env.action_help(), criteria=criteria,
                   examples=list(env.prompt_examples()), task_id=task_id,
                   answer_format=env.answer_format(), view=env.neutral_observation)


# --- shared pieces -----------------------------------------------------------------------------
GENERIC_CRITERIA = (
    "Task kinds: goal-reaching tasks succeed when the required state has been reached (for "
    "example the goal node of the task graph is activated or the target object is delivered); "
    "answer tasks succeed when the completion action carries the correct answer; budgeted "
    "search tasks are graded on the best value found, and are done when the optimum (or the "
    "environment's tolerance) has been found.")


def labelled(label: str, text: str) -> str:
    """``LABEL:\ntext``; an observation text that starts with its own ``OBSERVATION:`` label
    (gridmap's do) loses it, so no prompt shows the label twice."""
    if label.upper().endswith("OBSERVATION"):
        text = _OWN_LABEL.sub("", text, count=1)
    return f"{label}:\n{text}"


def answer_rule(ctx: Context) -> str:
    """The policy's reply format, with the env's notation for the action inside the fence."""
    rule = (f"End your reply with the phrase \"{ANSWER_PHRASE}\" followed by the action inside "
            "a triple-backtick fence, and write nothing after it.")
    if ctx.answer_format:
        rule += f" Inside the fence, write the action as {ctx.answer_format.rstrip('.')}."
    return rule


def _policy_system(ctx: Context, with_reflections: bool) -> str:
    rules = [
        ("Issue exactly one action per turn, and only actions that are valid in the current "
         "observation."),
        "Try to finish the task in as few actions as possible.",
        "Think step by step about the task, the observation and the history before acting.",
        answer_rule(ctx),
        "When the task is done, issue the completion action if the environment has one.",
    ]
    if with_reflections:
        rules.append("Use insights from the REFLECTIONS block when they apply to the current "
                     "situation.")
    return (
        "You are an autonomous agent that solves tasks in a text environment by issuing actions.\n"
        "Each turn you receive the current observation and your previous action.\n\n"
        f"ENVIRONMENT:\n{ctx.task}\n\nACTIONS:\n{ctx.action_help}\n\nRULES:\n"
        + "\n".join(f"{i}. {r}" for i, r in enumerate(rules, 1)))


def _first_user(ctx: Context) -> str:
    return f"{labelled('OBSERVATION', ctx.shown(0))}\nPREVIOUS ACTION: none"


def _later_user(obs: str, prev: str) -> str:
    return f"{labelled('OBSERVATION', obs)}\nPREVIOUS ACTION: {prev}"


def short_task(text: str, max_words: int = 40) -> str:
    """The first sentences of ``text`` up to ``max_words`` words (memory-key form of g)."""
    out: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        words = sentence.split()
        if out and len(out) + len(words) > max_words:
            break
        out.extend(words[:max_words - len(out)])
    return " ".join(out)


def truncate_words(text: str, n: int = REFLECTION_MAX_WORDS) -> str:
    """Cheap token cap (words), for reflections in prompts
    (docs/methods/reflection-memory.md#injection-into-prompts)."""
    words = text.split()
    return text if len(words) <= n else " ".join(words[:n]) + " ..."


# --- policy ----------------------------------------------------------------------------------
def objective(r: dict[str, Any]) -> str:
    """A reflection's OBJECTIVE line: the short task key, not the whole task text."""
    return r.get("task_key") or short_task(r.get("task_text", ""))


def reflection_block(header: str, refls: Sequence[dict[str, Any]],
                     middle: Callable[[int, dict[str, Any]], str]) -> str:
    """Numbered reflections under ``header``: objective, ``middle`` line, the reflection."""
    parts = [header]
    for i, r in enumerate(refls, 1):
        if i > 1:
            parts.append("#####")
        parts += [f"OBJECTIVE ({i}): {objective(r)}", middle(i, r),
                  f"REFLECTION ({i}): {truncate_words(r.get('reflection', ''))}"]
    return "\n".join(parts)


def policy_reflection_block(refls: Sequence[dict[str, Any]]) -> str:
    return reflection_block("REFLECTIONS (from other tasks; they may not apply directly):", refls,
                            lambda i, r: f"ATTEMPTED ACTION ({i}): {r.get('action_raw', '')}")


def policy_messages(ctx: Context, reflections: Sequence[dict[str, Any]] = (),
                    icl_max_history_actions: int = 2, keep: int | None = None) -> list[Message]:
    """Policy prompt: system, examples (short histories), the replayed trajectory (the last
    ``keep`` steps after the first exchange; see :func:`clew.agents.fitting.elide_pairs`)."""
    msgs: list[Message] = [{"role": "system",
                            "content": _policy_system(ctx, bool(reflections))}]
    if len(ctx.actions) < icl_max_history_actions:
        for user, assistant in ctx.examples:
            msgs += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    turns = [_first_user(ctx)]
    for i, action in enumerate(ctx.actions):
        raw = ctx.raws[i] if i < len(ctx.raws) and ctx.raws[i] else \
            f"{ANSWER_PHRASE}\n```\n{action}\n```"
        turns += [raw, _later_user(ctx.shown(i + 1), action)]
    last = turns[-1]
    if reflections:
        last = (policy_reflection_block(reflections) + "\n\n" + last +
                "\nWeigh the task, the history and the reflections above when you plan your "
                "next action.")
    turns[-1] = last
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": text}
               for i, text in enumerate(turns)]
    if keep is not None:
        history = elide_pairs(history, len(ctx.actions) - keep)
    return msgs + history


# --- value: the trajectory as a transcript ---------------------------------------------------
SA_CODES = (
    "A: the task is already accomplished (the required state has been reached, or a correct "
    "final answer was given); nothing more is needed.\n"
    "B: exactly one more action would finish the task.\n"
    "C: the agent is on the right track, but several actions remain.\n"
    "D: it is not possible to tell whether the agent is on track.\n"
    "E: no progress towards the task; the agent is off track.")

MAD_CODES = (
    "A: the trajectory ends with a completion action whose answer is correct, or the required "
    "state has been reached; nothing more is needed.\n"
    "B: one more action would finish the task.\n"
    "C: more actions are needed, and the latest action looks like the best choice for finishing "
    "quickly.\n"
    "D: more actions are needed, and the latest action looks like a poor choice.\n"
    "E: no progress, an invalid latest action, or a wrong final answer.")

OUTPUT_FORMAT = ("Answer with one line \"Thoughts: <your reasoning>\" and then one line "
                 f"\"{STATUS_PHRASE} <letter>\".")


def value_system(ctx: Context, with_grammar: bool = False) -> str:
    text = ("You evaluate an agent's attempt at a task in a text environment. Given the task, the "
            "agent's actions and the latest observation, decide whether the attempt has "
            "succeeded and, if not, whether it is on track.\n\n"
            f"ENVIRONMENT:\n{ctx.task}\n\n{ctx.criteria or GENERIC_CRITERIA}")
    if with_grammar and ctx.action_help:
        text += f"\n\nACTIONS THE AGENT MAY TAKE:\n{ctx.action_help}"
    return text


def transcript(ctx: Context, window: int | None = None, keep: int | None = None) -> str:
    """The trajectory as text for value roles: the initial observation, the first step, then
    the last ``window`` steps (action and the observation after it), a note where steps were
    left out, and the final action of a STOP node. Actions are canonical. With ``keep`` (fitting
    the context) only the initial observation and the last ``min(window, keep)`` steps."""
    n = len(ctx.actions)
    shown = n if window is None else max(1, window)
    if keep is not None:
        shown = min(shown, max(1, keep))
    lines = ["THE AGENT'S TRAJECTORY SO FAR:", labelled("INITIAL OBSERVATION", ctx.shown(0))]
    recent = range(max(1, n - shown + 1), n + 1)
    # the first step stays beside the recent ones, unless the context made prompts drop steps
    steps = sorted({*recent} if keep is not None else {1, *recent}) if n else []
    prev = 0
    for i in range(1, n + 1):
        if i not in steps:
            continue
        if i - prev > 1:
            lines.append(gap_note(i - prev - 1))
        label = "LATEST OBSERVATION" if i == n else f"OBSERVATION AFTER ACTION {i}"
        lines += [f"ACTION {i}: {ctx.actions[i - 1]}", labelled(label, ctx.shown(i))]
        prev = i
    if ctx.final_action is not None:
        lines.append(f"THE AGENT'S FINAL ACTION: {ctx.final_action}")
    return "\n".join(lines)


def replay_messages(ctx: Context, window: int, keep: int | None = None) -> list[Message]:
    """The trajectory for value roles: one user turn holding :func:`transcript` (callers append
    their instructions to it)."""
    return [{"role": "user", "content": transcript(ctx, window, keep)}]


def value_reflection_block(refls: Sequence[dict[str, Any]]) -> str:
    return reflection_block(
        "REFLECTIONS (from evaluating other tasks; they may not apply directly):", refls,
        lambda i, r: "(the agent's actions and the arguments of that case are omitted)")


def _with_tail(system: str, ctx: Context, window: int, keep: int | None,
               tail: Sequence[str]) -> list[Message]:
    body = transcript(ctx, window, keep) + "\n\n" + "\n\n".join(tail)
    return [{"role": "system", "content": system}, {"role": "user", "content": body}]


def sa_value_messages(ctx: Context, window: int, reflections: Sequence[dict] = (),
                      rubric: str | None = None, keep: int | None = None) -> list[Message]:
    """Single-agent grading prompt (docs/methods/rmcts.md)."""
    tail = []
    if reflections:
        tail.append(value_reflection_block(reflections))
    if rubric:
        tail.append(f"RUBRIC (checks any correct solution passes):\n{rubric}")
    tail.append("Grade the agent's progress with one status code:\n" + SA_CODES)
    if reflections:
        tail.append("Use the reflections above when they apply.")
    tail.append(OUTPUT_FORMAT)
    return _with_tail(value_system(ctx), ctx, window, keep, tail)


def rubric_messages(ctx: Context, reflections: Sequence[dict] = ()) -> list[Message]:
    """Rubric prompt (docs/methods/rmcts.md): at most four yes/no checks between markers."""
    text = labelled("INITIAL OBSERVATION", ctx.shown(0)) + "\n\n"
    if reflections:
        text += value_reflection_block(reflections) + "\n\n"
    text += ("Write at most four simple yes/no checks derived from the task, such that any wrong "
             f"outcome fails at least one of them. Put them between {RUBRIC_START} and "
             f"{RUBRIC_END}.")
    return [{"role": "system", "content": value_system(ctx)}, {"role": "user", "content": text}]


# --- debate ----------------------------------------------------------------------------------
SUPPORT = ("Argue, with the strongest specific evidence available, that the agent has already "
           "succeeded or is heading toward success: a final answer that looks right, every stated "
           "requirement satisfied, only one step left. Having reached the relevant object, room "
           "or sub-goal counts heavily. Make concrete, short claims that can be checked against "
           "the task, the observations and the actions. At most about 100 words.")
OPPOSE = ("Argue, with the strongest specific evidence available, that the agent has not "
          "succeeded and is not on track: a requirement missed, an unreasonable state or action, "
          "a wrong answer. Not having reached the relevant object, room or sub-goal counts "
          "heavily. Make concrete, short claims that can be checked against the task, the "
          "observations and the actions. At most about 100 words.")


def argument_messages(ctx: Context, side: str, window: int,
                      keep: int | None = None) -> list[Message]:
    """Support or oppose argument prompt (docs/methods/rmcts.md)."""
    if side not in ("support", "oppose"):
        raise ValueError(f"debate side must be support|oppose, got {side!r}")
    instr = SUPPORT if side == "support" else OPPOSE
    return _with_tail(value_system(ctx, with_grammar=True), ctx, window, keep, [instr])


def judge_messages(ctx: Context, support: str, oppose: str, order: str, window: int,
                   reflections: Sequence[dict] = (), keep: int | None = None) -> list[Message]:
    """Judge prompt (docs/methods/rmcts.md); ``order`` is ``oppose_first`` or ``support_first``."""
    pro = f"REASONS THE AGENT IS ON TRACK:\n{support}"
    con = f"REASONS THE AGENT IS NOT ON TRACK:\n{oppose}"
    args = [con, pro] if order == "oppose_first" else [pro, con]
    tail = [("Reminders: an agent may only issue actions valid in the latest observation; a "
             "completion action means the agent claims it is done."),
            *args,
            "Either argument may be wrong: decide independently from the evidence."]
    if reflections:
        tail.append(value_reflection_block(reflections))
    tail.append("Grade the agent's progress with one status code:\n" + MAD_CODES)
    tail.append("Use the arguments" + (" and the reflections" if reflections else "") +
                " when they are supported by the evidence.")
    tail.append(OUTPUT_FORMAT)
    return _with_tail(value_system(ctx, with_grammar=True), ctx, window, keep, tail)


# --- policy reflection -----------------------------------------------------------------------
def _agent_role(ctx: Context) -> str:
    return ("You are an autonomous agent that solves tasks in a text environment by issuing "
            f"actions.\n\nENVIRONMENT:\n{ctx.task}\n\nACTIONS:\n{ctx.action_help}")


def expectation_messages(ctx: Context, t: int, window: int) -> list[Message]:
    """Call 1 of policy reflection: what do you expect right after a_t? (docs/methods/rmcts.md)."""
    lo = max(0, t - window)
    lines = []
    for i in range(lo, t):
        lines += [labelled("OBSERVATION", ctx.shown(i)), f"ACTION: {ctx.actions[i]}"]
    lines.append(labelled("CURRENT OBSERVATION", ctx.shown(t)))
    return [{"role": "system", "content": _agent_role(ctx)},
            {"role": "user", "content": "\n".join(lines)},
            {"role": "assistant", "content": f"Action: {ctx.raws[t] or ctx.actions[t]}"},
            {"role": "user", "content": "Briefly describe what you expect to observe right "
                                        "after this action."}]


def contrast_messages(ctx: Context, t: int, expectation: str, next_obs: str,
                      success: bool) -> list[Message]:
    """Call 2 of policy reflection: contrast expectation and reality (docs/methods/rmcts.md)."""
    earlier = "\n".join(f"{i + 1}. {ctx.actions[i]}" for i in range(t)) or "(none)"
    return [
        {"role": "system", "content": _agent_role(ctx)},
        {"role": "user", "content": f"YOUR EARLIER ACTIONS:\n{earlier}\n\n"
                                    f"{labelled('OBSERVATION', ctx.shown(t))}"},
        {"role": "assistant", "content": f"{ctx.raws[t] or ctx.actions[t]}\n\nExpectation for "
                                         f"the next observation: {expectation}"},
        {"role": "user", "content":
            f"{labelled('ACTUAL NEXT OBSERVATION', next_obs)}\n\nWas this what you expected? If "
            "not, what does it teach you about how this environment works? What would you do "
            "differently at a high level if you met this situation again? Do not name specific "
            "actions or answers. At most about 100 words. In the end the task was evaluated as "
            f"{'successful' if success else 'failed'}."},
    ]


def pseudo_outcome_observation(success: bool) -> str:
    return ("The task was evaluated as completed successfully." if success else
            "The task was evaluated as failed.")


# --- value reflection ------------------------------------------------------------------------
def value_expectation_messages(ctx: Context, final: bool, window: int = 2) -> list[Message]:
    """Expectation mode, call 1: what should the agent do next (or how did it do)?"""
    ask = ("How well did the agent do against the task, and why?" if final else
           "What should the agent do next to finish the task?")
    return _with_tail(value_system(ctx), ctx, window, None, [ask])


def value_contrast_messages(ctx: Context, final: bool, expectation: str, later_actions: list[str],
                            success: bool, window: int = 2) -> list[Message]:
    """Expectation mode, call 2: did the expectation hold; how to judge next time?"""
    msgs = value_expectation_messages(ctx, final, window)
    msgs.append({"role": "assistant", "content": expectation})
    later = "\n".join(f"- {a}" for a in later_actions) or "(no further actions)"
    msgs.append({"role": "user", "content":
                 f"THE AGENT'S ACTUAL SUBSEQUENT ACTIONS:\n{later}\nOUTCOME: the task was "
                 f"{'completed successfully' if success else 'failed'}.\n\nDid your expectation "
                 "hold? What does this show about the agent on this kind of task, and how would "
                 "you judge such states differently next time? At most about 100 words."})
    return msgs


def judge_critique_messages(ctx: Context, support: str, oppose: str, success: bool,
                            window: int = 4) -> list[Message]:
    """Judge-critique mode (docs/methods/reflection-memory.md#value-reflection): a deliberately
    flipped conclusion to correct."""
    wrong = ("Conclusion: the agent is making good progress and will succeed." if not success else
             "Conclusion: the agent is making poor progress and will fail.")
    msgs = _with_tail(value_system(ctx, with_grammar=True), ctx, window, None,
                      ["Weigh the arguments for and against the agent."])
    msgs.append({"role": "assistant", "content":
                 f"REASONS THE AGENT IS ON TRACK:\n{support}\n\nREASONS THE AGENT IS NOT ON "
                 f"TRACK:\n{oppose}\n\n{wrong}"})
    hint = ("The task in fact succeeded: the state was on a path to success." if success else
            "The task in fact failed: something in this state or the actions so far was wrong.")
    msgs.append({"role": "user", "content":
                 f"{hint} Which of the arguments were wrong, and what advice would help a judge "
                 "decide better next time? At most about 100 words."})
    return msgs
