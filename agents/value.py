"""Value scales, value records and their cache, and the LM value functions: the shared base and
the single-agent one (docs/methods/debate.md; the debate value is :mod:`clew.agents.debate`).

A value function maps a :class:`~clew.agents.prompts.Context` (task + trajectory to a node) to a
:class:`ValueRecord` whose ``v`` lies on the configured scale. The single-agent (SA) function asks
one request with ``n`` samples for a status code A–E and averages the mapped letters.

Decisions:

* ``scale="unit"`` by default; ``"signed"`` for parity with the R-MCTS_MAD code.
* ``parse_failure="skip"``: unparseable samples are left out of the mean; if all fail (or
  there are none) the value is unknown: ``v = None`` and the record is flagged ``all_failed``;
  the search then backs up the parent's estimate instead (docs/methods/debate.md#unknown-values).
  ``"zero"`` counts failures as 0 (code parity; an all-failed record is still flagged).
* Samples are read by :func:`clew.agents.parsing.parse_status` with their finish reason (a
  sample cut by the token limit counts only with a complete status code in it); every sample is
  counted as parsed or not under its role (``value`` or ``judge``) in ``usage.parses``.
* ``constrain=True``: each grading sample (SA value, debate judge) ends with
  ``STATUS CODE: ```X``` `` for a letter A–E (``Sampling.choices``,
  docs/methods/parsing.md#constrained-answers); the rubric and the debate's arguments stay free.
* ``rubric=True``: one rubric request per task (cached per task and first observation, usage
  role ``rubric``), written with the reflections retrieved for the first node evaluated, and
  kept for every later node, so the grading standard does not change with the reflections a
  node retrieves; temperature 0 without reflections and 0.7 with; grading at the paper's
  1.0 / 0.95. A rubric that cannot be read is left out of the grading prompt and counted under
  role ``rubric``.
* Prompts are fitted to the model's context (:mod:`clew.agents.fitting`).
* Value reflections go into the grading prompt and into the rubric prompt (``sa_refl_target``
  "both").
* Failures: a request the backend gives up on raises :class:`ValueCallError` naming the role
  (retrying transport failures is the backend's job, :mod:`clew.agents.lm.calls`). A value is
  never silently 0 because of an error.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from clew.agents.fitting import fit
from clew.agents.lm.base import ChatRequest, Completion, LanguageModel, LMError, Sampling
from clew.agents.lm.calls import call
from clew.agents.options import ValueOptions
from clew.agents.parsing import (
    STATUS_LETTERS,
    STATUS_PHRASE,
    parse_rubric,
    parse_status,
    parse_thoughts,
    record,
)
from clew.agents.prompts import Context, rubric_messages, sa_value_messages
from clew.agents.seeds import derive_seed
from clew.agents.usage import UsageByRole

SCALES: dict[str, dict[str, float]] = {
    "unit": {"A": 1.0, "B": 0.9, "C": 0.5, "D": 0.2, "E": 0.0},
    "signed": {"A": 1.0, "B": 0.7, "C": 0.5, "D": -0.2, "E": -1.0},
}


class ValueCallError(LMError):
    """A value-function call failed for good; it never stands in as 0."""


async def value_call(lm: LanguageModel, request: ChatRequest,
                     usage: UsageByRole | None) -> list[Completion]:
    """One value-role request; a backend failure becomes :class:`ValueCallError`."""
    try:
        return await call(lm, request, usage)
    except LMError as exc:
        raise ValueCallError(f"value ({request.role}) call failed: {exc}") from exc


def scale_bounds(scale: str) -> tuple[float, float]:
    """(failure anchor, success anchor) of a scale (docs/methods/rmcts.md#error-attribution)."""
    if scale not in SCALES:
        raise ValueError(f"value.scale must be one of {', '.join(SCALES)}, got {scale!r}")
    return (-1.0 if scale == "signed" else 0.0), 1.0


def from_unit(v: float, scale: str) -> float:
    """A value on the unit scale [0, 1] written on ``scale`` (signed: [-1, 1])."""
    return 2.0 * v - 1.0 if scale == "signed" else v


def aggregate(letters: Sequence[str | None], scale: str,
              parse_failure: str) -> tuple[float | None, int, bool]:
    """Mean mapped value; returns (v, n_parse_fail, all_failed) (docs/methods/debate.md).

    ``all_failed`` is true when no sample was read, an empty list included; ``v`` is then
    ``None`` (unknown) under ``"skip"`` and 0 under ``"zero"``."""
    if parse_failure not in ("skip", "zero"):
        raise ValueError(f"value.parse_failure must be skip|zero, got {parse_failure!r}")
    table = SCALES[scale]
    fails = sum(1 for x in letters if x is None)
    all_failed = fails == len(letters)
    if parse_failure == "zero":
        vals = [table[x] if x else 0.0 for x in letters]
        return (sum(vals) / len(vals) if vals else 0.0), fails, all_failed
    vals = [table[x] for x in letters if x]
    return (sum(vals) / len(vals) if vals else None), fails, all_failed


def observed_score(env: Any, reward_scale: float = 10.0) -> float:
    """What a state is worth from what an agent sees of it, on the unit scale
    (docs/methods/baselines.md#heuristic-roles): where success ends the episode, the env's
    grade (1 on success, else 0); elsewhere the rewards received so far R
    (``env.observed_return()``) as R / (R + ``reward_scale``), 0.5 where the env keeps none.
    The grade of a reward-graded env divides by the best possible return, which only the
    oracle knows, so it is not read there."""
    if env.flags.outcome_mode == "terminal_success":
        return float(env.grade())
    seen = env.observed_return()
    if seen is None:
        return 0.5
    seen = max(float(seen), 0.0)
    return seen / (seen + reward_scale)


@dataclass
class ValueRecord:
    """What one evaluation produced (docs/methods/debate.md); JSON-able via ``to_dict``."""

    v: float | None                 # None: unknown (every sample failed to parse)
    kind: str = "single"
    samples: list[tuple[str | None, str]] = field(default_factory=list)
    n_parse_fail: int = 0
    all_failed: bool = False
    rubric: str | None = None
    debate: dict[str, Any] | None = None
    retrieved_reflection_ids: list[str] = field(default_factory=list)
    retrieved_scores: list[float] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The fields in declaration order, containers copied, ``samples`` as lists.

        Built by hand rather than with ``dataclasses.asdict``: asdict deep-copies every leaf and
        took a quarter of the framework's time per search node (benchmarks/bench_node_overhead.py).
        The output is the same (a test compares it with asdict's).
        """
        return {
            "v": self.v, "kind": self.kind,
            "samples": [list(s) for s in self.samples],
            "n_parse_fail": self.n_parse_fail, "all_failed": self.all_failed,
            "rubric": self.rubric, "debate": _copy(self.debate),
            "retrieved_reflection_ids": list(self.retrieved_reflection_ids),
            "retrieved_scores": list(self.retrieved_scores), "info": _copy(self.info),
        }

    def rationales(self) -> list[tuple[str | None, str]]:
        """(letter, "Thoughts" text) pairs, for EL assessments."""
        return [(letter, parse_thoughts(text)) for letter, text in self.samples]


def _copy(x: Any) -> Any:
    """A copy of nested dicts, lists and tuples (JSON-like data); leaves are shared."""
    if isinstance(x, dict):
        return {k: _copy(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_copy(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_copy(v) for v in x)
    return x


# --- caching ---------------------------------------------------------------------------------
class ValueCache:
    """ValueRecords of identical states within one task (docs/methods/debate.md).

    Key = sha256(task id ‖ canonical actions ‖ final observation ‖ final action ‖ value-config
    hash ‖ ids of the injected reflections).
    """

    def __init__(self) -> None:
        self._store: dict[str, ValueRecord] = {}
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(ctx: Context, config_hash: str, reflection_ids: Sequence[str] = ()) -> str:
        payload = json.dumps([ctx.task_id, ctx.task, list(ctx.actions), ctx.obs, ctx.final_action,
                              config_hash, list(reflection_ids)], ensure_ascii=False)
        return hashlib.sha256(payload.encode()).hexdigest()

    def get(self, key: str) -> ValueRecord | None:
        rec = self._store.get(key)
        if rec is None:
            self.misses += 1
        else:
            self.hits += 1
        return rec

    def put(self, key: str, record: ValueRecord) -> None:
        self._store[key] = record

    def clear(self) -> None:
        self._store.clear()

    def __len__(self) -> int:
        return len(self._store)


def config_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


# --- LM value functions ------------------------------------------------------------------------
class LMValueFunction:
    """What the LM value functions share: the model, the scale, the parse-failure rule, and
    grading samples into a :class:`ValueRecord`."""

    kind = "lm"
    method = "lm"
    uses_oracle = False

    def __init__(self, lm: LanguageModel, options: ValueOptions | None = None):
        self.options = options or ValueOptions()
        self.lm = lm
        self.scale, self.parse_failure = self.options.scale, self.options.parse_failure

    def config_hash(self) -> str:
        section = getattr(self.options, self.method)
        return config_hash([self.method, section.model_dump(), self.scale, self.parse_failure,
                            self.options.constrain, self.lm.spec])

    def grading(self, n: int, seed: int, sampling: dict[str, Any]) -> Sampling:
        """The sampling of a grading request: constrained to a status code when asked."""
        if self.options.constrain:
            return Sampling(n=n, seed=seed, choices=list(STATUS_LETTERS),
                            answer_phrase=STATUS_PHRASE, **sampling)
        return Sampling(n=n, seed=seed, **sampling)

    def grade(self, comps: Sequence[Completion], reflections: Sequence[dict],
              usage: UsageByRole | None = None, role: str = "value",
              **extra: Any) -> ValueRecord:
        """The record of graded samples: mapped letters averaged on the scale."""
        texts = [c.text for c in comps]
        letters = [parse_status(c.text, c.finish_reason) for c in comps]
        record(usage, role, self.lm.spec, [(x is not None, t) for x, t in zip(letters, texts)])
        v, fails, all_failed = aggregate(letters, self.scale, self.parse_failure)
        return ValueRecord(v=v, kind=self.method, samples=list(zip(letters, texts)),
                           n_parse_fail=fails, all_failed=all_failed,
                           retrieved_reflection_ids=[str(r.get("id")) for r in reflections],
                           retrieved_scores=[float(r.get("score", 0.0)) for r in reflections],
                           **extra)


class SingleValue(LMValueFunction):
    """Single-agent multiple-choice value function (``docs/methods/debate.md``)."""

    method = "single"

    def __init__(self, lm: LanguageModel, options: ValueOptions | None = None):
        super().__init__(lm, options)
        single = self.options.single
        self.n, self.window, self.use_rubric = single.n, single.window, single.rubric
        self.sampling = {"temperature": single.temperature, "top_p": single.top_p,
                         "max_tokens": single.max_tokens}
        self._rubrics: dict[str, asyncio.Future[str | None]] = {}

    async def rubric(self, ctx: Context, reflections: Sequence[dict] = (),
                     usage: UsageByRole | None = None) -> str | None:
        """The per-task rubric (one request per task; see the module docstring); None when the
        model's answer holds none. Evaluations in flight together (a wave) share one request:
        the first starts it, the others await it; a failed request is not kept."""
        key = json.dumps([ctx.task_id, ctx.task, ctx.observations[0]])
        task = self._rubrics.get(key)
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = self._rubrics[key] = asyncio.ensure_future(
                self._write_rubric(ctx, reflections, usage))
        return await asyncio.shield(task)

    async def _write_rubric(self, ctx: Context, reflections: Sequence[dict],
                            usage: UsageByRole | None) -> str | None:
        max_tokens = self.sampling["max_tokens"]
        req = ChatRequest(fit(self.lm, max_tokens,
                              lambda keep: rubric_messages(ctx, reflections), 0, "rubric"),
                          Sampling(n=1, temperature=0.7 if reflections else 0.0, top_p=1.0,
                                   max_tokens=max_tokens, seed=derive_seed(ctx.seed, "rubric")),
                          role="rubric")
        comps = await value_call(self.lm, req, usage)
        text, reason = (comps[0].text, comps[0].finish_reason) if comps else ("", None)
        rubric = parse_rubric(text, reason)
        record(usage, "rubric", self.lm.spec, [(rubric is not None, text)])
        return rubric

    async def evaluate(self, ctx: Context, reflections: Sequence[dict] = (),
                       usage: UsageByRole | None = None) -> ValueRecord:
        rubric = await self.rubric(ctx, reflections, usage) if self.use_rubric else None
        messages = fit(self.lm, self.sampling["max_tokens"],
                       lambda keep: sa_value_messages(ctx, self.window, reflections, rubric, keep),
                       len(ctx.actions), "value")
        req = ChatRequest(messages, self.grading(self.n, derive_seed(ctx.seed, "value"),
                                                 self.sampling), role="value")
        comps = await value_call(self.lm, req, usage)
        return self.grade(comps, reflections, usage, "value", rubric=rubric)
