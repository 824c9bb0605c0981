"""Contrastive reflection: error attribution, policy and value reflection
(docs/methods/reflection-memory.md, docs/methods/rmcts.md#error-attribution).

At task end the agent builds a :class:`TaskRecord` (executed trajectory + the statistics of each
executed edge in the tree that chose it), scores every step by how much the value function's
instant judgement and the search's judgement disagreed, and writes a reflection for the most
surprising steps: value first, then policy.

Decisions:

* Success without labels: ``r_est = 1`` iff the mean Q of the executed steps that count (not
  excluded, below) > ``success_threshold``; ``use_gt_success=False`` by default; both r_est and
  r_gt are recorded.
* Outcome anchors use the value scale's own bounds: 1 for success, 0 (unit) / −1 (signed) for
  failure, for both error scores.
* ``value_error="forward"`` (the code): e_V[o_{t+1}] = |Vn_t − Q_{t+1}|, the last state against
  the outcome anchor; ``"paper"``: |Vn_t − Q_t|.
* Excluded steps (score −inf, and left out of r_est): NONE actions (nothing parsed), invalid
  actions, steps the runner made itself (queries charged during a search that the search did
  not then commit), steps without tree statistics. Selection masks by index, never mutates the
  record.
* A final STOP has no observation after it: the record's observations end at o_T−1's
  successor only when the last action was not a stop, so the last step is reflected on with
  the pseudo-observation (policy) and as a ``final_action`` item (value).
* Expected transition (call 1) sees the task and the last ``expect_window`` executed pairs.
  Value reflection ``mode="auto"``: ``judge_critique`` for the debate value function,
  ``expectation`` otherwise; judge-critique skips steps without debate data.
* Keys: :func:`~clew.agents.memory.memory_key` of the env's compact view of task and state
  (``views``, from ``Env.memory_view``), plus the final action when the reflected item is a
  final action. Dedup hashes as in the code.
* Usage roles: ``expect`` for the first call of a two-call reflection (what the model expects),
  ``reflection`` for the reflection itself (contrast, critique).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from clew.agents.base import EpisodeOrder
from clew.agents.fitting import fit_messages
from clew.agents.lm.base import ChatRequest, Completion, LanguageModel, Sampling
from clew.agents.lm.calls import call
from clew.agents.memory import ReflectionMemory, memory_key
from clew.agents.memory_store import text_hash
from clew.agents.options import ReflectionOptions
from clew.agents.parsing import parse_free_text, record
from clew.agents.prompts import (
    Context,
    contrast_messages,
    expectation_messages,
    judge_critique_messages,
    pseudo_outcome_observation,
    value_contrast_messages,
    value_expectation_messages,
)
from clew.agents.seeds import derive_seed
from clew.agents.usage import UsageByRole
from clew.agents.value import scale_bounds

DEFAULTS = ReflectionOptions()


@dataclass
class StepStat:
    """Statistics of one executed action, from the tree that chose it."""

    q: float | None = None
    n: int = 0
    prior: float = 0.0
    v_next: float | None = None
    value_record: dict[str, Any] | None = None
    valid: bool = True
    is_none: bool = False
    is_stop: bool = False
    runner_inserted: bool = False
    action: str | None = None        # the canonical action of the edge (None: NONE)

    @property
    def excluded(self) -> bool:
        """Left out of error attribution and of the success estimate."""
        return self.is_none or not self.valid or self.runner_inserted or self.q is None


@dataclass
class TaskRecord:
    """Executed trajectory with per-step edge statistics."""

    task_id: str
    task_text: str
    observations: list[str]                 # o_0 … o_T (o_T may be missing after a final STOP)
    actions: list[str]                      # canonical a_0 … a_{T-1}
    raws: list[str | None]
    stats: list[StepStat]
    r_gt: float | None = None
    action_help: str = ""
    criteria: str = ""
    success_threshold: float = DEFAULTS.success_threshold
    task_key: str = ""                      # short task text (reflections' OBJECTIVE lines)
    views: list[str] | None = None          # compact memory views of the observations
    episode: str = ""                       # the episode key (seeds)
    order: EpisodeOrder | None = None       # the episode's place in its run (memory order)

    @property
    def r_est(self) -> int:
        """1 iff the mean Q of the counted executed steps passes the threshold."""
        qs = [s.q for s in self.stats if not s.excluded]
        return int(bool(qs) and sum(qs) / len(qs) > self.success_threshold)

    def key(self, t: int, final_action: int | None = None) -> str:
        """Memory key of state o_t, or of the final action a_{final_action} taken there."""
        views = self.views if self.views is not None else self.observations
        return memory_key(views[t], None if final_action is None else self.actions[final_action])

    def has_obs_after(self, t: int) -> bool:
        return t + 1 < len(self.observations)

    def context(self, upto: int, final_action: int | None = None) -> Context:
        """Trajectory o_0 … o_upto (and a final action a_{final_action} without observation)."""
        ctx = Context(task=self.task_text, observations=list(self.observations[:upto + 1]),
                      actions=list(self.actions[:upto]), raws=list(self.raws[:upto]),
                      action_help=self.action_help, criteria=self.criteria, task_id=self.task_id,
                      task_key=self.task_key)
        if final_action is not None:
            ctx.final_action = self.actions[final_action]
            ctx.final_raw = self.raws[final_action]
        return ctx


# --- error attribution -----------------------------------------------------------------------
NEG_INF = -math.inf


def outcome_anchor(success: bool, scale: str) -> float:
    low, high = scale_bounds(scale)
    return high if success else low


def policy_error_scores(rec: TaskRecord, success: bool, scale: str = "unit") -> list[float]:
    """e_π[t] = |Vn_t − Q_t|; the last step uses the outcome anchor instead of Vn."""
    T = len(rec.stats)
    out = []
    for t, s in enumerate(rec.stats):
        if s.excluded:
            out.append(NEG_INF)
            continue
        target = outcome_anchor(success, scale) if t == T - 1 else s.v_next
        out.append(NEG_INF if target is None else abs(target - s.q))
    return out


def value_error_scores(rec: TaskRecord, success: bool, scale: str = "unit",
                       mode: str = "forward") -> list[float]:
    """Score of the state reached by action t, o_{t+1}, at index t
    (docs/methods/rmcts.md#error-attribution)."""
    if mode not in ("forward", "paper"):
        raise ValueError(f"reflection.value.error must be forward|paper, got {mode!r}")
    T = len(rec.stats)
    out = []
    for t, s in enumerate(rec.stats):
        if s.excluded or s.v_next is None:
            out.append(NEG_INF)
            continue
        if mode == "paper":
            out.append(abs(s.v_next - s.q))
        elif t == T - 1:
            out.append(abs(s.v_next - outcome_anchor(success, scale)))
        else:
            nxt = rec.stats[t + 1]
            out.append(NEG_INF if nxt.q is None or nxt.excluded else abs(s.v_next - nxt.q))
    return out


def pick_top(scores: Sequence[float], n_max: int, threshold: float) -> list[int]:
    """Up to ``n_max`` indices by decreasing score, stopping under ``threshold`` (mask by index;
    first index wins ties)."""
    chosen: list[int] = []
    masked: set[int] = set()
    for _ in range(n_max):
        best = None
        for i, s in enumerate(scores):
            if i in masked or s == NEG_INF:
                continue
            if best is None or s > scores[best]:
                best = i
        if best is None or scores[best] < threshold:
            break
        chosen.append(best)
        masked.add(best)
    return chosen


# --- the reflector ---------------------------------------------------------------------------
class Reflector:
    """LM reflector: predict-then-contrast for the policy; expectation or judge critique for V."""

    kind = "lm"
    uses_oracle = False

    def __init__(self, lm: LanguageModel, options: ReflectionOptions | None = None,
                 seed: int | None = None):
        options = options or DEFAULTS
        self.lm = lm
        r = options.reflector
        self.sampling = {"temperature": r.temperature, "top_p": r.top_p,
                         "max_tokens": r.max_tokens}
        self.expect_window, self.seed = options.policy.expect_window, seed

    async def _one(self, messages, usage: UsageByRole | None, rec: TaskRecord, t: int,
                   part: str, role: str = "reflection") -> str:
        # fitted to the context, read and counted like every role (docs/methods/parsing.md)
        messages = fit_messages(self.lm, messages, self.sampling["max_tokens"], role)
        seed = derive_seed(self.seed, rec.episode or rec.task_id, t, part)
        req = ChatRequest(messages, Sampling(n=1, seed=seed, **self.sampling), role=role)
        comps = await call(self.lm, req, usage)
        comp = comps[0] if comps else Completion("")
        text = parse_free_text(comp.text, comp.finish_reason)
        record(usage, role, self.lm.spec, [(text is not None, comp.text)])
        return text or ""

    async def reflect_policy(self, rec: TaskRecord, t: int, success: bool,
                             usage: UsageByRole | None = None) -> tuple[str, str, str]:
        """Two calls: expected transition, then contrast; returns (expectation, next, text)."""
        ctx = rec.context(t)
        ctx.actions, ctx.raws = list(rec.actions[:t + 1]), list(rec.raws[:t + 1])
        expect = await self._one(expectation_messages(ctx, t, self.expect_window), usage,
                                 rec, t, "expect", role="expect")
        nxt = rec.observations[t + 1] if rec.has_obs_after(t) else pseudo_outcome_observation(success)
        text = await self._one(contrast_messages(ctx, t, expect, nxt, success), usage,
                               rec, t, "contrast")
        return expect, nxt, text

    async def reflect_value(self, rec: TaskRecord, t: int, success: bool, mode: str,
                            usage: UsageByRole | None = None) -> str | None:
        """Reflection about the state reached by action t; None when the mode has no data."""
        final = not rec.has_obs_after(t)
        ctx = rec.context(t, final_action=t) if final else rec.context(t + 1)
        if mode == "judge_critique":
            debate = (rec.stats[t].value_record or {}).get("debate")
            if not debate:
                return None
            return await self._one(judge_critique_messages(ctx, debate["support"],
                                                           debate["oppose"], success),
                                   usage, rec, t, "critique")
        expect = await self._one(value_expectation_messages(ctx, final), usage,
                                 rec, t, "vexpect", role="expect")
        later = list(rec.actions[t + 1:])
        return await self._one(value_contrast_messages(ctx, final, expect, later, success),
                               usage, rec, t, "vcontrast")


@dataclass
class ImprovementReport:
    r_est: int
    r_gt: float | None
    success_used: bool
    policy_scores: list[float] = field(default_factory=list)
    value_scores: list[float] = field(default_factory=list)
    policy_written: list[str] = field(default_factory=list)
    value_written: list[str] = field(default_factory=list)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())


async def improve(rec: TaskRecord, memory: ReflectionMemory | None, reflector: Any,
                  cfg: ReflectionOptions, value_method: str = "single", scale: str = "unit",
                  usage: UsageByRole | None = None) -> ImprovementReport:
    """The improvement loop after one task: value reflections, then policy ones.

    ``reflector`` is any :class:`~clew.agents.roles.Reflector`; ``value_method`` and ``scale``
    are those of the agent's value function."""
    success = bool(rec.r_gt >= 1.0) if (cfg.use_gt_success and rec.r_gt is not None) \
        else bool(rec.r_est)
    used = {"kind": "gt" if cfg.use_gt_success else "est", "value": int(success)}
    report = ImprovementReport(rec.r_est, rec.r_gt, success)
    if cfg.value.enabled:
        mode = cfg.value.resolve_mode(value_method)
        scores = report.value_scores = value_error_scores(rec, success, scale, cfg.value.error)
        for t in pick_top(scores, cfg.value.n_max, cfg.value.threshold):
            text = await reflector.reflect_value(rec, t, success, mode, usage)
            if text is None:
                continue
            final = not rec.has_obs_after(t)
            state = rec.observations[t] if final else rec.observations[t + 1]
            debate = (rec.stats[t].value_record or {}).get("debate") or {}
            record = {
                "task_id": rec.task_id, "task_text": rec.task_text, "mode": mode,
                "item": "final_action" if final else "state", "state_text": state,
                "final_action_raw": rec.raws[t] if final else None,
                "partial_actions": list(rec.actions[:t + 1]),
                "support": debate.get("support"), "oppose": debate.get("oppose"),
                "v_estimate": rec.stats[t].v_next, "reflection": text, "error_score": scores[t],
                "outcome_used": used, "created_at": _now(),
                "key_text": rec.key(t, final_action=t) if final else rec.key(t + 1),
                "dedup": text_hash(rec.task_text, rec.observations[0],
                                   *[r or a for r, a in zip(rec.raws[:t + 1], rec.actions)]),
            }
            if memory is None or memory.add("value", record, rec.order):
                report.value_written.append(record["dedup"])
    if cfg.policy.enabled:
        scores = report.policy_scores = policy_error_scores(rec, success, scale)
        for t in pick_top(scores, cfg.policy.n_max, cfg.policy.threshold):
            _, nxt, text = await reflector.reflect_policy(rec, t, success, usage)
            state = rec.observations[t]
            raw = rec.raws[t] or rec.actions[t]
            record = {
                "task_id": rec.task_id, "task_text": rec.task_text, "state_text": state,
                "action_raw": raw, "next_state_text": nxt, "reflection": text,
                "error_score": scores[t], "outcome_used": used,
                "source_task_hash": text_hash(rec.task_id, rec.task_text),
                "key_text": rec.key(t),
                "created_at": _now(), "dedup": text_hash(rec.task_text, state, raw, nxt),
            }
            if memory is None or memory.add("policy", record, rec.order):
                report.policy_written.append(record["dedup"])
    if memory is not None:
        memory.add("tasks", {"id": f"task-{text_hash(rec.task_id, rec.task_text)}",
                             "dedup": text_hash(rec.task_id, rec.task_text),
                             "task_id": rec.task_id, "task_text": rec.task_text,
                             "r_est": rec.r_est, "r_gt": rec.r_gt, "actions": rec.actions},
                   rec.order)
    return report
