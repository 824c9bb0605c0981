"""``clew diagnose RUN``: the search roles measured against ground truth
(docs/methods/diagnose.md).

A search tree holds observations, not env states. Every node's true state is rebuilt by replay:
the task is reset, the executed prefix of the episode is stepped (each observation compared with
the record), then the tree path to the node. The snapshot contract (``restore`` + replay equals
``reset`` + replay) makes the replayed state the one the search saw; a node whose replayed
observation differs from the one stored in the tree is counted (``obs_mismatch``) and the tree is
skipped, so a non-deterministic env cannot pass silently.

The truth for a state comes from two env hooks (:class:`clew.envs.base.Env`):

* ``progress()``: normalised value-to-go in [0, 1] (gridmap: 1 − d/d₀ with d the fewest moves to
  the goal on the full map; TextMiniGrid: the same with the BabyAI bot's plan);
* ``steps_to_goal()``: the fewest steps to success under the env's own limits; the state is
  *solvable* when that fits in the steps the episode rules leave. ``None`` means the env defines
  no ground truth: its runs are reported as undefined, never as zeros.

A state the task ended is worth 1 on success, else 0; a state an episode rule cut is worth 0.

Four sections, each a pure function over the replayed rows:

* **value calibration** (:func:`value_stats`): per value kind (single, debate, heuristic,
  learned: the ``distilled_value`` of docs/methods/exploratory-learning.md#learned-value) and
  per depth: bias, MAE, RMSE and Spearman rank correlation against ``progress``; Brier score and
  expected calibration error against *solvable*; a reliability table; and ``noise_fit``, the
  standard deviation of a Gaussian error fitted by maximum likelihood to values clipped at the
  scale's ends (a Tobit model), which for the heuristic value estimates its configured ``noise``;
* **policy quality** (:func:`policy_stats`): at each expanded node, whether the top-1 and the
  top-b proposals hold an optimal action (one whose successor needs the fewest steps), the prior
  mass on optimal actions and what a uniform choice among the legal actions would put there;
  expansions where nothing parsed (a NONE edge) and value samples that did not parse;
* **reflection effect**: the same numbers with and without retrieved reflections, where a run
  has both;
* **search effect** (:func:`search_stats`): how often the committed action differs from the
  policy's top-prior action, and which of the two the oracle prefers when they differ.

``diagnose_run`` writes ``RUN/diagnose/diagnose.json``, ``nodes.jsonl`` (one line per replayed
node, for analyses of one's own) and plots; ``clew report`` shows the JSON of every run that has
one (:func:`clew.reports.report.diagnose_tables`).
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from clew.envs.base import Env, Task
from clew.envs.registry import ENVS, env_class, make_for
from clew.envs.wrappers import EpisodeRules
from clew.records import RunDir, atomic_write_json, atomic_write_text
from clew.reports import plots
from clew.runner.episodes import DEFAULT_MAX_STEPS
from clew.runner.registry import resolve
from clew.search.options import parse_agent_options
from clew.search.tree import Edge, Node, Tree, TreeFormatError, read_trees
from tqdm import tqdm

#: depths at and beyond this are one bucket in the per-depth tables
DEPTH_CAP = 5
#: bins of the reliability table (equal width over the unit value scale)
RELIABILITY_BINS = 10


class DiagnoseError(ValueError):
    """A run that cannot be diagnosed; the message names the run directory."""


# --- rows ------------------------------------------------------------------------------------
@dataclass
class ValueRow:
    """One evaluated node: the value (unit scale) beside the truth of its replayed state."""

    episode: str
    t: int
    node: int
    depth: int
    kind: str                   # value kind of the record: single | debate | heuristic
    value: float | None         # None: unknown (every sample unreadable)
    progress: float
    solvable: bool
    steps_to_goal: float
    steps_left: int | None
    reflections: bool           # value reflections were retrieved for this evaluation
    samples: int = 0
    parse_fail: int = 0


@dataclass
class PolicyRow:
    """One expansion: which of its ranked edges are optimal by the oracle."""

    episode: str
    t: int
    node: int
    depth: int
    optimal: list[bool]         # per edge, prior rank order (NONE edges: False)
    priors: list[float]
    none: bool                  # nothing parsed (a NONE edge)
    chance: float               # share of the legal actions that are optimal (NaN: no list)
    reflections: bool           # policy reflections were shown at this expansion


@dataclass
class SearchRow:
    """One tree: the committed first action against the policy's top-prior one."""

    episode: str
    t: int
    committed: str
    top_prior: str
    differs: bool
    committed_steps: float      # steps to success after each (inf: unreachable)
    top_steps: float
    committed_progress: float
    top_progress: float


@dataclass
class Collected:
    values: list[ValueRow] = field(default_factory=list)
    policy: list[PolicyRow] = field(default_factory=list)
    search: list[SearchRow] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    episodes: int = 0
    trees: int = 0
    families: set[str] = field(default_factory=set)


# --- replay ----------------------------------------------------------------------------------
@dataclass
class Truth:
    progress: float
    steps_to_goal: float
    steps_left: int | None

    @property
    def solvable(self) -> bool:
        return math.isfinite(self.steps_to_goal) and (
            self.steps_left is None or self.steps_to_goal <= self.steps_left)


def _steps_left(env: EpisodeRules) -> int | None:
    return None if env.max_steps is None else env.max_steps - env.rules.steps


def truth_now(env: EpisodeRules, ended: bool = False) -> Truth | None:
    """The truth of ``env``'s current state; None when the env defines none."""
    raw = env.unwrapped
    if raw.done or ended or env.truncated_by:
        won = raw.done and raw.grade() >= 1.0
        return Truth(1.0 if won else 0.0, 0.0 if won else math.inf, _steps_left(env))
    d = raw.steps_to_goal()
    if d is None:
        return None
    return Truth(float(raw.progress()), float(d), _steps_left(env))


def _action(edge: Edge) -> str:
    """What the runner would hand the env for this edge (search/agent.py ``_commit``)."""
    return edge.action if edge.action is not None else (edge.raw or "(no action)")


@dataclass
class _State:
    snap: Any
    truth: Truth | None


def _unit(value: float | None, scale: str) -> float | None:
    if value is None:
        return None
    return (value + 1.0) / 2.0 if scale == "signed" else float(value)


def replay_tree(tree: Tree, env: EpisodeRules, key: str, t: int, out: Collected) -> bool:
    """Rows for one tree; ``env`` is at the tree's root state and is left there."""
    root_snap = env.snapshot()
    root_truth = truth_now(env)
    if root_truth is None:
        out.skipped[f"no ground truth ({env.unwrapped.family})"] += 1
        return False
    states: dict[int, _State] = {0: _State(root_snap, root_truth)}
    cache: dict[tuple[int, str], Truth | None] = {}

    def successor(node: Node, action: str, stop: bool) -> Truth | None:
        """Truth after ``action`` from ``node``'s state (cached per node and action)."""
        k = (node.node_id, action)
        if k not in cache:
            env.restore(states[node.node_id].snap)
            env.step(action)
            cache[k] = truth_now(env, ended=stop)
        return cache[k]

    scale = str(tree.meta.get("value_scale") or "unit")
    try:
        for node in tree.nodes[1:]:       # creation order: a parent comes before its children
            edge, parent = node.incoming, node.parent
            env.restore(states[parent.node_id].snap)
            step = env.step(_action(edge))
            truth = truth_now(env, ended=edge.is_stop)
            if not (edge.is_stop or edge.is_none) and node.obs is not None \
                    and step.obs.text != node.obs:
                out.skipped["obs_mismatch"] += 1
                return False
            cache[(parent.node_id, _action(edge))] = truth
            states[node.node_id] = _State(env.snapshot(), truth)
        evaluated = set(tree.eval_order)
        for node in tree.nodes:
            truth = states[node.node_id].truth
            if node.node_id in evaluated and node.value_record is not None \
                    and truth is not None:
                out.values.append(_value_row(node, truth, scale, key, t))
            if node.expanded and node.edges and truth is not None and \
                    math.isfinite(truth.steps_to_goal) and truth.steps_to_goal > 0:
                row = _policy_row(node, truth, env, states, successor, key, t)
                if row is not None:
                    out.policy.append(row)
        srow = _search_row(tree, successor, key, t)
        if srow is not None:
            out.search.append(srow)
    finally:
        env.restore(root_snap)
    return True


def _value_row(node: Node, truth: Truth, scale: str, key: str, t: int) -> ValueRow:
    rec = node.value_record or {}
    # a value no sample gave is unknown, also where the run's ``parse_failure: zero`` stored a 0
    # for it (docs/methods/debate.md#unknown-values): counted as a parse failure, never as 0
    unknown = node.info.get("value_unknown") or rec.get("all_failed")
    return ValueRow(
        episode=key, t=t, node=node.node_id, depth=node.depth,
        kind=str(rec.get("kind") or "single"),
        value=None if unknown else _unit(node.value, scale),
        progress=truth.progress, solvable=truth.solvable, steps_to_goal=truth.steps_to_goal,
        steps_left=truth.steps_left, reflections=bool(rec.get("retrieved_reflection_ids")),
        samples=len(rec.get("samples") or ()), parse_fail=int(rec.get("n_parse_fail") or 0))


def _policy_row(node: Node, truth: Truth, env: EpisodeRules, states: dict[int, _State],
                successor, key: str, t: int) -> PolicyRow | None:
    env.restore(states[node.node_id].snap)
    legal = list(env.legal_actions())
    after: dict[str, float] = {}
    for a in legal:
        tr = successor(node, a, False)
        if tr is None:
            return None
        after[env.canonical(a)] = tr.steps_to_goal
    edge_steps = []
    for e in node.edges:
        tr = successor(node, _action(e), e.is_stop)
        edge_steps.append(math.inf if tr is None or e.is_none else tr.steps_to_goal)
    candidates = list(after.values()) + edge_steps
    # optimal: a successor that needs one step fewer (the best any candidate reaches, when the
    # oracle's distance is only an upper bound and no candidate does)
    best = min([truth.steps_to_goal - 1, *candidates])
    if not any(math.isfinite(s) and s <= best for s in candidates):
        return None                                       # nothing reachable from here
    if legal and all(s <= best for s in after.values()):
        return None                                       # every action is optimal
    optimal = [math.isfinite(s) and s <= best for s in edge_steps]
    chance = (sum(1 for s in after.values() if s <= best) / len(after)) if after else math.nan
    return PolicyRow(key, t, node.node_id, node.depth, optimal, [e.prior for e in node.edges],
                     any(e.is_none for e in node.edges), chance,
                     bool(node.retrieved_policy_refl))


def _search_row(tree: Tree, successor, key: str, t: int) -> SearchRow | None:
    root = tree.root
    if not tree.decision_edges or not root.edges:
        return None
    committed = tree.edge(tree.decision_edges[0])
    top = max(root.edges, key=lambda e: e.prior)         # first of the highest prior
    a, b = (successor(root, _action(e), e.is_stop) for e in (committed, top))
    if a is None or b is None:
        return None
    return SearchRow(key, t, committed.key, top.key, committed.key != top.key,
                     a.steps_to_goal, b.steps_to_goal, a.progress, b.progress)


def families_with_truth() -> list[str]:
    """The registered env families that define ground truth (override ``Env.steps_to_goal``);
    an optional family whose package is not installed is left out."""
    out = []
    for name in sorted(ENVS):
        try:
            cls = env_class(name)
        except ImportError:
            continue
        if cls.steps_to_goal is not Env.steps_to_goal:
            out.append(name)
    return out


def _rules(config: dict[str, Any], record: dict[str, Any]) -> EpisodeRules:
    task = Task.from_dict(record["task"])
    env = make_for(task, **(record.get("env_options") or config.get("env_options") or {}))
    cap = config.get("max_episode_steps", config.get("max_steps"))   # also before the rename
    return EpisodeRules(env, cap or DEFAULT_MAX_STEPS,
                        config.get("max_invalid_streak"), config.get("repeat_limit"))


def replay_episode(run: RunDir, config: dict[str, Any], record: dict[str, Any],
                   out: Collected) -> None:
    """Rows for every tree of one episode (see the module docstring)."""
    key = str(record["key"])
    try:
        trees = read_trees(run, key)
    except TreeFormatError as exc:
        print(f"warning: {exc}", file=sys.stderr)
        out.skipped["unreadable tree"] += 1
        return
    if not trees:
        return
    out.episodes += 1
    env = _rules(config, record)
    out.families.add(env.unwrapped.family)
    env.reset(Task.from_dict(record["task"]))
    steps = record.get("steps") or []
    for t, step in enumerate(steps + [None]):
        if t in trees:
            out.trees += 1
            replay_tree(trees[t], env, key, t, out)
        if step is None or env.unwrapped.done:
            return
        if "backtrack" in (step.get("info") or {}):
            out.skipped["backtrack in the executed path"] += 1
            return
        if (step.get("info") or {}).get("no_action"):
            env.set_clock(env.clock() + 1)   # a NONE edge: the runner's step, the env untouched
            continue
        obs = env.step(step["action"]).obs.text
        if obs != step.get("obs", obs):
            out.skipped["executed obs_mismatch"] += 1
            return


def collect(path: str | Path, limit: int | None = None, progress: bool = False) -> Collected:
    run = RunDir(path)
    if not run.episodes_file.exists():
        raise DiagnoseError(f"{run.path} is not a run directory (no episodes.jsonl)")
    try:
        config, records = run.config(), run.episodes()
    except (FileNotFoundError, ValueError) as exc:
        raise DiagnoseError(str(exc)) from None
    if limit is not None:
        records = records[:limit]
    out = Collected()
    items: Iterable = records
    if progress:
        items = tqdm(records, desc=f"diagnose {run.path.name}", unit="ep", leave=False)
    for record in items:
        replay_episode(run, config, record, out)
    return out


# --- statistics --------------------------------------------------------------------------------
def _mean(xs: list[float]) -> float:
    return float(np.mean(xs)) if xs else math.nan


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman rank correlation; NaN with fewer than 3 points or a constant side."""
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return math.nan
    from scipy.stats import spearmanr

    return float(spearmanr(xs, ys).statistic)


def tobit_noise(values: list[float], truths: list[float], lo: float = 0.0,
                hi: float | list[float] = 1.0) -> tuple[float, float]:
    """(bias, sigma) of ``value = clip(truth + bias + sigma·ε, lo, hi)``, ε standard normal,
    fitted by maximum likelihood (values at ``lo`` / ``hi`` are censored; ``hi`` may differ per
    point); NaN with fewer than 5 points.

    The heuristic value is truth + Gaussian noise clipped to its range, so this recovers its
    configured noise where a plain RMSE would be pulled down by the clipping."""
    v, p = np.asarray(values, float), np.asarray(truths, float)
    if len(v) < 5:
        return math.nan, math.nan
    from scipy.optimize import minimize
    from scipy.stats import norm

    top = np.broadcast_to(np.asarray(hi, float), v.shape)
    at_lo, at_hi = v <= lo + 1e-9, v >= top - 1e-9
    mid = ~(at_lo | at_hi)

    def nll(theta: np.ndarray) -> float:
        b, log_s = theta
        s = math.exp(log_s)
        mu = p + b
        ll = norm.logpdf(v[mid], mu[mid], s).sum()
        ll += norm.logcdf((lo - mu[at_lo]) / s).sum()
        ll += norm.logsf((top[at_hi] - mu[at_hi]) / s).sum()
        return -float(ll)

    resid = v - p
    start = np.array([float(resid.mean()), math.log(max(float(resid.std()), 1e-3))])
    fit = minimize(nll, start, method="Nelder-Mead",
                   options={"xatol": 1e-5, "fatol": 1e-7, "maxiter": 2000})
    return float(fit.x[0]), float(math.exp(fit.x[1]))


def reliability(rows: list[ValueRow], bins: int = RELIABILITY_BINS) -> list[dict[str, Any]]:
    """Per bin of the value: its mean, the mean progress, the share of solvable states, n."""
    out = []
    for i in range(bins):
        lo, hi = i / bins, (i + 1) / bins
        sel = [r for r in rows if lo <= r.value < hi or (i == bins - 1 and r.value == 1.0)]
        out.append({"lo": lo, "hi": hi, "n": len(sel), "value": _mean([r.value for r in sel]),
                    "progress": _mean([r.progress for r in sel]),
                    "solvable": _mean([float(r.solvable) for r in sel])})
    return out


def value_stats(rows: list[ValueRow], cap: float | None = None) -> dict[str, Any]:
    """Calibration of known values against the truth (see the module docstring); ``cap``: the
    value function's declared top for states short of success (the heuristic's ``cap``)."""
    known = [r for r in rows if r.value is not None]
    v = [r.value for r in known]
    p = [r.progress for r in known]
    s = [float(r.solvable) for r in known]
    err = [a - b for a, b in zip(v, p)]
    tops = [1.0 if cap is None or r.progress >= 1.0 else cap for r in known]
    bias, sigma = tobit_noise(v, p, hi=tops)
    rel = reliability(known)
    ece = sum(b["n"] * abs(b["value"] - b["solvable"]) for b in rel if b["n"]) / len(known) \
        if known else math.nan
    samples = sum(r.samples for r in rows)
    return {
        "n": len(known), "unknown": len(rows) - len(known),
        "bias": _mean(err), "mae": _mean([abs(e) for e in err]),
        "rmse": math.sqrt(_mean([e * e for e in err])) if err else math.nan,
        "spearman": spearman(v, p), "noise_fit": sigma, "bias_fit": bias,
        "brier": _mean([(a - b) ** 2 for a, b in zip(v, s)]), "ece": ece,
        "solvable_share": _mean(s),
        "parse_fail_share": sum(r.parse_fail for r in rows) / samples if samples else math.nan,
    }


def _depth(d: int) -> str:
    return f"{DEPTH_CAP}+" if d >= DEPTH_CAP else str(d)


def policy_stats(rows: list[PolicyRow]) -> dict[str, Any]:
    return {
        "n": len(rows),
        "recall_at_1": _mean([float(bool(r.optimal) and r.optimal[0]) for r in rows]),
        "recall_at_b": _mean([float(any(r.optimal)) for r in rows]),
        "b": max((len(r.optimal) for r in rows), default=0),
        "optimal_prior_mass": _mean([sum(p for p, o in zip(r.priors, r.optimal) if o)
                                     for r in rows]),
        "chance_mass": _mean([r.chance for r in rows if math.isfinite(r.chance)]),
        "none_share": _mean([float(r.none) for r in rows]),
    }


def search_stats(rows: list[SearchRow]) -> dict[str, Any]:
    diff = [r for r in rows if r.differs]

    def better(a: float, b: float, pa: float, pb: float) -> int:
        return (a < b) - (a > b) if a != b else (pa > pb) - (pa < pb)
    verdict = [better(r.committed_steps, r.top_steps, r.committed_progress, r.top_progress)
               for r in diff]
    return {
        "n": len(rows), "differs": len(diff), "differs_share": _mean([float(r.differs)
                                                                     for r in rows]),
        "search_better": sum(1 for x in verdict if x > 0),
        "policy_better": sum(1 for x in verdict if x < 0),
        "equal": sum(1 for x in verdict if x == 0),
        "committed_optimal": _mean([float(r.committed_steps <= r.top_steps) for r in rows]),
    }


def summarise(c: Collected, configured: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every section's numbers; ``configured``: the run's value options
    (:func:`configured_value`), whose heuristic ``cap`` bounds the noise fit."""
    by_kind: dict[str, list[ValueRow]] = defaultdict(list)
    for r in c.values:
        by_kind[r.kind].append(r)
    value = {}
    for kind, rows in sorted(by_kind.items()):
        cap = (configured or {}).get("cap") if kind == "heuristic" else None
        depths: dict[str, list[ValueRow]] = defaultdict(list)
        for r in rows:
            depths[_depth(r.depth)].append(r)
        value[kind] = {"all": value_stats(rows, cap),
                       "by_depth": {d: value_stats(rs, cap) for d, rs in sorted(depths.items())},
                       "reliability": reliability([r for r in rows if r.value is not None])}
        refl = [r for r in rows if r.reflections]
        if refl and len(refl) < len(rows):
            value[kind]["reflections"] = {
                "with": value_stats(refl, cap),
                "without": value_stats([r for r in rows if not r.reflections], cap)}
    policy: dict[str, Any] = {"all": policy_stats(c.policy)}
    depths_p: dict[str, list[PolicyRow]] = defaultdict(list)
    for r in c.policy:
        depths_p[_depth(r.depth)].append(r)
    policy["by_depth"] = {d: policy_stats(rs) for d, rs in sorted(depths_p.items())}
    refl_p = [r for r in c.policy if r.reflections]
    if refl_p and len(refl_p) < len(c.policy):
        policy["reflections"] = {"with": policy_stats(refl_p),
                                 "without": policy_stats([r for r in c.policy
                                                          if not r.reflections])}
    return {"episodes": c.episodes, "trees": c.trees, "families": sorted(c.families),
            "skipped": dict(c.skipped), "value": value, "policy": policy,
            "search": search_stats(c.search)}


# --- configured roles --------------------------------------------------------------------------
def configured_value(config: dict[str, Any]) -> dict[str, Any]:
    """The value options the run's agent was built with (heuristic noise and cap), if any."""
    try:
        name, options, preset = resolve(str(config.get("agent")),
                                        dict(config.get("agent_options") or {}))
        if name != "search":
            return {}
        opts = parse_agent_options(options, preset or name)
    # an agent this clew cannot build any more: diagnose what is on disk
    except Exception:  # noqa: BLE001
        return {}
    out: dict[str, Any] = {"algorithm": opts.search.algorithm,
                           "roles": "lm" if opts.lm_roles else "heuristic"}
    if opts.distilled_value is not None:      # a learned value: no noise of its own
        out.update(value_kind="learned", value_model=opts.distilled_value.model_spec)
    elif not opts.lm_roles:
        out.update(noise=opts.value.noise, cap=opts.value.cap)
    else:
        out["value_kind"] = opts.value.kind
    return out


# --- writing -----------------------------------------------------------------------------------
def _nan_to_none(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _nan_to_none(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_nan_to_none(v) for v in x]
    return x


def plot(doc: dict[str, Any], folder: Path) -> list[Path]:
    """Reliability diagram and error by depth, per value kind; the files written."""
    plt = plots.pyplot()
    written = []
    value = doc.get("value") or {}
    if any(v["all"]["n"] for v in value.values()):
        fig, ax = plt.subplots(figsize=(5, 4.5))
        ax.plot([0, 1], [0, 1], color="#bbb", lw=1, ls="--")
        for kind, v in value.items():
            pts = [b for b in v["reliability"] if b["n"]]
            xs = [b["value"] for b in pts]
            ax.plot(xs, [b["progress"] for b in pts], "o-", label=f"{kind}: progress")
            ax.plot(xs, [b["solvable"] for b in pts], "s:", label=f"{kind}: solvable")
        ax.set_xlabel("value (mean of bin)")
        ax.set_ylabel("truth (mean of bin)")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize=8)
        ax.set_title("Value reliability")
        written.append(plots.save(fig, folder / "reliability.png"))
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for kind, v in value.items():
            ds = [(d, s) for d, s in v["by_depth"].items() if s["n"]]
            ax.plot([d for d, _ in ds], [s["mae"] for _, s in ds], "o-", label=f"{kind} MAE")
            ax.plot([d for d, _ in ds], [s["brier"] for _, s in ds], "s:", label=f"{kind} Brier")
        ax.set_xlabel("depth in the tree")
        ax.legend(fontsize=8)
        ax.set_title("Value error by depth")
        written.append(plots.save(fig, folder / "by_depth.png"))
    return written


def diagnose_run(path: str | Path, *, limit: int | None = None,
                 progress: bool = False) -> dict[str, Any]:
    """Replay, summarise and write ``RUN/diagnose/`` (see the module docstring)."""
    run = RunDir(path)
    collected = collect(path, limit, progress)
    configured = configured_value(run.config())
    doc = summarise(collected, configured)
    doc["run"] = str(run.path)
    doc["configured"] = configured
    folder = run.path / "diagnose"
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(_nan_to_none({"row": "value", **asdict(r)})) for r in collected.values]
    lines += [json.dumps(_nan_to_none({"row": "policy", **asdict(r)}))
              for r in collected.policy]
    lines += [json.dumps(_nan_to_none({"row": "search", **asdict(r)}))
              for r in collected.search]
    atomic_write_text(folder / "nodes.jsonl", "".join(x + "\n" for x in lines))
    doc["plots"] = [p.name for p in plot(doc, folder)]
    atomic_write_json(folder / "diagnose.json", _nan_to_none(doc))
    return doc


def load(path: str | Path) -> dict[str, Any] | None:
    """A run's ``diagnose/diagnose.json``, or None when ``clew diagnose`` has not run on it."""
    file = Path(path) / "diagnose" / "diagnose.json"
    if not file.exists():
        return None
    return json.loads(file.read_text())


# --- people-facing -----------------------------------------------------------------------------
def _f(x: Any, digits: int = 3) -> str:
    return f"{x:.{digits}f}" if isinstance(x, (int, float)) and math.isfinite(x) else "-"


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """What ``clew diagnose`` prints for one run."""
    lines = [f"{doc['run']}: {doc['episodes']} episode(s), {doc['trees']} tree(s) replayed"
             + (f"; skipped: {json.dumps(doc['skipped'])}" if doc["skipped"] else "")]
    conf = doc.get("configured") or {}
    for kind, v in doc["value"].items():
        a = v["all"]
        noise = f" (configured noise {conf['noise']})" if kind == "heuristic" and \
            "noise" in conf else ""
        lines.append(f"  value {kind}: n {a['n']}, unknown {a['unknown']}, bias {_f(a['bias'])}, "
                     f"MAE {_f(a['mae'])}, Spearman {_f(a['spearman'])}, noise fit "
                     f"{_f(a['noise_fit'])}{noise}, Brier {_f(a['brier'])}, ECE {_f(a['ece'])}")
    p = doc["policy"]["all"]
    if p["n"]:
        lines.append(f"  policy: {p['n']} expansion(s), recall@1 {_f(p['recall_at_1'])}, "
                     f"recall@{p['b']} {_f(p['recall_at_b'])}, prior mass on optimal "
                     f"{_f(p['optimal_prior_mass'])} (uniform {_f(p['chance_mass'])}), nothing "
                     f"parsed {_f(p['none_share'])}")
    s = doc["search"]
    if s["n"]:
        lines.append(f"  search: committed != top prior in {s['differs']}/{s['n']} tree(s); "
                     f"oracle prefers search {s['search_better']}, policy {s['policy_better']}, "
                     f"equal {s['equal']}")
    if not doc["value"] and not p["n"]:
        fams = ", ".join(doc["families"]) or "this run's envs"
        lines.append(f"  nothing to measure: no ground truth for {fams} (Env.steps_to_goal is "
                     f"defined for {', '.join(families_with_truth())})"
                     if doc["trees"] else "  nothing to measure: the run recorded no trees")
    lines.append(f"  -> {Path(doc['run']) / 'diagnose'}")
    return lines
