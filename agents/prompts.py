"""Role prompts of the search agents (docs/methods/rmcts.md#policy-prompt), in one place, plus
the context they render.

Every prompt puts the shared prefix first — the role system text, the env's instructions and
action grammar, then the task and the trajectory — so vLLM's prefix cache hits across the
samples of a node, the nodes of a tree and the roles of a step (docs/architecture.md).
Variable material (reflections, the grading instruction, arguments) goes at the end.

Wording is ours: content and structure follow the methods, the words do not.
``PROMPTS_VERSION`` is logged with every tree and run.

Decisions:

* Task text g = ``env.instructions()`` (clew envs state the goal there and in the observation).
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

from clew.agents.parsing import ANSWER_PHRASE, RUBRIC_END, RUBRIC_START

PROMPTS_VERSION = "clew-prompts-2"
REFLECTION_MAX_WORDS = 128   # a reflection's cap in prompts (about 128 tokens)

Message = dict[str, str]


# --- what a role sees --------------------------------------------------------------------------
@dataclass
class Context:
    """The trajectory from episode start to a node, as roles see it.

    ``observations`` = o_0 … o_k; ``actions`` / ``raws`` = a_0 … a_{k-1} (canonical text, and the
    raw completions that produced them, None where unknown); ``final_action`` = a STOP action that
    ends the trajectory without a following observation (a STOP node). ``env`` is the simulator at
    this state (heuristic roles only; LM roles never touch it).
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

    @property
    def obs(self) -> str:
        return self.observations[-1]

    def at(self, observations: list[str], actions: list[str], raws: list[str | None],
           final_action: str | None = None, final_raw: str | None = None,
           env: Any = None, seed: int | None = None) -> Context:
        """This task context with a trajectory (see :func:`task_context`)."""
        return replace(self, observations=observations, actions=actions, raws=raws,
                       final_action=final_action, final_raw=final_raw, env=env, seed=seed)


def task_context(env: Any, task_id: str) -> Context:
    """The task part of every role's context, from the env: instructions, grammar, success
    criteria (when the env answers ``instructions("criteria")`` with a different text) and
    in-context examples; the trajectory is added per node with :meth:`Context.at`."""
    task = env.instructions()
    try:
        criteria = env.instructions("criteria")
    except Exception:  # noqa: BLE001 - an env may reject a variant it does not know, any way
        criteria = ""
    if criteria == task:
        criteria = ""
    return Context(task=task, observations=[], task_key=short_task(task),
                   action_help=env.action_help(), criteria=criteria,
                   examples=list(env.prompt_examples()), task_id=task_id)


# --- shared pieces -----------------------------------------------------------------------------
GENERIC_CRITERIA = (
    "Task kinds: goal-reaching tasks succeed when the required state has been reached (for "
    "example the goal node of the task graph is activated or the target object is delivered); "
    "answer tasks succeed when the completion action carries the correct answer; budgeted "
    "search tasks are graded on the best value found, and are done when the optimum (or the "
    "environment's tolerance) has been found.")


def _policy_system(ctx: Context, with_reflections: bool) -> str:
    rules = [
        ("Issue exactly one action per turn, and only actions that are valid in the current "
         "observation."),
        "Try to finish the task in as few actions as possible.",
        "Think step by step about the task, the observation and the history before acting.",
        (f"End your reply with the phrase \"{ANSWER_PHRASE}\" followed by the action inside a "
         "triple-backtick fence, and write nothing after it."),
        "When the task is done, issue the completion action if the environment has one.",
    ]
    if with_reflections:
        rules.append("Use insights from the REFLECTIONS block when they apply to the current "
                     "situation.")
    return (
        "You are an autonomous agent that solves tasks in a text environment by issuing actions.\n"
        "Each turn you receive the task (first turn), the current observation and the previous "
        "action.\n\n"
        f"ENVIRONMENT:\n{ctx.task}\n\nACTIONS:\n{ctx.action_help}\n\nRULES:\n"
        + "\n".join(f"{i}. {r}" for i, r in enumerate(rules, 1)))


def _first_user(ctx: Context) -> str:
    return (f"TASK: {ctx.task}\nRead the task carefully.\nOBSERVATION:\n{ctx.observations[0]}\n"
            "PREVIOUS ACTION: none")


def _later_user(obs: str, prev: str) -> str:
    return f"OBSERVATION:\n{obs}\nPREVIOUS ACTION: {prev}"


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
def reflection_block(header: str, refls: Sequence[dict[str, Any]],
                     middle: Callable[[int, dict[str, Any]], str]) -> str:
    """Numbered reflections under ``header``: objective, ``middle`` line, the reflection."""
    parts = [header]
    for i, r in enumerate(refls, 1):
        if i > 1:
            parts.append("#####")
        parts += [f"OBJECTIVE ({i}): {r.get('task_text', '')}", middle(i, r),
                  f"REFLECTION ({i}): {truncate_words(r.get('reflection', ''))}"]
    return "\n".join(parts)


def policy_reflection_block(refls: Sequence[dict[str, Any]]) -> str:
    return reflection_block("REFLECTIONS (from other tasks; they may not apply directly):", refls,
                            lambda i, r: f"ATTEMPTED ACTION ({i}): {r.get('action_raw', '')}")


def policy_messages(ctx: Context, reflections: Sequence[dict[str, Any]] = (),
                    icl_max_history_actions: int = 2) -> list[Message]:
    """Policy prompt: system, examples (short histories), the replayed trajectory."""
    msgs: list[Message] = [{"role": "system",
                            "content": _policy_system(ctx, bool(reflections))}]
    if len(ctx.actions) < icl_max_history_actions:
        for user, assistant in ctx.examples:
            msgs += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    turns = [_first_user(ctx)]
    for i, action in enumerate(ctx.actions):
        raw = ctx.raws[i] if i < len(ctx.raws) and ctx.raws[i] else \
            f"{ANSWER_PHRASE}\n```\n{action}\n```"
        turns += [raw, _later_user(ctx.observations[i + 1], action)]
    last = turns[-1]
    if reflections:
        last = (policy_reflection_block(reflections) + "\n\n" + last +
                "\nWeigh the task, the history and the reflections above when you plan your "
                "next action.")
    turns[-1] = last
    for i, text in enumerate(turns):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return msgs


# --- value: replay ---------------------------------------------------------------------------
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
                 "\"STATUS CODE: <letter>\".")


def value_system(ctx: Context, with_grammar: bool = False) -> str:
    text = ("You evaluate an agent's attempt at a task in a text environment. Given the task, the "
            "agent's actions and the latest observation, decide whether the attempt has "
            "succeeded and, if not, whether it is on track.\n\n"
            f"ENVIRONMENT:\n{ctx.task}\n\n{ctx.criteria or GENERIC_CRITERIA}")
    if with_grammar and ctx.action_help:
        text += f"\n\nACTIONS:\n{ctx.action_help}"
    return text


def replay_messages(ctx: Context, window: int) -> list[Message]:
    """The trajectory as a conversation for value roles: first turn (task + o_0), first action,
    then the last ``window`` (observation, action) pairs; the final user turn is left open and
    returned as its text in the last message (callers append to it). Actions are canonical.
    """
    n = len(ctx.actions)
    msgs: list[Message] = [{"role": "user", "content":
                            f"TASK: {ctx.task}\nINITIAL OBSERVATION:\n{ctx.observations[0]}"}]
    if n == 0:
        return msgs
    msgs.append({"role": "assistant", "content": f"ACTION: {ctx.actions[0]}"})
    start = max(1, n - window)
    if start > 1:
        msgs.append({"role": "user", "content":
                     f"(skipping ahead: {start - 1} earlier step(s) omitted)\n"
                     f"OBSERVATION:\n{ctx.observations[start]}"})
        msgs.append({"role": "assistant", "content": f"ACTION: {ctx.actions[start]}"})
        start += 1
    for i in range(start, n):
        msgs.append({"role": "user", "content": f"OBSERVATION:\n{ctx.observations[i]}"})
        msgs.append({"role": "assistant", "content": f"ACTION: {ctx.actions[i]}"})
    msgs.append({"role": "user", "content": f"LATEST OBSERVATION:\n{ctx.obs}"})
    return msgs


def _final_turn(msgs: list[Message], ctx: Context) -> list[Message]:
    if ctx.final_action is not None:
        extra = f"\nTHE AGENT'S FINAL ACTION: {ctx.final_action}"
        if msgs[-1]["role"] == "user":
            msgs[-1] = {"role": "user", "content": msgs[-1]["content"] + extra}
    return msgs


def value_reflection_block(refls: Sequence[dict[str, Any]]) -> str:
    return reflection_block(
        "REFLECTIONS (from evaluating other tasks; they may not apply directly):", refls,
        lambda i, r: "(the agent's actions and the arguments of that case are omitted)")


def sa_value_messages(ctx: Context, window: int, reflections: Sequence[dict] = (),
                      rubric: str | None = None) -> list[Message]:
    """Single-agent grading prompt (docs/methods/rmcts.md)."""
    msgs = _final_turn(replay_messages(ctx, window), ctx)
    tail = []
    if reflections:
        tail.append(value_reflection_block(reflections))
    if rubric:
        tail.append(f"RUBRIC (checks any correct solution passes):\n{rubric}")
    tail.append("Grade the agent's progress with one status code:\n" + SA_CODES)
    if reflections:
        tail.append("Use the reflections above when they apply.")
    tail.append(OUTPUT_FORMAT)
    msgs[-1] = {"role": msgs[-1]["role"], "content": msgs[-1]["content"] + "\n\n" + "\n\n".join(tail)}
    if msgs[-1]["role"] != "user":
        msgs.append({"role": "user", "content": "\n\n".join(tail)})
    return [{"role": "system", "content": value_system(ctx)}] + msgs


def rubric_messages(ctx: Context, reflections: Sequence[dict] = ()) -> list[Message]:
    """Rubric prompt (docs/methods/rmcts.md): at most four yes/no checks between markers."""
    text = (f"TASK: {ctx.task}\nINITIAL OBSERVATION:\n{ctx.observations[0]}\n\n")
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


def argument_messages(ctx: Context, side: str, window: int) -> list[Message]:
    """Support or oppose argument prompt (docs/methods/rmcts.md)."""
    if side not in ("support", "oppose"):
        raise ValueError(f"debate side must be support|oppose, got {side!r}")
    msgs = _final_turn(replay_messages(ctx, window), ctx)
    instr = SUPPORT if side == "support" else OPPOSE
    msgs[-1] = {"role": "user", "content": msgs[-1]["content"] + "\n\n" + instr}
    return [{"role": "system", "content": value_system(ctx, with_grammar=True)}] + msgs


def judge_messages(ctx: Context, support: str, oppose: str, order: str, window: int,
                   reflections: Sequence[dict] = ()) -> list[Message]:
    """Judge prompt (docs/methods/rmcts.md); ``order`` is ``oppose_first`` or ``support_first``."""
    msgs = _final_turn(replay_messages(ctx, window), ctx)
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
    msgs[-1] = {"role": "user", "content": msgs[-1]["content"] + "\n\n" + "\n\n".join(tail)}
    return [{"role": "system", "content": value_system(ctx, with_grammar=True)}] + msgs


# --- policy reflection -----------------------------------------------------------------------
def _agent_role(ctx: Context) -> str:
    return ("You are an autonomous agent that solves tasks in a text environment by issuing "
            f"actions.\n\nENVIRONMENT:\n{ctx.task}\n\nACTIONS:\n{ctx.action_help}")


def expectation_messages(ctx: Context, t: int, window: int) -> list[Message]:
    """Call 1 of policy reflection: what do you expect right after a_t? (docs/methods/rmcts.md)."""
    lo = max(0, t - window)
    lines = [f"TASK: {ctx.task}"]
    for i in range(lo, t):
        lines += [f"OBSERVATION:\n{ctx.observations[i]}", f"ACTION: {ctx.actions[i]}"]
    lines.append(f"CURRENT OBSERVATION:\n{ctx.observations[t]}")
    return [{"role": "system", "content": _agent_role(ctx)},
            {"role": "user", "content": "\n".join(lines)},
            {"role": "assistant", "content": f"Action: {ctx.raws[t] or ctx.actions[t]}"},
            {"role": "user", "content": "Briefly describe what you expect to observe right "
                                        "after this action."}]


def contrast_messages(ctx: Context, t: int, expectation: str, next_obs: str,
                      success: bool) -> list[Message]:
    """Call 2 of policy reflection: contrast expectation and reality (docs/methods/rmcts.md)."""
    earlier = "\n".join(f"{i + 1}. {ctx.raws[i] or ctx.actions[i]}" for i in range(t)) or "(none)"
    return [
        {"role": "system", "content": _agent_role(ctx)},
        {"role": "user", "content": f"YOUR EARLIER ACTIONS:\n{earlier}\n\nOBSERVATION:\n"
                                    f"{ctx.observations[t]}\n\nTASK: {ctx.task}"},
        {"role": "assistant", "content": f"{ctx.raws[t] or ctx.actions[t]}\n\nExpectation for "
                                         f"the next observation: {expectation}"},
        {"role": "user", "content":
            f"ACTUAL NEXT OBSERVATION:\n{next_obs}\n\nWas this what you expected? If not, what "
            "does it teach you about how this environment works? What would you do differently "
            "at a high level if you met this situation again? Do not name specific actions or "
            "answers. At most about 100 words. In the end the task was evaluated as "
            f"{'successful' if success else 'failed'}."},
    ]


def pseudo_outcome_observation(success: bool) -> str:
    return ("The task was evaluated as completed successfully." if success else
            "The task was evaluated as failed.")


# --- value reflection ------------------------------------------------------------------------
def value_expectation_messages(ctx: Context, final: bool, window: int = 2) -> list[Message]:
    """Expectation mode, call 1: what should the agent do next (or how did it do)?"""
    msgs = _final_turn(replay_messages(ctx, window), ctx)
    ask = ("How well did the agent do against the task, and why?" if final else
           "What should the agent do next to finish the task?")
    msgs[-1] = {"role": "user", "content": msgs[-1]["content"] + "\n\n" + ask}
    return [{"role": "system", "content": value_system(ctx)}] + msgs


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
    msgs = _final_turn(replay_messages(ctx, window), ctx)
    wrong = ("Conclusion: the agent is making good progress and will succeed." if not success else
             "Conclusion: the agent is making poor progress and will fail.")
    msgs.append({"role": "assistant", "content":
                 f"REASONS THE AGENT IS ON TRACK:\n{support}\n\nREASONS THE AGENT IS NOT ON "
                 f"TRACK:\n{oppose}\n\n{wrong}"})
    hint = ("The task in fact succeeded: the state was on a path to success." if success else
            "The task in fact failed: something in this state or the actions so far was wrong.")
    msgs.append({"role": "user", "content":
                 f"{hint} Which of the arguments were wrong, and what advice would help a judge "
                 "decide better next time? At most about 100 words."})
    return [{"role": "system", "content": value_system(ctx, with_grammar=True)}] + msgs
