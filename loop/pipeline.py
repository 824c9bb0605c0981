"""``clew loop``: the closed loop as one command, in rounds (docs/methods/loop.md).

A round searches the train tasks, turns the trees into Exploratory Learning (EL) and Imitation
Learning (IL) chat data, fine-tunes a model on each, and evaluates the checkpoints on the test
tasks beside the baselines, with every metric. A later round may search with the model the
round before trained (expert iteration: ``next_search``). Everything a round writes is a run
directory or a folder of its own under ``out/round-<r>/``; baselines, evaluated once, live in
``out/baselines/``; the comparison is ``out/report.md`` (and ``clew report`` pages with plots
per family under ``out/report/``).

Tasks are grouped into **families** (one table each). A family names the envs it holds and
its own settings: the action cap (``max_episode_steps``; unset = the env's own budget), repeats,
extra options of the search, the chat window its samples and distilled prompts keep (``window``;
unset = the data's ``window`` and the agents' own options), and one line saying what a reader should
see in its table. The loop writes each family's train and test tasks to ``out/tasks/`` once, so
every stage of every round plays exactly the same tasks.

One EL and one IL model learn from every family's samples; with ``model_per_family`` each
family gets its own pair, trained on its envs' samples alone (with the family's ``train`` options
on top of the loop's), and its agents use them. A family without samples then has no model.

``distill`` names the models a round trains: ``el`` (on the ``el`` chats), ``il`` (``il_all``)
and ``value`` (a learned value on ``value_sft``, which ``data.subsets`` must then name;
docs/methods/exploratory-learning.md#learned-value).

Placeholders in agent options: ``{el}``, ``{il}`` and ``{value}`` name the folders of this
round's EL, IL and value models in ``round_agents`` (with ``model_per_family``: the family's),
and those of the previous round in ``next_search``; ``{out}`` is the loop's folder.

Resume: ``state.json`` lists the stages that finished; ``--resume`` skips them, reruns a data or
training stage that did not finish from scratch, and resumes an unfinished evaluation in its run
directory (as ``clew eval --resume`` does). The config of a loop is stored in ``loop.yaml``; a
resumed loop must have the same config except ``rounds``, which may grow.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from clew.agents.lm.tiny import build_tiny_model
from clew.agents.window import ChatWindow
from clew.envs.measures import mean_and_stderr
from clew.envs.suites import resolve
from clew.metrics.summary import aggregate, summary_table
from clew.records import RunDir, atomic_write_json, atomic_write_text
from clew.records.compat import Rename, move_renamed, within
from clew.reports.report import ReportError, write_report
from clew.runner.config import ConfigError, EvalConfig, deep_merge, load_yaml, validate
from clew.runner.evaluate import evaluate
from clew.runner.shards import merge_shards
from clew.training.config import TrainConfig
from clew.training.datasets import (
    VALUE_SUBSET,
    DataConfig,
    build_datasets,
    load_chat_dataset,
    save_datasets,
)
from clew.training.train import train
from pydantic import BaseModel, ConfigDict, Field, model_validator


class AgentSpec(BaseModel):
    """An agent the loop runs: a registered name or preset, its options, its name in tables."""

    model_config = ConfigDict(extra="forbid")

    label: str
    agent: str
    agent_options: dict[str, Any] = Field(default_factory=dict)
    about: str = Field("", description="what this agent is, in one line of the report")
    test_repeats: int | None = Field(
        None, ge=1, description="episodes per test task for this agent; unset = the family's")


class Family(BaseModel):
    """A group of envs with one table and its own settings."""

    model_config = ConfigDict(extra="forbid")

    name: str
    envs: list[str] = Field(..., min_length=1, description="env names (task.env) it holds")
    max_episode_steps: int | None = Field(
        None, ge=1, description="action cap of an episode; unset = the env's budget")
    train_suite: str | None = Field(
        None, description="this family's search tasks from another suite (e.g. more generated "
                          "tasks); unset = the loop's train_suite")
    train_repeats: int = Field(1, ge=1, description="search episodes per train task")
    test_repeats: int = Field(1, ge=1, description="episodes per test task and agent")
    search_options: dict[str, Any] = Field(
        default_factory=dict, description="merged into every round's search agent's options "
                                          "here (search and next_search)")
    env_options: dict[str, Any] = Field(
        default_factory=dict, description="the envs' options for every agent of this family "
                                          "(e.g. textminigrid prompt: obs, a shorter prompt)")
    window: ChatWindow | None = Field(
        None, description="the chat window this family's samples keep and its distilled agents "
                          "send (the same by construction); unset = the data's window")
    train: dict[str, Any] = Field(
        default_factory=dict, description="clew train options of this family's models, on top of "
                                          "the loop's train (model_per_family only)")
    note: str = Field("", description="one line under the table: what to read in it")
    distill: list[Literal["el", "il", "value"]] | None = Field(
        None, description="the models this family's chats train and its agents use (unset: "
                          "the loop's distill; []: none, the family is searched and its "
                          "baselines played)")
    train_seeds: int = Field(
        1, ge=1, description="models of each kind, trained alike but for the seed (the train "
                             "seed + 0, 1, ...; model_per_family only): an agent that uses them "
                             "plays the test tasks with each, every other agent as many times, "
                             "and each table row pools its episodes")

    #: keys renamed since (read with a warning), the training ones in its ``train`` too
    RENAMED: ClassVar[dict[str, Rename]] = {"max_steps": "max_episode_steps", "history": "window",
                                            **within("train", TrainConfig.RENAMED)}

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return move_renamed(data, cls.RENAMED, "families: ")


class Gate(BaseModel):
    """Expert iteration's evaluator (docs/methods/loop.md#the-gate): from round 2 on, a round's
    models of a kind play tasks that are not test tasks beside the models they would replace, and
    replace them only if they do better (pooled over the training seeds)."""

    model_config = ConfigDict(extra="forbid")

    suite: str | None = Field(
        None, description="SUITE:SPLIT the gate plays, each family's envs' tasks; unset = the "
                          "loop's train_suite (held out from a family with its own train_suite)")
    limit: int | None = Field(None, ge=1, description="first N of a family's gate tasks")
    repeats: int = Field(1, ge=1, description="episodes per gate task and model")
    margin: float = Field(
        0.0, ge=0, description="the new models replace the old only if their headline number "
                               "is higher by more than this (a tie keeps the old)")
    margin_se: float = Field(
        0.0, ge=0, description="and by more than this many standard errors of the difference "
                               "(the two pooled runs' errors in quadrature): a gain within the "
                               "gate's noise keeps the old models")


class LoopConfig(BaseModel):
    """What ``clew loop`` runs; see the module docstring."""

    model_config = ConfigDict(extra="forbid")

    #: keys renamed since, in its ``train`` and ``data`` sections (read with a warning)
    RENAMED: ClassVar[dict[str, Rename]] = {**within("train", TrainConfig.RENAMED),
                                            **within("data", DataConfig.RENAMED)}

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return move_renamed(data, cls.RENAMED)

    out: str = "runs/loop"
    rounds: int = Field(1, ge=1)
    train_suite: str = "exploration-v1:train"
    test_suite: str = "exploration-v1:test"
    families: list[Family] = Field(..., min_length=1)
    limit_train: int | None = Field(None, ge=1, description="first N train tasks per family")
    limit_test: int | None = Field(None, ge=1, description="first N test tasks per family")
    limit_repeats: int | None = Field(
        None, ge=1, description="caps every repeat count at N (a smoke run of a large config)")
    limit_test_steps: int | None = Field(
        None, ge=1, description="caps the action cap of every test episode at N (a smoke run; "
                                "the search that makes the data keeps its families' caps)")
    concurrency: int = Field(4, ge=1)
    search: AgentSpec
    next_search: AgentSpec | None = Field(
        None, description="the searcher of rounds 2.. ({el}: the round before's EL model); "
                          "unset = search")
    data: dict[str, Any] = Field(default_factory=dict,
                                 description="clew data options (runs and out are the loop's)")
    accumulate_data: bool = Field(True, description="train on the data of every round so far")
    distill: list[Literal["el", "il", "value"]] = Field(default_factory=lambda: ["el", "il"])
    gate: Gate | None = Field(
        None, description="from round 2 on, keep a round's new models only if they play the "
                          "gate's tasks better than the ones they replace (model_per_family "
                          "only)")
    model_per_family: bool = Field(
        False, description="a model per family and format, trained on that family's samples "
                           "alone; false: one model per format learns every family")
    train: dict[str, Any] = Field(
        default_factory=dict, description="clew train options; 'preset' names a train preset "
                                          "they go on top of (data and output_dir are the loop's)")
    train_jobs: int = Field(
        1, ge=1, description="models trained at once, each in a process of its own (the tiny "
                             "model trains on one core: 2 on a 2-core machine)")
    eval_jobs: int = Field(
        1, ge=1, description="test runs played at once, each in a process of its own with one "
                             "torch thread (2 on a 2-core machine)")
    search_jobs: int = Field(
        1, ge=1, description="processes a family's search runs in: its train tasks split into "
                             "this many shards (tasks[i::n]) played at once and merged, the "
                             "same trees as one process (2 on a 2-core machine: a search is "
                             "one process on one core)")
    tiny_tokenizer: Literal["builtin", "data"] = Field(
        "data", description="a tiny: base model not built yet gets its tokenizer trained on the "
                            "first round's chats (data) or on clew's built-in lines")
    context_tokens: int | None = Field(
        1024, ge=64, description="the model's context at training (max_length) and for every "
                                 "distilled agent at evaluation (context_tokens): the same")
    baselines: list[AgentSpec] = Field(default_factory=list)
    round_agents: list[AgentSpec] = Field(default_factory=list)
    note: str = Field("", description="printed under the agent list of the report")
    parse_failure_rate: float | None = Field(
        None, ge=0, le=1, description="as in clew eval; null: tiny models answer out of format "
                                      "part of the time, which is reported, not a reason to stop")

    @model_validator(mode="after")
    def _families_apart(self) -> LoopConfig:
        seen: dict[str, str] = {}
        for fam in self.families:
            for env in fam.envs:
                if env in seen:
                    raise ValueError(f"families: env {env!r} is in both {seen[env]!r} and "
                                     f"{fam.name!r}")
                seen[env] = fam.name
        for i, fam in enumerate(self.families):
            for key, given, instead in (("train", fam.train, ": set the loop's train"),
                                        ("train_seeds", fam.train_seeds > 1, "")):
                if given and not self.model_per_family:
                    raise ValueError(f"families.{i}.{key}: read only with model_per_family: true "
                                     f"(otherwise one model learns every family{instead})")
            if fam.distill and not set(fam.distill) <= set(self.distill):
                raise ValueError(f"families.{i}.distill: {fam.distill} names a kind the loop's "
                                 f"distill {self.distill} does not train data for")
        if self.gate is not None and not self.model_per_family:
            raise ValueError("gate: read only with model_per_family: true (it compares a "
                             "family's models on the family's tasks)")
        subsets = self.data.get("subsets")
        if "value" in self.distill and isinstance(subsets, list) and \
                VALUE_SUBSET not in subsets:
            raise ValueError(f"data.subsets: distill names value, which trains on "
                             f"{VALUE_SUBSET}: add it (subsets: {subsets})")
        names = [s.label for s in (*self.baselines, *self.round_agents)]
        if len(set(names)) != len(names):
            raise ValueError("baselines/round_agents: every label must be unique")
        return self

    def comparable(self) -> dict[str, Any]:
        """What must not change when a loop resumes (``rounds`` may grow; ``train_jobs``,
        ``search_jobs``, ``eval_jobs`` and ``concurrency`` change only how fast it goes)."""
        return self.model_dump(exclude={"rounds", "out", "train_jobs", "search_jobs",
                                        "eval_jobs", "concurrency"})


# --- set-up -------------------------------------------------------------------------------------
def fill(obj: Any, values: dict[str, str]) -> Any:
    """``obj`` with ``{name}`` placeholders in its strings replaced (mappings and lists walked)."""
    if isinstance(obj, str):
        for name, value in values.items():
            obj = obj.replace("{" + name + "}", value)
        return obj
    if isinstance(obj, dict):
        return {k: fill(v, values) for k, v in obj.items()}
    if isinstance(obj, list):
        return [fill(v, values) for v in obj]
    return obj


#: the data subset each ``distill`` kind trains on
DISTILL_SUBSETS = {"el": "el", "il": "il_all", "value": VALUE_SUBSET}


def named_models(spec: AgentSpec) -> list[str]:
    """The model kinds whose placeholders (``{el}``, ``{il}``, ``{value}``) ``spec``'s options
    name."""
    text = json.dumps(spec.agent_options)
    return [k for k in DISTILL_SUBSETS if "{" + k + "}" in text]


def with_window(options: dict[str, Any], agent: str, window: ChatWindow) -> dict[str, Any]:
    """``options`` of an agent that prompts a trained model (``distilled``, or a search with a
    ``distilled_policy`` or ``distilled_value``) with its chat window set to ``window``; other
    agents' as they are."""
    if agent == "distilled":
        return {**options, "window": window.model_dump()}
    for key in ("distilled_policy", "distilled_value"):
        if isinstance(options.get(key), dict):
            options = {**options, key: {**options[key], "window": window.model_dump()}}
    return options


def task_sets(cfg: LoopConfig) -> dict[tuple[str, str], list]:
    """Each family's train and test tasks; a config error before anything is written."""
    def tasks_of(spec: str, field: str):
        try:
            return resolve(spec)
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"{field}: {exc.args[0]}") from None

    sets: dict[tuple[str, str], list] = {}
    claimed = {env for fam in cfg.families for env in fam.envs}
    for split, spec, limit in (("train", cfg.train_suite, cfg.limit_train),
                               ("test", cfg.test_suite, cfg.limit_test)):
        tasks = tasks_of(spec, f"{split}_suite")
        envs = {t.env for t in tasks}
        if envs - claimed:
            raise ConfigError(f"families: {spec} has env(s) {sorted(envs - claimed)} that no "
                              "family names")
        for i, fam in enumerate(cfg.families):
            own = fam.train_suite if split == "train" else None
            pool = tasks_of(own, f"families.{i}.train_suite") if own else tasks
            chosen = [t for t in pool if t.env in fam.envs][:limit]
            if not chosen:
                raise ConfigError(f"families: {fam.name!r} has no task in {own or spec}")
            sets[fam.name, split] = chosen
    if cfg.gate is not None:
        spec = cfg.gate.suite or cfg.train_suite
        tasks = tasks_of(spec, "gate.suite")
        for fam in cfg.families:
            chosen = [t for t in tasks if t.env in fam.envs][:cfg.gate.limit][:cfg.limit_test]
            if not chosen and fam.distill != []:
                raise ConfigError(f"gate: {fam.name!r} has no task in {spec}")
            sets[fam.name, "gate"] = chosen
    return sets


def write_task_files(sets: dict[tuple[str, str], list], out: Path) -> dict[tuple[str, str], Path]:
    """Each family's tasks as ``out/tasks/<family>-<split>.jsonl`` (split: train, test, gate)."""
    files = {}
    for (name, split), tasks in sets.items():
        path = files[name, split] = out / "tasks" / f"{name}-{split}.jsonl"
        atomic_write_text(path, "".join(json.dumps(t.to_dict()) + "\n" for t in tasks))
    return files


def train_config(cfg: LoopConfig, data: Path, output: Path, out: Path,
                 fam: Family | None = None):
    """The training config of one model: the preset, the loop's ``train``, the family's ``train``
    and its envs (a model of one family), the loop's paths. Each layer's renamed keys move to
    their new places before the layers are merged (:func:`clew.runner.config.load_config`)."""
    def layer(options: dict[str, Any]) -> dict[str, Any]:
        return move_renamed(fill(options, {"out": str(out)}), TrainConfig.RENAMED, "train: ")

    options = dict(cfg.train)
    preset = options.pop("preset", None)
    base = layer(load_yaml(preset, presets="train")) if preset else {}
    options = deep_merge(base, layer(options))
    where = "train"
    if fam is not None:
        options = deep_merge(options, layer(fam.train))
        options["envs"] = list(fam.envs)
        where = f"families ({fam.name}).train"
    options.update(data=str(data), output_dir=str(output))
    if cfg.context_tokens:
        options = deep_merge(options, {"sft": {"max_length": cfg.context_tokens}})
    return validate(TrainConfig, options, where)


def train_model(options: dict[str, Any]) -> dict[str, Any]:
    """Train one model from its validated ``TrainConfig`` (as a dict: it may cross to another
    process); the first and last logged loss."""
    cfg = TrainConfig.model_validate(options)
    shutil.rmtree(cfg.output_dir, ignore_errors=True)   # a stage that did not finish restarts
    losses = train(cfg).losses
    return {"first_loss": losses[0] if losses else None,
            "last_loss": losses[-1] if losses else None, "logged": len(losses)}


@contextmanager
def processes(n: int) -> Iterator[Any]:
    """A pool of ``n`` spawned processes (a fork would inherit torch's threads and locks), or
    None for ``n`` < 2; an interrupted or failed loop leaves none of its work running."""
    pool = multiprocessing.get_context("spawn").Pool(n) if n > 1 else None
    try:
        yield pool
    except BaseException:
        if pool:
            pool.terminate()
        raise
    finally:
        if pool:
            pool.close()
            pool.join()


def play(options: dict[str, Any], threads: int | None = None) -> str:
    """Play one run from its validated ``EvalConfig`` (as a dict: it may cross to another
    process), with ``threads`` torch threads if given; its folder."""
    cfg = EvalConfig.model_validate(options)
    if threads:
        import torch

        torch.set_num_threads(threads)
    evaluate(cfg, progress=False)
    return cfg.out


# --- stages -------------------------------------------------------------------------------------
class Loop:
    """One loop's folder, its state and its stages (what :func:`run_loop` drives)."""

    def __init__(self, cfg: LoopConfig, say: Callable[[str], None] = print):
        self.cfg, self.say = cfg, say
        self.out = Path(cfg.out)
        self.state_file = self.out / "state.json"
        self.state: dict[str, Any] = {"done": {}}
        self.tasks: dict[tuple[str, str], Path] = {}
        data = validate(DataConfig, {**cfg.data, "runs": ["-"]}, "data")
        #: the data's window, which the distilled agents send too (a family's own wins)
        self.data_window = data.window if "window" in data.model_fields_set else None

    def open(self, resume: bool) -> None:
        sets = task_sets(self.cfg)
        for group in self.groups() if self.cfg.distill else []:
            train_config(self.cfg, Path("-"), Path("-"), self.out, group)  # its errors up front
        stored = self.out / "loop.yaml"
        if stored.exists():
            if not resume:
                raise ConfigError(f"out: {self.out} already holds a loop; add --resume to go on "
                                  "with it, or choose another --out")
            old = LoopConfig.model_validate(load_yaml(stored)).comparable()
            now = self.cfg.comparable()
            if old != now:
                changed = sorted(k for k, v in now.items() if old.get(k) != v)
                raise ConfigError(f"--resume: the config differs from {stored} in "
                                  f"{', '.join(changed)} (only rounds may change)")
            if self.state_file.exists():
                self.state = json.loads(self.state_file.read_text())
        elif self.out.exists() and any(self.out.iterdir()):
            raise ConfigError(f"out: {self.out} exists and holds no loop; choose another --out")
        atomic_write_text(stored, yaml.safe_dump(self.cfg.model_dump(), sort_keys=False))
        self.tasks = write_task_files(sets, self.out)

    def stage(self, key: str, what: str, work: Callable[[], Any]) -> Any:
        """Run ``work`` unless the stage ``key`` finished before; record it when it finishes."""
        done = self.state["done"]
        if key in done:
            self.say(f"{what}: done before, skipped")
            return done[key].get("result")
        self.say(what)
        t0 = time.perf_counter()
        result = work()
        done[key] = {"seconds": round(time.perf_counter() - t0, 1), "result": result}
        atomic_write_json(self.state_file, self.state)
        return result

    def eval_config(self, spec: AgentSpec, fam: Family, split: str, run: Path,
                    times: int = 1) -> EvalConfig:
        """The run config that plays ``fam``'s ``split`` tasks (train, test or gate) with ``spec``
        into ``run``; test tasks ``times`` times their repeats (an agent with no model of a family
        with ``train_seeds``)."""
        options = spec.agent_options
        options = {"label": spec.label, **options} if spec.agent != "random" else options
        window = fam.window or self.data_window
        if window:  # the model answers on the context it was trained on
            options = with_window(options, spec.agent, window)
        if spec.agent == "distilled" and self.cfg.context_tokens:
            options = {"context_tokens": self.cfg.context_tokens, **options}
        cap = fam.max_episode_steps
        if split != "train" and self.cfg.limit_test_steps:
            cap = min(cap or self.cfg.limit_test_steps, self.cfg.limit_test_steps)
        cfg = EvalConfig(
            agent=spec.agent, agent_options=options, suite=str(self.tasks[fam.name, split]),
            out=str(run), concurrency=self.cfg.concurrency, max_episode_steps=cap,
            env_options=fam.env_options,
            repeats=min(fam.train_repeats if split == "train" else
                        self.cfg.gate.repeats if split == "gate" and self.cfg.gate else
                        times * (spec.test_repeats or fam.test_repeats),
                        self.cfg.limit_repeats or 10**9),
            resume=(run / "config.yaml").exists(), parse_failure_rate=self.cfg.parse_failure_rate)
        return cfg

    def search(self, r: int) -> list[str]:
        cfg = self.cfg
        spec = cfg.search if r == 1 or cfg.next_search is None else cfg.next_search
        plans = []
        for fam in cfg.families:
            # the family's settings go to every round's search
            options = deep_merge(spec.agent_options, fam.search_options)
            if r > 1:
                models = self.kept(r - 1, fam)
                missing = [k for k in named_models(spec)
                           if not (Path(models[k]) / "config.json").exists()]
                if missing:
                    raise ConfigError(f"next_search: round {r} searches {fam.name} with the "
                                      f"{'/'.join(missing)} model of round {r - 1}, which was not "
                                      "trained (no samples: see its data/export_report.json)")
                options = fill(options, models | {"out": str(self.out)})
            this = spec.model_copy(update={"agent_options": options})
            run = self.out / f"round-{r}" / "search" / fam.name
            plans.append((fam, this, run))
        if cfg.search_jobs > 1:
            return self.search_in_shards(r, spec.label, plans)
        return self.play_all([(f"r{r}/search/{fam.name}",
                               f"round {r} search: {spec.label} on {fam.name} (train)",
                               self.eval_config(this, fam, "train", run))
                              for fam, this, run in plans], 1, f"round {r} search")

    def search_in_shards(self, r: int, label: str,
                         plans: list[tuple[Family, AgentSpec, Path]]) -> list[str]:
        """The searches of ``plans`` with ``search_jobs`` processes: each family's train tasks in
        that many shards (``round-R/search/shards/FAMILY/I-of-N``), every family's started at
        once in family order, each in a process with one torch thread (a distilled prior's
        batches are too small for two), and merged into ``round-R/search/FAMILY`` as
        ``clew merge`` does (docs/scale-out.md). Tasks are seeded one by one, so a search whose
        roles call no model makes the trees of one process."""
        n = self.cfg.search_jobs
        shards: dict[str, list[Path]] = {}
        plays = []
        for fam, spec, run in plans:
            if f"r{r}/search/{fam.name}" in self.state["done"]:
                continue
            parts = min(n, self.tasks[fam.name, "train"].read_text().count("\n"))
            folder = self.out / f"round-{r}" / "search" / "shards" / fam.name
            shards[fam.name] = [folder / f"{i}-of-{parts}" for i in range(parts)]
            plays += [(f"r{r}/search/{fam.name}/{i}-of-{parts}",
                       f"round {r} search: {label} on {fam.name} (train), shard {i + 1} of {parts}",
                       self.eval_config(spec, fam, "train", path)
                       .model_copy(update={"shard": f"{i}/{parts}"}))
                      for i, path in enumerate(shards[fam.name])]
        self.play_all(plays, n, f"round {r} search")

        def merged(fam: Family, run: Path) -> str:
            shutil.rmtree(run, ignore_errors=True)   # a merge that did not finish restarts
            merge_shards(shards[fam.name], run)
            return str(run)

        return [self.stage(f"r{r}/search/{fam.name}",
                           f"round {r} search: {fam.name}'s shards merged",
                           lambda f=fam, p=run: merged(f, p))
                for fam, _, run in plans]

    def data(self, r: int, runs: list[str]) -> dict[str, int]:
        folder = self.out / f"round-{r}" / "data"

        def work() -> dict[str, int]:
            shutil.rmtree(folder, ignore_errors=True)
            options = {"allow_empty": True, **self.cfg.data, "runs": runs}
            if "value" in self.cfg.distill and "subsets" not in options:  # the default + chats
                options["subsets"] = [*DataConfig.model_fields["subsets"].default_factory(),
                                      VALUE_SUBSET]
            by_env = {env: fam.window.model_dump() for fam in self.cfg.families
                      if fam.window for env in fam.envs}
            if by_env:
                options["env_window"] = {**options.get("env_window", {}), **by_env}
            data_cfg = validate(DataConfig, options, "data")
            datasets, report = build_datasets(data_cfg)
            save_datasets(datasets, report, folder)
            return {name: ds.num_rows for name, ds in datasets.items()}

        return self.stage(f"r{r}/data", f"round {r} data: trees -> EL and IL chats"
                          + (" and value grades" if "value" in self.cfg.distill else ""), work)

    def groups(self) -> list[Family | None]:
        """Who gets models: each family (``model_per_family``), or all of them at once (None)."""
        return list(self.cfg.families) if self.cfg.model_per_family else [None]

    def distill_of(self, group: Family | None) -> list[str]:
        """The kinds of model ``group`` trains and uses: its own ``distill``, else the loop's
        (``None``, the one model of every family: the loop's)."""
        if group is not None and group.distill is not None:
            return list(group.distill)
        return list(self.cfg.distill)

    def models(self, r: int, fam: Family | None = None, seed: int = 0) -> dict[str, str]:
        """The folders of round ``r``'s EL, IL and value models that ``fam``'s agents use: those
        of the train seed, or of the train seed + ``seed`` (``train_seeds``)."""
        folder = self.out / f"round-{r}" / "models"
        if self.cfg.model_per_family and fam is not None:
            folder = folder / fam.name
        return {kind: str(folder / f"{kind}{seeded(seed)}") for kind in DISTILL_SUBSETS}

    def kept(self, r: int, fam: Family | None = None, seed: int = 0) -> dict[str, str]:
        """The model folders round ``r``'s agents use (and round ``r`` + 1 searches with):
        round ``r``'s own, except where the gate kept an earlier round's models."""
        models = self.models(r, fam, seed)
        if fam is None:
            return models
        return {kind: self.models(self.kept_round(r, fam, kind), fam, seed)[kind]
                for kind in models}

    def kept_round(self, r: int, fam: Family, kind: str) -> int:
        """The round whose ``kind`` models of ``fam`` round ``r`` uses."""
        entry = self.state["done"].get(f"r{r}/gate/{fam.name}/{kind}")
        return entry["result"]["kept"] if entry else r

    def gate_agent(self, kind: str) -> AgentSpec | None:
        """The round agent the gate plays a ``kind`` model with: the first that names that
        model and no other."""
        return next((spec for spec in self.cfg.round_agents if named_models(spec) == [kind]),
                    None)

    def gate(self, r: int, trained: dict[str, list[str]]) -> None:
        """Round ``r``'s models of each kind and family against those round ``r`` - 1 kept, on
        the family's gate tasks (docs/methods/loop.md#the-gate): the new ones are kept if their
        headline number, pooled over the family's training seeds, beats the old ones' by more
        than the gate's margin. A kind no round agent plays alone (the value) is not gated."""
        if self.cfg.gate is None or r == 1:
            return
        for fam in self.cfg.families:
            for kind in trained.get(fam.name, []):
                spec = self.gate_agent(kind)
                old = self.kept_round(r - 1, fam, kind)
                if spec is None or not (Path(self.models(old, fam)[kind]) / "config.json").exists():
                    continue   # not gated, or nothing to replace: round r's models stand
                self.stage(f"r{r}/gate/{fam.name}/{kind}",
                           f"round {r} gate: the {kind.upper()} models of {fam.name} against "
                           f"round {old}'s",
                           lambda f=fam, k=kind, q=old, a=spec: self.gate_one(r, q, f, k, a))

    def gate_one(self, r: int, old: int, fam: Family, kind: str,
                 spec: AgentSpec) -> dict[str, Any]:
        """Play round ``r``'s and round ``old``'s ``kind`` models (each seed's) on the gate
        tasks, each model once (``round-Q/gate/``); the round kept and both pooled numbers."""
        plays = []
        for q in (r, old):
            for seed in range(fam.train_seeds):
                name = f"{spec.label}/{fam.name}{seeded(seed)}"
                values = {"out": str(self.out), kind: self.models(q, fam, seed)[kind]}
                this = spec.model_copy(update={"agent_options": fill(spec.agent_options,
                                                                     values)})
                plays.append((f"round-{q}/gate/{name}",
                              f"    round {q}'s model{seeded(seed)} on the gate tasks",
                              self.eval_config(this, fam, "gate",
                                               self.out / f"round-{q}" / "gate" / name)))
        self.play_all(plays, self.cfg.eval_jobs, f"round {r} gate")
        scores, errors = {}, {}
        for q in (r, old):
            episodes = [e for key, _, cfg in plays if key.startswith(f"round-{q}/")
                        for e in RunDir(Path(cfg.out)).episodes()]
            agg = aggregate(episodes)
            key = headline(agg)
            scores[q] = agg["mean"].get(key, math.nan)
            errors[q] = agg["stderr"].get(key, math.nan)
        se = math.hypot(errors[r], errors[old])
        bar = scores[old] + self.cfg.gate.margin + self.cfg.gate.margin_se * se
        kept = r if scores[r] > bar else old
        self.say(f"    {key} {scores[r]:.3f} (round {r}) against {scores[old]:.3f} (round "
                 f"{old}), {agg['episodes']} episodes each: round {kept}'s models are kept")
        return {"kept": kept, "key": key, "new": scores[r], "old": scores[old], "se": se,
                "old_round": old, "episodes": agg["episodes"]}

    def train(self, r: int, sizes: dict[str, int]) -> dict[str, list[str]]:
        """Fine-tune a model per ``distill`` kind (and per family with ``model_per_family``);
        with ``train_jobs`` > 1 they train at once, each in a spawned process (a fork would
        inherit torch's threads and locks); a stage whose turn comes waits for its process.
        Returns the kinds trained per family name."""
        self.build_tiny(r, sizes)
        data = self.out / f"round-{r}" / "data"
        chosen = any(f.distill is not None for f in self.cfg.families)
        per_env = (self.samples_per_env(data, sizes) if self.cfg.model_per_family or chosen
                   else {})
        jobs = []
        for group in self.groups():
            name = "" if group is None else f"{group.name} "
            for kind in self.distill_of(group):
                subset = DISTILL_SUBSETS[kind]
                # one model for every family learns the chats of the families that name it
                envs = (group.envs if group is not None else
                        [e for f in self.cfg.families if kind in self.distill_of(f)
                         for e in f.envs])
                count = (sizes.get(subset, 0) if group is None and not chosen else
                         sum(n for env, n in per_env.get(subset, {}).items() if env in envs))
                if not count:
                    self.say(f"round {r} train: no {name}{subset} samples, no {name}"
                             f"{kind.upper()} model")
                    continue
                cfg = train_config(self.cfg, data / subset, Path(self.models(r, group)[kind]),
                                   self.out, group)
                if group is None and chosen:
                    cfg = cfg.model_copy(update={"envs": envs})
                key = f"r{r}/train/{kind}" if group is None else f"r{r}/train/{group.name}/{kind}"
                what = f"round {r} train: {name}{kind.upper()} model on {count} samples"
                for seed in range(1 if group is None else group.train_seeds):
                    this = cfg.model_copy(update={
                        "output_dir": self.models(r, group, seed)[kind],
                        "sft": {**cfg.sft, "seed": cfg.trainer("seed") + seed}})
                    jobs.append((group, kind, key + seeded(seed), this.model_dump(mode="json"),
                                 what + (f", train seed + {seed}" if seed else "")))
        pending = [job for job in jobs if job[2] not in self.state["done"]]
        at_once = min(self.cfg.train_jobs, len(pending))
        trained: dict[str, list[str]] = {fam.name: [] for fam in self.cfg.families}
        with processes(at_once) as pool:
            started = {key: pool.apply_async(train_model, (options,))
                       for _, _, key, options, _ in pending} if pool else {}
            if pool:
                self.say(f"round {r} train: {len(started)} models, {at_once} at once, "
                         "a process each")
            for group, kind, key, options, what in jobs:
                work = ((lambda a=started[key]: a.get()) if key in started
                        else (lambda o=options: train_model(o)))
                res = self.stage(key, what, work)
                for fam in self.cfg.families if group is None else [group]:
                    if kind in self.distill_of(fam) and kind not in trained[fam.name]:
                        trained[fam.name].append(kind)
                if res.get("first_loss") is not None:
                    self.say(f"    loss {res['first_loss']:.2f} -> {res['last_loss']:.2f} "
                             f"({res['logged']} logged steps)")
        return trained

    @staticmethod
    def samples_per_env(data: Path, sizes: dict[str, int]) -> dict[str, Counter]:
        """Each trained subset's samples counted by env (each dataset read once)."""
        return {subset: Counter(load_chat_dataset(data / subset)["env"])
                for subset in DISTILL_SUBSETS.values() if sizes.get(subset)}

    def build_tiny(self, r: int, sizes: dict[str, int]) -> None:
        """Build a ``tiny:`` base model that does not exist yet, its tokenizer trained on this
        round's chats (``tiny_tokenizer: data``; docs/methods/loop.md#compact-samples)."""
        model = str(train_config(self.cfg, Path("-"), Path("-"), self.out).model)
        if not model.startswith("tiny:") or self.cfg.tiny_tokenizer != "data":
            return
        path = Path(model.removeprefix("tiny:"))
        if (path / "clew_tiny.json").exists():
            return
        texts = []
        for subset in DISTILL_SUBSETS.values():
            folder = self.out / f"round-{r}" / "data" / subset
            if sizes.get(subset):  # an empty saved dataset does not load
                more = [m["content"] for row in load_chat_dataset(folder)
                        for m in row["messages"]]
                if subset == VALUE_SUBSET:   # its turns once each: a grade line per row and
                    seen = set(texts)        # the chats' turns again would steer the merges
                    more = [t for t in dict.fromkeys(more) if t not in seen]
                texts += more
        if texts:
            self.say(f"    tiny base model: tokenizer trained on {len(texts)} chat turns")
            build_tiny_model(path, corpus=texts)

    def evaluate_all(self, r: int | None, specs: list[AgentSpec],
                     trained: dict[str, list[str]]) -> None:
        where = "baselines" if r is None else f"round-{r}"
        plays = []
        for spec in specs:
            needs = named_models(spec)
            for fam in self.cfg.families:
                if r is not None and any(k not in trained.get(fam.name, []) for k in needs):
                    self.say(f"{where} evaluate: {spec.label} on {fam.name} needs the "
                             f"{'/'.join(needs)} model, which this round did not train; skipped")
                    continue
                # an agent with models plays once per seed's models; any other as many times
                seeds, times = ((range(fam.train_seeds), 1) if needs and r is not None else
                                (range(1), fam.train_seeds))
                for seed in seeds:
                    values = {"out": str(self.out)} | ({} if r is None else
                                                       self.kept(r, fam, seed))
                    this = spec.model_copy(update={"agent_options": fill(spec.agent_options,
                                                                         values)})
                    name = f"{spec.label}/{fam.name}{seeded(seed)}"
                    what = f"{where} evaluate: {spec.label} on {fam.name}{seeded(seed)} (test)"
                    run = self.out / where / "eval" / name
                    plays.append((f"{where}/eval/{name}", what,
                                  self.eval_config(this, fam, "test", run, times)))
        self.play_all(plays, self.cfg.eval_jobs, f"{where} evaluate")

    def play_all(self, plays: list[tuple[str, str, EvalConfig]], jobs: int,
                 what: str) -> list[str]:
        """Play each ``(stage key, what, run config)`` as a stage, in order; with ``jobs`` > 1
        the runs not done play at once in that many spawned processes with one torch thread
        each (the tiny model's batches are too small for two), and each stage waits for its
        own. The runs' folders."""
        pending = [(key, cfg) for key, _, cfg in plays if key not in self.state["done"]]
        at_once = min(jobs, len(pending))
        with processes(at_once) as pool:
            started = {key: pool.apply_async(play, (cfg.model_dump(mode="json"), 1))
                       for key, cfg in pending} if pool else {}
            if pool:
                self.say(f"{what}: {len(started)} runs, {at_once} at once, a process each")
            return [self.stage(key, say, (lambda a=started[key]: a.get()) if key in started
                               else (lambda c=cfg: play(c.model_dump(mode="json"))))
                    for key, say, cfg in plays]

    def rows(self) -> dict[str, list[tuple[str, list[Path]]]]:
        """Per family, the (name, runs) pairs evaluated so far, baselines, then round by round:
        an agent's runs are one per model seed (``train_seeds``), else one."""
        out: dict[str, list[tuple[str, list[Path]]]] = {f.name: [] for f in self.cfg.families}
        for where, prefix in [("baselines", "")] + [(f"round-{r}", f"r{r} ")
                                                    for r in range(1, self.cfg.rounds + 1)]:
            for spec in (self.cfg.baselines if where == "baselines" else self.cfg.round_agents):
                for fam in self.cfg.families:
                    runs = [self.out / where / "eval" / spec.label / f"{fam.name}{seeded(seed)}"
                            for seed in range(fam.train_seeds)]
                    runs = [run for run in runs if (run / "episodes.jsonl").exists()]
                    if runs:
                        out[fam.name].append((prefix + spec.label, runs))
        return out


def report(loop: Loop) -> str:
    """The loop's comparison: one table per family with its note, and the timing."""
    cfg = loop.cfg
    title = (f"# clew loop: {cfg.rounds} round(s); search on {cfg.train_suite}, evaluation on "
             f"{cfg.test_suite}\n")
    lines = [title]
    what = [f"  {s.label:18s} {s.about or s.agent + ' ' + json.dumps(s.agent_options)}"
            for s in (*cfg.baselines, *cfg.round_agents)]
    lines += ["Agents (rN = trained in round N):", *what, ""]
    if cfg.note:
        lines += [cfg.note, ""]
    evaluated = loop.rows()
    for fam in cfg.families:
        played = [(name, [RunDir(run).episodes() for run in runs])
                  for name, runs in evaluated[fam.name]]
        rows = [(name, aggregate([e for episodes in per_run for e in episodes]))
                for name, per_run in played]
        cap = (f"at most {fam.max_episode_steps} actions" if fam.max_episode_steps
               else "the env's own budget")
        lines.append(f"## {fam.name}  ({', '.join(fam.envs)}; {cap} per episode)\n")
        if fam.note:
            lines.append(f"{fam.note}\n")
        if fam.distill == []:
            lines.append("This family trains no model and no distilled agent plays it (its "
                         "`distill: []`): search and baselines only.\n")
        for r in range(1, cfg.rounds + 1) if cfg.model_per_family and fam.distill != [] else []:
            missing = [k.upper() for k, path in loop.models(r, fam).items()
                       if k in loop.distill_of(fam) and not (Path(path) / "config.json").exists()]
            if missing and (loop.out / f"round-{r}" / "data").exists():
                lines.append(f"Round {r} trained no {'/'.join(missing)} model of this family: its "
                             f"search gave no samples (round-{r}/data/export_report.json).\n")
        if rows:
            lines.append(summary_table(rows))
            lines += against_random(rows)
            lines += by_seed(played)
        lines += gate_lines(loop, fam)
    seconds: dict[str, float] = {}
    for key, entry in loop.state["done"].items():
        kind = key.split("/")[1] if key.startswith(("r", "baselines")) else key
        if kind == "gate" and key.split("/")[0][1:].isdigit():
            continue   # a gate's decision: its time is its two runs' (round-Q/gate/...)
        seconds[kind] = seconds.get(kind, 0.0) + entry["seconds"]
    lines.append("Stage time: " + ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items()))
    return "\n".join(lines) + "\n"


def gate_lines(loop: Loop, fam: Family) -> list[str]:
    """One line per round whose gate judged ``fam``'s models: each kind's number on the gate
    tasks against the models it would replace, and which round's models the round's agents
    use."""
    lines = []
    for r in range(2, loop.cfg.rounds + 1):
        prefix = f"r{r}/gate/{fam.name}/"
        judged = [(key.removeprefix(prefix), entry["result"])
                  for key, entry in loop.state["done"].items() if key.startswith(prefix)]
        if judged:
            parts = [f"{name.upper()} {res['new']:.3f} against r{res['old_round']}'s "
                     f"{res['old']:.3f}{in_se(res)}: r{res['kept']}'s kept"
                     for name, res in judged]
            rule = (f"; new models replace old ones only if ahead by more than "
                    f"{loop.cfg.gate.margin_se:g} SE of the difference"
                    if loop.cfg.gate.margin_se else "")
            lines.append(f"Round {r}'s gate ({judged[0][1]['key']} over {judged[0][1]['episodes']} "
                         f"gate episodes a kind, every seed's model; the r{r} rows play the models "
                         f"kept{rule}): " + "; ".join(parts) + "\n")
    return lines


def in_se(res: dict[str, Any]) -> str:
    """A gate decision's difference in standard errors, where it has one."""
    se = res.get("se") or 0.0
    return f" ({(res['new'] - res['old']) / se:+.1f} SE)" if se > 0 and math.isfinite(se) else ""


def html_reports(loop: Loop) -> None:
    """``clew report`` pages (tables and plots) per family over every evaluated agent."""
    for fam, rows in loop.rows().items():
        if len(rows) < 2:
            continue
        try:
            write_report([run for _, runs in rows for run in runs], loop.out / "report" / fam)
        except ReportError as exc:  # a report is a view: the loop's results stay
            loop.say(f"report for {fam} not written: {exc}")


def run_loop(cfg: LoopConfig, *, resume: bool = False, say: Callable[[str], None] = print,
             html: bool = True) -> Loop:
    """Every round of ``cfg`` (stages that finished before are skipped on resume)."""
    loop = Loop(cfg, say)
    loop.open(resume)
    start = time.perf_counter()
    loop.evaluate_all(None, cfg.baselines, {})
    all_runs: list[str] = []
    for r in range(1, cfg.rounds + 1):
        runs = loop.search(r)
        all_runs += runs
        sizes = loop.data(r, all_runs if cfg.accumulate_data else runs)
        say(f"    samples: {sizes}")
        trained = loop.train(r, sizes)
        loop.gate(r, trained)
        loop.evaluate_all(r, cfg.round_agents, trained)
    text = report(loop)
    atomic_write_text(loop.out / "report.md", text)
    if html:
        html_reports(loop)
    say(f"loop finished in {time.perf_counter() - start:.0f} s; report: {loop.out}/report.md")
    return loop


def seeded(seed: int) -> str:
    """The suffix of a model folder, a training stage and an evaluation run of the train seed +
    ``seed`` (none for the train seed itself)."""
    return f"-seed{seed}" if seed else ""


def headline(agg: dict[str, Any]) -> str:
    """The number a family's table is read by: success where the family defines it, else
    normalised reward."""
    return "success" if math.isfinite(agg["mean"].get("success", math.nan)) else \
        "normalized_reward"


def by_seed(played: list[tuple[str, list[list[dict[str, Any]]]]]) -> list[str]:
    """One line per agent that played with several seeds' models (its episodes per model): its
    headline number per model and their mean ± the standard error across models (the row above
    pools the episodes, so its standard error leaves out how much the models differ)."""
    lines = []
    for name, per_run in played:
        if len(per_run) < 2:
            continue
        aggs = [aggregate(episodes) for episodes in per_run]
        key = headline(aggs[0])
        values = [a["mean"].get(key, math.nan) for a in aggs]
        mean, spread, _ = mean_and_stderr(values)
        lines.append(f"{name} by model seed ({key}): "
                     + ", ".join(f"{v:.3f}" for v in values)
                     + f"; across the {len(values)} models {mean:.3f} ± {spread:.3f}\n")
    return lines


def against_random(rows: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """One line per other agent: its headline number against the ``random`` row's, in standard
    errors (success where the family defines it, else normalised reward)."""
    base = dict(rows).get("random")
    if base is None:
        return []
    key = headline(base)
    parts = []
    for name, agg in rows:
        if name != "random":
            d = agg["mean"].get(key, math.nan) - base["mean"].get(key, math.nan)
            z = standard_errors_apart(agg, base, key)
            zs = f"{z:+.1f} SE" if math.isfinite(z) else "SE undefined"
            parts.append(f"{name} {d:+.3f} ({zs})")
    return [f"Against random ({key}): " + "; ".join(parts) + "\n"] if parts else []


def standard_errors_apart(a: dict[str, Any], b: dict[str, Any], key: str) -> float:
    """(mean_a - mean_b) / sqrt(se_a² + se_b²) for ``key``: how many standard errors apart."""
    ma, mb = a["mean"].get(key, math.nan), b["mean"].get(key, math.nan)
    sa, sb = a["stderr"].get(key, math.nan), b["stderr"].get(key, math.nan)
    se = math.sqrt(sa * sa + sb * sb) if math.isfinite(sa) and math.isfinite(sb) else math.nan
    return (ma - mb) / se if se else math.nan
