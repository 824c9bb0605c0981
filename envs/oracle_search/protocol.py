"""The budgeted query/feedback protocol shared by HillSearch, TreeSearch and MaxSatSearch.

docs/methods/metric-best-found.md: a hidden, static instance; each *valid* query returns a deterministic value
and uses one unit of the budget N; the episode's score is the best value seen divided by the
instance's optimum (docs/methods/metric-best-found.md#normalised-reward). Families subclass :class:`OracleSearchEnv` and supply parsing,
validation, evaluation and texts.

Validity and retries (docs/methods/envs.md#query-protocol). Invalid attempts (unparsable text, x outside [0, 10], a node that is
not adjacent, a missing variable, ...) never use budget. The env counts them for the whole
episode: attempts 1..20 are *silent* retries (``step.info["retry"] == "silent"``: a chat agent
implementing docs/methods/envs.md#query-protocol discards its response and resamples from the same context), attempts 21..25
are *loud* (``"loud"``: the observation text is the error message to append as a user turn), and
attempt 26 ends the episode (``ended == "retries"``). Both limits are task parameters
(``params["protocol"] = {"silent_retries": 20, "loud_retries": 5}``) so that replaying the actions
(metrics, ``clew score``) reproduces the episode exactly. The observation text of every invalid
step carries the explanation (clew's env contract); only the ``retry`` flag says whether docs/methods/envs.md#query-protocol
shows it to the model. The runner's invalid-streak stop rule (docs/methods/envs.md#episode-rules, default 3) would cut
the 20 silent retries short: run these envs with ``max_invalid_streak=None``
(class attribute :attr:`OracleSearchEnv.max_invalid_streak` says so).

Actions. ``step`` accepts a model's raw answer: the docs/methods/envs.md#query-protocol JSON (``{"reason": ..., "query": {...}}``)
anywhere in prose or code fences, keys in any case, or the canonical text the env itself writes
(``x=1.3``, ``node=17``, ``bits=0101...``). [D] A response truncated after a complete ``query``
object is accepted (its query is unambiguous); truncated before it, it is invalid.
``stop`` (canonical ``STOP``) ends the episode early with the best value so far (docs/methods/metric-best-found.md#decisions "score of an
early-terminated episode"); it is not announced to models and exists for wrappers such as the
parallel-threads intervention that finish before the budget is spent.

Rewards. ``Step.reward`` is the increase of the normalised best-found value, so the return of an
episode equals its normalised reward r = R / OPT at every point, and ``grade()`` is r.

Flags: queries cannot be taken back (no backtrack), the outcome is graded at the end, and a
simulated query would reveal hidden values, so simulation is charged (docs/methods/envs.md#env-capabilities).

Randomness. Only the *order* of id lists (TreeSearch) is random. Each shuffle uses a
``random.Random`` derived from (env ``seed`` option, task seed, step, purpose), so shuffles are a
pure function of the position in the episode: snapshot/restore and replay stay byte-identical and
calling :meth:`handoff_message` changes nothing.
"""

from __future__ import annotations

import copy
import math
import random
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, ClassVar

from clew.envs.answers import json_objects, regions
from clew.envs.base import Env, EnvFlags, Observation, Step, Task
from clew.envs.oracle_search import prompts

STOP = "STOP"
SILENT_RETRIES = 20
LOUD_RETRIES = 5


@dataclass
class SearchState:
    """Everything that changes during an episode (deep-copied by snapshot)."""

    steps: int = 0                     # valid queries used: the budget clock
    history: list[tuple[Any, float]] = field(default_factory=list)  # (query, exact value)
    best: float = 0.0                  # all values are >= 0; nothing queried scores 0 (docs/methods/envs.md#query-protocol)
    invalid: int = 0                   # invalid attempts so far (docs/methods/envs.md#query-protocol counters)
    done: bool = False
    ended: str = ""                    # "budget" | "retries" | "stop"
    obs: Observation = field(default_factory=lambda: Observation(""))
    extra: dict[str, Any] = field(default_factory=dict)  # family state (TreeSearch: known set)


class OracleSearchEnv(Env):
    """Base of the three query-budget envs (docs/methods/envs.md#oracle-search-tasks interface mapped onto clew's Env).

    Subclasses implement: ``_load(task)``, ``_parse(text) -> (query | None, error)``,
    ``_validate(query) -> error | None``, ``_evaluate(query) -> float``, ``_canon(query) -> str``,
    ``_shown(value)`` (the value as printed), ``_feedback(query, value)``, ``_first_text()``,
    ``instructions``, ``handoff_message`` and ``optimum``.
    """

    flags: ClassVar[EnvFlags] = EnvFlags(
        deterministic=True, supports_backtrack=False, outcome_mode="graded_at_end",
        simulation_mode="charged", repeat_rule_applies=False)
    #: the runner's invalid-streak rule must be off: docs/methods/envs.md#query-protocol allows 20 silent + 5 loud retries
    max_invalid_streak: ClassVar[int | None] = None

    def __init__(self, seed: int = 0, handoff_include_graph: bool = False):
        self.seed = int(seed)
        self.handoff_include_graph = bool(handoff_include_graph)
        self.state: SearchState = SearchState()
        self.n_queries = 0
        self.silent_retries = SILENT_RETRIES
        self.loud_retries = LOUD_RETRIES

    # --- loading -------------------------------------------------------------------------
    def reset(self, task: Task) -> Observation:
        if task.env != self.name:
            raise ValueError(f"{self.name}: task {task.id!r} belongs to env {task.env!r}")
        params = task.params
        self.task = task
        self.n_queries = _positive_int(params.get("budget"),
                                       f"task {task.id!r} params.budget")
        proto = params.get("protocol", {}) or {}
        unknown = set(proto) - {"silent_retries", "loud_retries"}
        if unknown:
            raise ValueError(f"task {task.id!r} params.protocol has unknown key(s) {sorted(unknown)}")
        self.silent_retries = _nonneg_int(proto.get("silent_retries", SILENT_RETRIES),
                                          f"task {task.id!r} params.protocol.silent_retries")
        self.loud_retries = _nonneg_int(proto.get("loud_retries", LOUD_RETRIES),
                                        f"task {task.id!r} params.protocol.loud_retries")
        self._load(task)
        self.state = SearchState()
        self._init_extra()
        text = self._first_text()
        self.state.obs = Observation(text, {"budget": self.n_queries,
                                            "remaining": self.n_queries, "family": self.family})
        return self.state.obs

    # --- the loop ------------------------------------------------------------------------
    def step(self, action: str) -> Step:
        st = self.state
        if st.done:
            obs = Observation("The episode is over; no more queries are accepted.",
                              {"remaining": self.remaining})
            return Step(obs, 0.0, True, False, {"error": "episode over"})
        if self.is_stop(action):
            st.done, st.ended = True, "stop"
            st.obs = Observation(f"Stopped with {self.remaining} queries unused.",
                                 {"remaining": self.remaining, "best": self._shown(st.best)})
            return Step(st.obs, 0.0, True, True, {"stopped": True})
        query, error = self.read(str(action))
        if query is not None and error is None:
            error = self._validate(query)
        if error is not None:
            return self._invalid(error)
        value = float(self._evaluate(query))
        opt = self.optimum
        old = st.best
        st.steps += 1
        st.history.append((query, value))
        st.best = max(st.best, value)
        if self.remaining == 0:
            st.done, st.ended = True, "budget"
        self._after_valid(query)
        text = self._feedback(query, value)
        st.obs = Observation(text, {
            "query": self._canon(query), "value": self._shown(value),
            "best": self._shown(st.best), "remaining": self.remaining})
        reward = (st.best - old) / opt if opt > 0 else 0.0
        return Step(st.obs, reward, st.done, True,
                    {"query": self._canon(query), "value": self._shown(value)})

    def _invalid(self, error: str) -> Step:
        st = self.state
        st.invalid += 1
        if st.invalid <= self.silent_retries:
            retry = "silent"
        elif st.invalid <= self.silent_retries + self.loud_retries:
            retry = "loud"
        else:
            retry = "end"
            st.done, st.ended = True, "retries"
        text = prompts.invalid_feedback(error)
        if retry == "end":
            text = (f"Invalid query: {error}. Too many invalid responses "
                    f"({st.invalid}); the episode ends.")
        st.obs = Observation(text, {"error": error, "retry": retry, "remaining": self.remaining})
        return Step(st.obs, 0.0, st.done, False,
                    {"error": error, "retry": retry, "invalid_attempts": st.invalid})

    def observation(self) -> Observation:
        return self.state.obs

    def read(self, text: str) -> tuple[Any, str | None]:
        """The query a reply names: the family's ``_parse`` on each answer region of
        :func:`clew.envs.answers.regions` in turn (after the last answer label, the last fence,
        the whole reply); the first region's error when none holds a query."""
        first_error = None
        for region in regions(text):
            query, error = self._parse(region)
            if query is not None and error is None:
                return query, None
            first_error = first_error or error
        return None, first_error or "no answer after the reasoning block"

    # --- facts ---------------------------------------------------------------------------
    def budget(self) -> int:
        """The task's query budget N (Env.budget)."""
        return self.n_queries

    @property
    def remaining(self) -> int:
        return self.n_queries - self.state.steps

    @property
    def best_value(self) -> float:
        return self.state.best

    @property
    def optimum(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def ended(self) -> str:
        return self.state.ended

    def history(self) -> list[tuple[Any, float]]:
        """Valid queries and their values *as shown to the agent* (what a baseline may use)."""
        return [(q, self._shown(v)) for q, v in self.state.history]

    def grade(self) -> float:
        """Normalised best-found reward r = R / OPT (docs/methods/metric-best-found.md#normalised-reward)."""
        opt = self.optimum
        return self.state.best / opt if opt > 0 else 0.0

    def oracle(self) -> dict[str, Any]:
        return {"optimum": self.optimum}

    def is_stop(self, action: str) -> bool:
        return str(action).strip().strip("`'\".").upper() == STOP

    def parse_action(self, text: str) -> str | None:
        if self.is_stop(text):
            return STOP
        query, error = self.read(str(text))
        return None if query is None or error is not None else self._canon(query)

    def canonical(self, action: str) -> str:
        parsed = self.parse_action(action)
        return parsed if parsed is not None else str(action).strip()

    def answered(self, action: str) -> bool:
        """Whether ``action``'s answer is already known here and asking again would be invalid
        (TreeSearch: a known node). Hill and MaxSat repeats are valid queries, so False."""
        return False

    # --- texts: the family's own prompts (:mod:`.prompts`) -----------------------------------
    #: how one query is written, and the query grammar (families whose texts depend on the task
    #: override :meth:`answer_format` / :meth:`action_help` instead)
    answer_text: ClassVar[str] = ""
    help_text: ClassVar[str] = ""

    def system_prompt(self) -> str:  # pragma: no cover - abstract
        """The family's system prompt (task, protocol and reply format)."""
        raise NotImplementedError

    def instructions(self, variant: str = "default") -> str:
        check_variant(variant)
        return self.system_prompt()

    def task_description(self, variant: str = "default") -> str:
        return prompts.task_part(self.instructions(variant))

    def answer_format(self) -> str:
        return self.answer_text

    def action_help(self) -> str:
        return self.help_text

    def response_schema(self) -> dict[str, Any]:  # pragma: no cover - abstract
        """The docs/methods/envs.md#query-protocol JSON schema for structured output."""
        raise NotImplementedError

    def handoff_message(self) -> str:  # pragma: no cover - abstract
        """The docs/methods/interventions.md#summary-hand-off templated hand-off built from the whole episode log."""
        raise NotImplementedError

    def copy(self) -> OracleSearchEnv:
        other = copy.copy(self)
        other.state = copy.deepcopy(self.state)
        return other

    # --- hooks -------------------------------------------------------------------------------
    def _init_extra(self) -> None:
        return None

    def _after_valid(self, query: Any) -> None:
        return None

    def _rng(self, purpose: str, step: int | None = None) -> random.Random:
        """A shuffle rng that is a pure function of the position in the episode."""
        t = self.state.steps if step is None else step
        key = f"{self.seed}:{self.task.seed}:{self.task.id}:{t}:{purpose}"
        return random.Random(zlib.crc32(key.encode()))


# --- tolerant parsing helpers -------------------------------------------------------------------

def lower_keys(obj: dict[str, Any]) -> dict[str, Any]:
    return {str(k).strip().lower(): v for k, v in obj.items()}


def find_query(text: str, looks_like_query) -> dict[str, Any] | None:
    """The query object of a docs/methods/envs.md#query-protocol answer: the last ``"query"`` object, else the last object that
    ``looks_like_query`` accepts (a bare query object)."""
    objs = [lower_keys(o) for o in json_objects(text)]
    for obj in reversed(objs):
        q = obj.get("query")
        if isinstance(q, dict):
            return lower_keys(q)
    for obj in reversed(objs):
        if looks_like_query(obj):
            return obj
    return None


def strip_fences(text: str) -> str:
    return text.replace("```json", " ").replace("```JSON", " ").replace("```", " ").strip()


def last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last match of ``pattern`` in ``text`` (the last explicit answer wins)."""
    found = None
    for found in pattern.finditer(text):
        pass
    return found


def as_number(value: Any) -> float | None:
    """A finite real from a JSON number or a numeric string; ``None`` otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        x = float(value)
    elif isinstance(value, str):
        try:
            x = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return x if math.isfinite(x) else None


def check_variant(variant: str) -> None:
    """The envs have one instructions variant, the docs/methods/envs.md#query-protocol prompt."""
    if variant != "default":
        raise ValueError(f"unknown instructions variant {variant!r}; known: default")


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where} must be a positive integer, got {value!r}")
    return value


def _nonneg_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where} must be a non-negative integer, got {value!r}")
    return value


def generator_config(env: str, params: dict[str, Any], defaults: dict[str, Any],
                     fixed: dict[str, dict[str, Any]]
                     ) -> tuple[dict[str, Any], dict[str, Any], str, str]:
    """A generator's settings from its ``params``: ``defaults``, then the named fixed
    ``instance``'s values, then the given ones; with the given parameters, the task id and the
    split. A name the generator does not know, or an unknown instance, is an error naming it."""
    given = dict(params)
    task_id, split = str(given.pop("id", "")), str(given.pop("split", "test"))
    known = set(defaults) | {"instance", "protocol"}
    unknown = set(given) - known
    if unknown:
        raise ValueError(f"{env} generator: unknown parameter(s) {sorted(unknown)}; "
                         f"known: {sorted(known)}")
    cfg = dict(defaults)
    if "instance" in given:
        if given["instance"] not in fixed:
            raise ValueError(f"{env}: unknown instance {given['instance']!r}; "
                             f"known: {sorted(fixed)}")
        cfg.update(fixed[given["instance"]])
    cfg.update({k: v for k, v in given.items() if k not in ("instance", "protocol")})
    return cfg, given, task_id, split


def read_number(text: str, key: str, labelled: re.Pattern[str], bare: str, example: str,
                integer: bool = False) -> tuple[float | int | None, str | None]:
    """A query that is one number, from a reply: the query object's ``key``, else the last
    ``labelled`` match (``key=...``), else the whole reply as a ``bare`` number; ``(None, what
    went wrong)`` otherwise, the message saying how to write one (``example``)."""
    text = strip_fences(text)
    q = find_query(text, lambda o: key in o)
    if q is not None:
        if key not in q:
            return None, f"the query object must contain the key \"{key}\""
        x = as_number(q[key])
        if integer:
            if x is None or not float(x).is_integer():
                return None, f"{key} must be an integer id, got {q[key]!r}"
            return int(x), None
        if x is None:
            return None, f"{key} must be a finite number, got {q[key]!r}"
        return x, None
    m = last_match(labelled, text) or re.fullmatch(bare, text)
    if m is None:
        return None, ('could not read a query; answer with {"reason": "...", '
                      f'"query": {{"{key}": {example}}}}}')
    return (int if integer else float)(m.group(1)), None


def finish_task(env: str, params: dict[str, Any], given: dict[str, Any], cfg: dict[str, Any],
                defaults: dict[str, Any], seed: int, task_id: str, split: str) -> Task:
    """A generated task: its instance ``params`` with the budget, the generator settings that
    made it, and the fixed instance and protocol it was asked for (:func:`generator_config`)."""
    out: dict[str, Any] = {**params, "budget": cfg["budget"],
                           "generator": {k: cfg[k] for k in defaults if k != "budget"}}
    for key in ("instance", "protocol"):
        if key in given:
            out[key] = given[key]
    return Task(env=env, params=out, seed=seed, id=task_id, split=split)
