"""Run directories to EL / IL training datasets (docs/methods/exploratory-learning.md#episode-selection; docs/architecture.md#data-on-disk).

``build_datasets(DataConfig)`` reads one or more run directories (``runs/NAME/episodes.jsonl``
and ``runs/NAME/trees/<episode key>/<step>.json.gz``), selects episodes, exports each with
:func:`clew.training.flatten.export_episode`, and returns Hugging Face ``datasets.Dataset``
objects with a ``messages`` column in chat format plus metadata columns:

* ``el``: Exploratory Learning samples;
* ``il_all``: Imitation Learning samples of every selected episode (the paper's IL);
* ``il_matched``: IL samples of exactly the episodes that gave EL data (the code's IL), so EL
  and IL can be compared on equal task sets (docs/methods/exploratory-learning.md#episode-selection);
* ``pairs`` and ``values``: step-level preference pairs (TRL's conversational preference format)
  and value targets from every episode's trees (:mod:`clew.training.preferences`,
  docs/methods/exploratory-learning.md#preference-pairs-and-dpo); their own columns, one JSONL
  shape;
* ``value_sft``: chats that train a value model on the search's own estimates, or on how the
  episode ended (``value_target``; not built unless
  asked for; :func:`clew.training.preferences.value_sft_rows`,
  docs/methods/exploratory-learning.md#learned-value), chat columns plus ``target``, ``node``,
  ``depth``; the rows left out are counted by reason in the report's ``value_sft_skipped``.

Every assistant message carries ``weight`` (0 or 1, the OpenAI fine-tuning convention); other
messages have ``weight`` null. Metadata columns: ``task_id``, ``env``, ``source_run``,
``episode``, ``agent``, ``kind`` (el | il), ``subset``, ``turn_index``, ``n_backtracks``,
``selected_by``.

Decisions: episodes are selected by ground-truth success by default (``select_by: gt``):
``outcome.success``, or ``outcome.grade >= select_min_grade`` (default 1) where success is
undefined, with a cut per env name in ``env_select_min_grade``. ``select_by: est``
selects by the agent's own estimate, ``outcome.success_est``, which search agents record (mean Q
of the executed steps above the reflection threshold, docs/methods/rmcts.md#success-estimate);
an episode without one is an error naming it. The ``selected_by`` column says which rule
chose the episode. No subsampling by default.
Episodes that cannot be exported are skipped and counted by reason in the report, never silently:
``el_skipped`` / ``il_skipped`` count them by reason (numbers replaced by ``N``, so equal reasons
group), ``el_skipped_examples`` / ``il_skipped_examples`` keep up to
:data:`EXAMPLES_PER_REASON` full messages per reason (with their numbers and episode keys). An
unreadable tree file costs its episode's EL data only (IL needs no tree); a record that cannot
be rebuilt into a task is skipped whole (``unreadable_records``). Run directories are read
through :class:`clew.records.RunDir`, as ``clew eval --resume``, ``clew report`` and
``clew merge`` read them (a torn last line is dropped with a warning).

An empty subset is not a success: ``clew data`` writes what it has, warns with the reasons and
the option that would help, and exits non-zero unless ``allow_empty``.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from clew.agents.window import ChatWindow
from clew.envs.base import Task
from clew.envs.registry import ENVS, make_for
from clew.records import RunDir, atomic_write_text, write_atomic
from clew.records.compat import move_renamed
from clew.records.jsonl import RecordError, numbered_jsonl
from clew.search.tree import TreeFormatError, read_trees
from clew.training.flatten import EpisodeExport, ExportOptions, Sample, export_episode
from clew.training.preferences import PairOptions, episode_rows, value_sft_rows
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from tqdm import tqdm

SUBSETS = ("el", "il_all", "il_matched")
EXAMPLES_PER_REASON = 3
#: subsets from the search's estimates rather than chats (:mod:`clew.training.preferences`)
TREE_SUBSETS = ("pairs", "values")
#: chats from the value rows (:func:`clew.training.preferences.value_sft_rows`)
VALUE_SUBSET = "value_sft"
EXPORT_FORMATS = ("chat", "openai", "prompt_completion", "context_response")


class DataConfig(BaseModel):
    """What ``clew data`` builds (the ``el`` block of docs/methods/exploratory-learning.md, plus I/O)."""

    model_config = ConfigDict(extra="forbid")

    runs: list[str] = Field(..., min_length=1, description="run directories to read")
    out: str | None = Field(None, description="output folder (datasets + JSONL + report)")
    success_only: bool = True
    select_by: Literal["gt", "est"] = "gt"
    select_min_grade: float = Field(
        1.0, ge=0.0, le=1.0, description="with select_by gt: the grade that counts as success "
                                         "where an env has no success flag (rooms)")
    env_select_min_grade: dict[str, Annotated[float, Field(ge=0.0, le=1.0)]] = Field(
        default_factory=dict, description="per env name, the grade cut instead of "
                                          "select_min_grade (envs whose searches reach "
                                          "different grades)")
    el_max_actions: int | None = Field(20, ge=1)
    el_traversals: Literal["all", "dead_ends", "detours"] = Field(
        "all", description="the traversals before the executed one that EL keeps: all, or "
                           "those that met a dead end (docs/methods/exploratory-learning.md#dead-ends); "
                           "or no tree at all: the hindsight shortcut with the detours the "
                           "episode walked, each left by a backtrack "
                           "(docs/methods/exploratory-learning.md#hindsight-paths)")
    dead_end_margin: float = Field(0.1, ge=0.0, le=1.0, description=(
        "with el_traversals dead_ends: how far below the state it left a branch must end"))
    el_over_budget: Literal["skip", "cut"] = Field("skip", description=(
        "an EL trajectory longer than the env's step budget: skip the episode, or cut it where "
        "the budget runs out (docs/methods/exploratory-learning.md#teacher-forcing)"))
    el_dead_ends: bool = Field(False, description=(
        "with el_traversals detours: also enter each one-move dead end next to the shortcut, "
        "found in the simulator, and backtrack out of it "
        "(docs/methods/exploratory-learning.md#dead-ends-next-to-the-path)"))
    el_back_one: Literal["id", "bare"] = Field("id", description=(
        "how an EL backtrack to the state just before is written: backtrack S<k>, or the bare "
        "backtrack, which names no id (docs/methods/exploratory-learning.md#backtrack-turns)"))
    el_undone: Literal["train", "skip"] = Field("train", description=(
        "the EL moves a later backtrack undid (into a detour or a dead end): targets like the "
        "others, or context only, so that EL learns to leave a wrong branch, not to enter it "
        "(docs/methods/exploratory-learning.md#undone-moves)"))
    il_max_actions: int | None = Field(None, ge=1)
    il_path: Literal["executed", "shortcut"] = Field("executed", description=(
        "what IL imitates: the executed actions, or the shortest path through the states the "
        "episode visited (docs/methods/exploratory-learning.md#hindsight-paths)"))
    assessment_value: Literal["both", "text", "number"] = "both"
    sample_mode: Literal["prefix_last", "full"] = "prefix_last"
    window: ChatWindow = Field(
        default_factory=ChatWindow, description="the turns a sample keeps; the distilled agent "
                                                "that answers on the data sends the same window")
    env_window: dict[str, ChatWindow] = Field(
        default_factory=dict, description="per env name, the window its samples keep instead "
                                          "(e.g. more turns where one observation does not show "
                                          "enough)")
    strict_replay: bool = False
    env_options: dict[str, Any] = Field(default_factory=dict)
    subsets: list[Literal["el", "il_all", "il_matched", "pairs", "values", "value_sft"]] = Field(
        default_factory=lambda: [*SUBSETS, *TREE_SUBSETS])
    pair_margin: float = Field(0.1, ge=0.0, le=1.0,
                               description="least Q gap of a pair, on the unit value scale")
    pair_min_visits: int = Field(2, ge=1, description="least visits of each edge of a pair")
    value_min_visits: int = Field(1, ge=1, description="least visits behind a value row's q")
    value_target: Literal["q", "v", "outcome"] = Field(
        "q", description="what value_sft grades: q (the backed-up mean, else v), v (the value "
                         "function's estimate) or outcome (an executed state's discounted "
                         "success, in hindsight)")
    value_discount: float = Field(0.95, gt=0, le=1,
                                  description="per step left, for value_target outcome")
    formats: list[Literal["chat", "openai", "prompt_completion", "context_response"]] = Field(
        default_factory=lambda: ["chat"])
    allow_empty: bool = Field(False, description="an empty subset is not an error")

    #: the chat window's fields before it had one (read with a warning)
    RENAMED: ClassVar[dict[str, str]] = {
        "elide_keep_first_pairs": "window.keep_first_pairs",
        "elide_keep_last_pairs": "window.keep_last_pairs",
        "elide_keep_system": "window.keep_system",
        "env_history": "env_window",
    }

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return move_renamed(data, cls.RENAMED, "data: ")

    @field_validator("env_select_min_grade")
    @classmethod
    def _known_envs(cls, cuts: dict[str, float]) -> dict[str, float]:
        # a misspelt name would select nothing differently, silently
        unknown = sorted(set(cuts) - set(ENVS))
        if unknown:
            raise ValueError(f"unknown env(s) {', '.join(map(repr, unknown))}; known: "
                             f"{', '.join(sorted(ENVS))}")
        return cuts

    @model_validator(mode="after")
    def _undone_needs_prefixes(self) -> DataConfig:
        if self.el_undone == "skip" and self.sample_mode != "prefix_last":
            raise ValueError("el_undone: skip needs sample_mode prefix_last (in a full sample "
                             "an unweighted turn cannot follow a weighted one)")
        return self

    def min_grade_of(self, env: str) -> float:
        """The grade cut of ``env``'s episodes: its ``env_select_min_grade`` entry, else
        ``select_min_grade``."""
        return self.env_select_min_grade.get(env, self.select_min_grade)

    def window_of(self, env: str) -> ChatWindow:
        """The window of ``env``'s samples: its ``env_window`` entry, else ``window``."""
        return self.env_window.get(env) or self.window

    def export_options(self, env: str = "") -> ExportOptions:
        return ExportOptions(
            el_max_actions=self.el_max_actions, assessment_value=self.assessment_value,
            sample_mode=self.sample_mode, window=self.window_of(env),
            strict_replay=self.strict_replay, el_traversals=self.el_traversals,
            dead_end_margin=self.dead_end_margin, el_over_budget=self.el_over_budget,
            il_path=self.il_path, el_dead_ends=self.el_dead_ends, el_back_one=self.el_back_one,
            el_undone=self.el_undone)

    def pair_options(self, env: str = "") -> PairOptions:
        return PairOptions(self.pair_margin, self.pair_min_visits, self.value_min_visits,
                           self.window_of(env))

    def digest(self) -> str:
        # a field at its default that older configs lacked stays out, so their digests hold
        old = {k for k, v in (("env_window", {}), ("env_select_min_grade", {}),
                              ("el_traversals", "all"), ("dead_end_margin", 0.1),
                              ("el_over_budget", "skip"), ("il_path", "executed"),
                              ("el_dead_ends", False), ("el_back_one", "id"),
                              ("el_undone", "train"))
               if getattr(self, k) == v}
        if VALUE_SUBSET not in self.subsets and self.value_target == "q":
            old.add("value_target")
        if self.value_target != "outcome" and self.value_discount == 0.95:
            old.add("value_discount")
        dump = self.model_dump(exclude={"out", "allow_empty", *old})
        for window in (dump["window"], *dump.get("env_window", {}).values()):
            if not window["trail"]:
                del window["trail"]
        blob = json.dumps(dump, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


# --- reading runs -------------------------------------------------------------------------------
def read_episodes(run: str | Path) -> list[dict[str, Any]]:
    """The finished episodes of a run directory, read like every reader of runs reads them
    (:meth:`clew.records.RunDir.episodes`: a torn last line is dropped with a warning); a record
    without the fields export needs is an error naming the file and episode."""
    run_dir = RunDir(run)
    if not run_dir.episodes_file.exists():
        raise FileNotFoundError(f"{run} is not a run directory (no episodes.jsonl)")
    return run_dir.episodes()


def _unreadable(rec: dict[str, Any]) -> str | None:
    """Why a record cannot be exported at all (None: it can be tried)."""
    missing = [k for k in ("key", "task", "actions") if k not in rec]
    if missing:
        return f"no {', '.join(map(repr, missing))}"
    try:
        Task.from_dict(rec["task"])
    except (KeyError, TypeError, ValueError) as exc:
        return f"the task cannot be rebuilt ({type(exc).__name__}: {exc})"
    return None


def is_selected(record: dict[str, Any], by: str = "gt", min_grade: float = 1.0) -> bool:
    """Successful episode by ground truth, or by the agent's estimate (``by="est"``;
    docs/methods/exploratory-learning.md). An env without a success flag (rooms: normalised
    reward) counts as successful when its grade reaches ``min_grade``."""
    outcome = record.get("outcome") or {}
    if by == "est":
        if outcome.get("success_est") is None:
            raise RecordError(f"episode {record.get('key')!r} records no success estimate "
                             f"(outcome.success_est; search agents record one): use select_by: gt")
        return bool(outcome["success_est"])
    if outcome.get("success") is not None:
        return bool(outcome["success"])
    return float(outcome.get("grade") or 0.0) >= min_grade


# --- building -----------------------------------------------------------------------------------
def _meta(record: dict[str, Any], run: str) -> dict[str, Any]:
    task = record["task"]
    return {"task_id": str(task.get("id", "")), "env": str(task.get("env", "")),
            "source_run": run, "episode": str(record["key"]),
            "agent": str(record.get("agent", ""))}


def _rows(samples: list[Sample], record: dict[str, Any], run: str, kind: str,
          subset: str, selected_by: str = "gt") -> list[dict[str, Any]]:
    task = record["task"]
    rows = []
    for s in samples:
        rows.append({
            "messages": [{"role": m["role"], "content": m["content"],
                          "weight": m.get("weight")} for m in s.messages],
            "task_id": str(task.get("id", "")), "env": str(task.get("env", "")),
            "source_run": run, "episode": str(record["key"]),
            "agent": str(record.get("agent", "")), "kind": kind, "subset": subset,
            "turn_index": s.turn_index, "n_backtracks": s.n_backtracks,
            "selected_by": selected_by,
        })
    return rows


def features():
    from datasets import Features, List, Value

    message = {"role": Value("string"), "content": Value("string"), "weight": Value("int64")}
    return Features({
        "messages": List(message), "task_id": Value("string"), "env": Value("string"),
        "source_run": Value("string"), "episode": Value("string"), "agent": Value("string"),
        "kind": Value("string"), "subset": Value("string"), "turn_index": Value("int64"),
        "n_backtracks": Value("int64"), "selected_by": Value("string"),
    })


def value_features():
    """The ``value_sft`` columns: the chat columns, the target and the tree node."""
    from datasets import Features, Value

    return Features({**features(), "target": Value("float64"), "node": Value("int64"),
                     "depth": Value("int64")})


def build_datasets(cfg: DataConfig, progress: bool = False) -> tuple[dict[str, Any], dict]:
    """Datasets by subset name, and the export report (counts, skip reasons)."""
    from datasets import Dataset

    rows: dict[str, list[dict[str, Any]]] = {s: [] for s in SUBSETS}
    report: dict[str, Any] = {"config_hash": cfg.digest(), "episodes": 0, "selected": 0,
                              "el_episodes": 0, "il_episodes": 0,
                              "el_skipped": Counter(), "il_skipped": Counter(),
                              "el_skipped_examples": {}, "il_skipped_examples": {},
                              "unreadable_records": [], "unreadable_trees": [],
                              "counts": Counter(), "el_actions": [],
                              "el_max_actions": cfg.el_max_actions}
    def skip(kind: str, record: dict[str, Any], why: str) -> None:
        reason = _reason(why)
        report[f"{kind}_skipped"][reason] += 1
        examples = report[f"{kind}_skipped_examples"].setdefault(reason, [])
        if len(examples) < EXAMPLES_PER_REASON:
            examples.append(f"{record.get('key')}: {why}")

    tree_rows: dict[str, list[dict[str, Any]]] = {s: [] for s in TREE_SUBSETS}
    tree_counts: Counter = Counter()
    want_tree_rows = any(s in cfg.subsets for s in (*TREE_SUBSETS, VALUE_SUBSET))
    for run in cfg.runs:
        episodes = read_episodes(run)
        # in key order, not the order episodes finished (concurrency): the same runs give the
        # same rows in the same order, so a seeded training run sees the same batches
        in_key_order = sorted(enumerate(episodes, 1), key=lambda e: str(e[1].get("key", "")))
        for i, record in _progress(in_key_order, progress, run):
            report["episodes"] += 1
            bad = _unreadable(record)
            if bad:
                report["unreadable_records"].append(f"{run}: episode record {i}: {bad}")
                continue
            task = Task.from_dict(record["task"])
            try:
                trees = read_trees(run, record["key"])
            except TreeFormatError as exc:  # that episode has no tree data; the rest goes on
                report["unreadable_trees"].append(str(exc))
                trees, tree_error = {}, f"unreadable tree: {exc}"
            else:
                tree_error = None

            # the env the run played (its record's options), then the data config's on top
            opts = {**(record.get("env_options") or {}), **cfg.env_options}

            def make_env(task=task, opts=opts):
                return make_for(task, **opts)
            if want_tree_rows and not tree_error:  # every episode: Q and V do not depend on the
                more = episode_rows(record, trees, make_env, cfg.pair_options(task.env),  # outcome
                                    _meta(record, str(run)))
                tree_rows["pairs"] += more.pairs
                tree_rows["values"] += more.values
                tree_counts.update(more.counts)
            if cfg.success_only and not is_selected(record, cfg.select_by,
                                                    cfg.min_grade_of(task.env)):
                continue
            report["selected"] += 1
            out: EpisodeExport = export_episode(record, trees, make_env,
                                                options=cfg.export_options(task.env))
            if tree_error:
                out.el, out.el_skipped = [], tree_error
            if cfg.il_max_actions is not None and len(record["actions"]) > cfg.il_max_actions:
                out.il, out.il_skipped = [], (f"too long ({len(record['actions'])} > "
                                              f"il_max_actions {cfg.il_max_actions})")
            report["counts"].update(out.counts)
            if out.el_actions is not None:
                report["el_actions"].append(out.el_actions)
            if out.il_skipped:
                skip("il", record, out.il_skipped)
            else:
                report["il_episodes"] += 1
                rows["il_all"] += _rows(out.il, record, str(run), "il", "il_all", cfg.select_by)
            if out.el_skipped:
                skip("el", record, out.el_skipped)
                continue
            report["el_episodes"] += 1
            rows["el"] += _rows(out.el, record, str(run), "el", "el", cfg.select_by)
            if not out.il_skipped:
                rows["il_matched"] += _rows(out.il, record, str(run), "il", "il_matched",
                                            cfg.select_by)
    if report["unreadable_records"]:
        print(f"warning: {len(report['unreadable_records'])} episode record(s) cannot be "
              f"exported: {report['unreadable_records'][0]}", file=sys.stderr)
    feats = features()
    datasets = {name: Dataset.from_list(rows[name], features=feats) if rows[name] else
                Dataset.from_dict({k: [] for k in feats}, features=feats)  # keeps the schema
                for name in cfg.subsets if name in SUBSETS}
    for name in TREE_SUBSETS:
        if name in cfg.subsets:
            datasets[name] = Dataset.from_list(tree_rows[name])
    if VALUE_SUBSET in cfg.subsets:
        value_rows, value_skipped = value_sft_rows(tree_rows["values"], cfg.value_target,
                                                     cfg.value_discount)
        datasets[VALUE_SUBSET] = Dataset.from_list(value_rows, features=value_features()) \
            if value_rows else Dataset.from_dict({k: [] for k in value_features()},
                                                 features=value_features())
        report["value_sft_skipped"] = dict(value_skipped)
    report["tree_rows"] = dict(tree_counts)
    report["samples"] = {name: len(ds) for name, ds in datasets.items()}
    for key in ("el_skipped", "il_skipped", "counts"):
        report[key] = dict(report[key])
    return datasets, report


def _reason(text: str) -> str:
    """Group skip reasons: numbers become N and quoted values '...' (the full messages, with
    their numbers, are kept as examples)."""
    text = re.sub(r"unreadable tree: .*", "unreadable tree", text)
    return re.sub(r"\d+(\.\d+)?", "N", re.sub(r"'[^']*'", "'...'", text))


def empty_subsets(cfg: DataConfig, report: dict[str, Any],
                  names=(*SUBSETS, VALUE_SUBSET)) -> list[str]:
    """The subsets among ``names`` (the chat subsets unless told) that got no sample."""
    return [name for name, n in report["samples"].items() if n == 0 and name in names]


def empty_hint(cfg: DataConfig, report: dict[str, Any]) -> str:
    """What would fill an empty EL subset: the option, with a value that helps."""
    reasons = report["el_skipped"]
    if any(r.startswith("too long") for r in reasons) and cfg.el_max_actions is not None:
        longest = max(report["el_actions"], default=cfg.el_max_actions)
        return (f"raise el_max_actions (now {cfg.el_max_actions}; the skipped trajectories "
                f"have up to {longest} actions), e.g. el_max_actions={longest}")
    if report["selected"] == 0:
        return ("no episode was successful (success_only=true selects successful episodes; "
                "success_only=false exports the others too)")
    if "no search trees" in reasons:
        return "the runs have no search trees: run a search agent (clew search)"
    return "see the skip reasons above"


def _progress(items, enabled: bool, name: str):
    if not enabled:
        return items
    return tqdm(items, desc=f"export {Path(name).name}", unit="ep", leave=False)


# --- writing and reading ------------------------------------------------------------------------
def to_export(row: dict[str, Any], fmt: str) -> dict[str, Any]:
    """One JSONL line. ``chat``: docs/methods/exploratory-learning.md#samples-and-loss-weights (messages with weights on assistant turns, meta);
    ``openai``: the same messages and nothing else (OpenAI fine-tuning files);
    ``prompt_completion``: TRL's conversational prompt/completion pair (last turn the target);
    ``context_response``: the authors' released shape (context, response, metadata)."""
    msgs = [{k: v for k, v in m.items() if v is not None} for m in row["messages"]]
    meta = {k: v for k, v in row.items() if k != "messages"}
    if fmt == "chat":
        return {"messages": msgs, "meta": meta}
    if fmt == "openai":
        return {"messages": msgs}
    context = [{"role": m["role"], "content": m["content"]} for m in msgs[:-1]]
    if fmt == "prompt_completion":
        return {"prompt": context, "completion": [{"role": "assistant",
                                                   "content": msgs[-1]["content"]}], **meta}
    if fmt == "context_response":
        return {"context": context, "response": msgs[-1]["content"], "metadata": meta}
    raise ValueError(f"unknown export format {fmt!r}; known: {', '.join(EXPORT_FORMATS)}")


def save_datasets(datasets: dict[str, Any], report: dict[str, Any], out: str | Path,
                  formats: list[str] = ("chat",)) -> Path:
    """``out/NAME/`` (``save_to_disk``), ``out/NAME.jsonl`` (and ``NAME.<fmt>.jsonl`` for the
    other formats), ``out/export_report.json``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, ds in datasets.items():
        ds.save_to_disk(str(out / name))
        if name in TREE_SUBSETS:      # already in their one shape (TRL's preference format)
            write_atomic(out / f"{name}.jsonl", ((json.dumps(row, ensure_ascii=False) + "\n")
                                                 .encode("utf-8") for row in ds))
            continue
        for fmt in formats:
            file = out / (f"{name}.jsonl" if fmt == "chat" else f"{name}.{fmt}.jsonl")
            write_atomic(file, ((json.dumps(to_export(row, fmt), ensure_ascii=False) + "\n")
                                .encode("utf-8") for row in ds))
    atomic_write_text(out / "export_report.json", json.dumps(report, indent=1))
    return out


def load_chat_dataset(path: str | Path):
    """A chat dataset from a ``save_to_disk`` folder or a JSONL file of ``{"messages": ...}``
    lines (the ``chat`` export, or any OpenAI-style fine-tuning file)."""
    from datasets import Dataset, load_from_disk

    path = Path(path)
    if path.is_dir():
        ds = load_from_disk(str(path))
    elif path.suffix == ".jsonl" and path.exists():
        rows = []
        for i, obj in numbered_jsonl(path):
            if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
                # a bad file line, not a bad argument: ValueError like the other file errors
                raise ValueError(f"{path}:{i}: a line needs a 'messages' list")  # noqa: TRY004
            env = obj.get("env") or (obj.get("meta") or {}).get("env") or ""
            rows.append({"messages": [{"role": m.get("role"), "content": m.get("content"),
                                       "weight": m.get("weight")} for m in obj["messages"]],
                         "env": str(env)})
        ds = Dataset.from_list(rows)
    else:
        raise FileNotFoundError(f"dataset {path}: neither a saved dataset folder nor a .jsonl file")
    if "messages" not in ds.column_names:
        raise ValueError(f"dataset {path} has no 'messages' column (columns: {ds.column_names})")
    return ds
