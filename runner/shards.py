"""``clew merge SHARD_DIR... --out DIR``: combine shard run directories into one (docs/scale-out.md).

A suite split is sharded with ``--shard i/n`` (the runner keeps ``tasks[i::n]``); each shard
writes its own run directory. Merging checks the shards belong to one run, takes every finished
episode once, copies the search trees, and recomputes ``metrics.json`` and ``summary.md`` with
:func:`clew.runner.evaluate.finalize`, so the merged directory reads exactly like an unsharded run.

Decisions:

* Shards must agree on every config field that a resume compares (agent, options, suite, ...)
  except ``shard``; a difference is an error naming the field and both directories.
* An episode present in two directories (a shard rerun, an overlap) is kept once when both
  records are equal apart from :data:`VOLATILE` fields (wall time); different records are an
  error naming the key, both directories and the fields that differ, since silently picking one
  would make the merge depend on argument order.
* Missing shards (``0/4, 1/4, 3/4`` given) are an error unless ``allow_missing``: a merged run
  that quietly covers 3/4 of a suite would be compared against full runs.
* The merged ``config.yaml`` is the shards' config with ``shard: null`` and ``merged_from``
  listing the sources; ``clew eval --resume`` on it with the unsharded config fills in any tasks
  still missing.
* Episodes are written in suite order (task order, then repeat) when the suite resolves, else by
  key. Failed episodes (``errors.jsonl``) are kept unless the episode finished in another shard.
* Recorded LM calls (``lm/``, docs/methods/recording.md) are kept per episode, so the merged
  run's recording is the shards' episode files of the kept episodes, and its models those of
  every shard: the merged run replays like an unsharded one.
* Reflection memories are per shard and are not merged (their index format belongs to the
  memory module): each shard's ``memory/`` is copied to ``shard_memory/<i>-of-<n>/``. Since a
  run records its memory folder relative to itself (absent when it is ``memory/``), shards of
  one R-MCTS run have equal ``agent_options`` and merge.
"""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clew.agents.lm.recording import merge_recordings
from clew.envs.suites import resolve
from clew.records import RunDir, atomic_write_text, dumps, read_jsonl
from clew.records.lock import LOCK_NAME
from clew.records.rundir import first_of_each
from clew.runner.episodes import episode_key
from clew.runner.evaluate import RESUME_KEYS, comparable, finalize


class MergeError(ValueError):
    """Shards that cannot be merged; the message names the directories and the field."""


@dataclass
class Shard:
    run: RunDir
    config: dict[str, Any]
    episodes: list[dict[str, Any]]
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def label(self) -> str:
        s = self.config.get("shard")
        return str(s).replace("/", "-of-") if s else self.run.path.name


def parse_shard(text: Any, where: Path) -> tuple[int, int] | None:
    if text in (None, ""):
        return None
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not m or not int(m[1]) < int(m[2]):
        raise MergeError(f"{where}/config.yaml: shard {text!r} is not of the form i/n")
    return int(m[1]), int(m[2])


def load_shard(path: str | Path) -> Shard:
    run = RunDir(path)
    if not run.path.is_dir():
        raise MergeError(f"{run.path}: no such run directory")
    try:
        return Shard(run, run.config(), run.episodes(), read_jsonl(run.errors_file))
    except (FileNotFoundError, ValueError) as exc:
        raise MergeError(str(exc)) from None


def check_compatible(shards: list[Shard]) -> None:
    first = shards[0]
    for other in shards[1:]:
        for key in RESUME_KEYS:
            if key == "shard":
                continue
            if comparable(first.config, key) != comparable(other.config, key):
                raise MergeError(
                    f"cannot merge {first.run.path} and {other.run.path}: config field {key!r} "
                    f"is {first.config.get(key)!r} in one and {other.config.get(key)!r} in the "
                    f"other")


def check_coverage(shards: list[Shard], allow_missing: bool) -> None:
    parsed = [(s, parse_shard(s.config.get("shard"), s.run.path)) for s in shards]
    if any(p is None for _, p in parsed):
        return  # an unsharded run is among them: it covers everything
    ns = {p[1] for _, p in parsed}
    if len(ns) > 1:
        raise MergeError("shards split the suite differently: " + ", ".join(
            f"{s.run.path} is {s.config['shard']}" for s, _ in parsed))
    n = ns.pop()
    missing = sorted(set(range(n)) - {p[0] for _, p in parsed})
    if missing and not allow_missing:
        raise MergeError(
            f"shard(s) {', '.join(f'{i}/{n}' for i in missing)} missing from the merge; pass "
            f"--allow-missing to merge a partial run")


def dedupe(shards: list[Shard]) -> tuple[dict[str, tuple[dict[str, Any], Shard]], int]:
    """Episodes by key with the shard that holds them; identical duplicates counted."""
    for shard in shards:
        if any(not isinstance(rec.get("key"), str) for rec in shard.episodes):
            raise MergeError(f"{shard.run.episodes_file}: an episode record has no key")

    def conflict(key: str, src: Shard, shard: Shard, diff: list[str]) -> Exception:
        return MergeError(f"episode {key!r} is recorded differently in {src.run.path} and "
                          f"{shard.run.path} (fields: {', '.join(diff)}); remove one of them and "
                          f"merge again")

    kept, dropped = first_of_each(((rec, shard) for shard in shards for rec in shard.episodes),
                                  conflict)
    return {rec["key"]: (rec, shard) for rec, shard in kept}, len(dropped)


def _key_order(config: dict[str, Any]) -> dict[str, int] | None:
    """Episode key -> position in the unsharded suite order, or None if it cannot resolve."""
    try:
        tasks = resolve(str(config.get("suite")))
    except Exception:  # noqa: BLE001 - a moved task file or a suite of another version: fall back to keys
        return None
    if config.get("limit"):
        tasks = tasks[: int(config["limit"])]
    repeats = int(config.get("repeats") or 1)
    return {episode_key(t, r): i * repeats + r for i, t in enumerate(tasks) for r in range(repeats)}


def _sort_key(key: str) -> tuple:
    task, _, rep = key.rpartition("#")
    parts = re.split(r"(\d+)", task)
    return (tuple(int(p) if p.isdigit() else p for p in parts), int(rep) if rep.isdigit() else 0)


def merge_shards(shard_dirs: list[str | Path], out: str | Path, *,
                 allow_missing: bool = False) -> tuple[RunDir, dict[str, int]]:
    """Merge ``shard_dirs`` into the new run directory ``out``; return it and counts."""
    if not shard_dirs:
        raise MergeError("clew merge needs at least one shard directory")
    out = Path(out)
    resolved = {Path(d).resolve() for d in shard_dirs}
    if out.resolve() in resolved:
        raise MergeError(f"--out {out} is one of the shards; choose a new directory")
    shards = [load_shard(d) for d in shard_dirs]
    check_compatible(shards)
    check_coverage(shards, allow_missing)
    kept, dups = dedupe(shards)

    order = _key_order(shards[0].config)
    keys = sorted(kept, key=lambda k: ((0, order[k], ()) if order and k in order
                                       else (1, 0, _sort_key(k))))
    commits = {s.config.get("git_commit") for s in shards}
    if len(commits) > 1:
        print(f"warning: shards come from different commits: {sorted(map(str, commits))}",
              file=sys.stderr)

    config = dict(shards[0].config)
    config["shard"] = None
    config["out"] = str(out)
    config["merged_from"] = [{"path": str(s.run.path), "shard": s.config.get("shard"),
                              "episodes": len(s.episodes),
                              "git_commit": s.config.get("git_commit"),
                              **({"engines": s.config["engines"]} if s.config.get("engines")
                                 else {})} for s in shards]
    run = RunDir(out)
    run.open(config, resume=False)  # refuses a directory that already holds a run
    try:
        counts = _write_merged(run, shards, kept, keys)
    finally:
        run.close()
    return run, {"shards": len(shards), "episodes": len(keys), "duplicates": dups, **counts}


def _write_merged(run: RunDir, shards: list[Shard], kept: dict[str, tuple[dict[str, Any], Shard]],
                  keys: list[str]) -> dict[str, int]:
    skip = shutil.ignore_patterns(LOCK_NAME, ".*.tmp")  # a lock or a kill's leftover temp file
    atomic_write_text(run.episodes_file, "".join(dumps(kept[k][0]) + "\n" for k in keys))
    errors = [e for s in shards for e in s.errors if e.get("key") not in kept]
    if errors:
        atomic_write_text(run.errors_file, "".join(dumps(e) + "\n" for e in errors))
    trees = 0
    for key in keys:
        src = kept[key][1].run.tree_dir(key)
        if src.is_dir():
            shutil.copytree(src, run.tree_dir(key), ignore=skip)
            trees += sum(1 for _ in src.glob("*.json.gz"))
    by_shard: dict[int, list[str]] = {}
    for key in keys:
        by_shard.setdefault(id(kept[key][1]), []).append(key)
    recorded = merge_recordings(run.path, [(s.run.path, by_shard.get(id(s), []))
                                           for s in shards])
    for s in shards:
        mem = shard_memory(s)
        if mem is not None and mem.is_dir():
            shutil.copytree(mem, run.path / "shard_memory" / s.label, ignore=skip)
    finalize(run)
    return {"errors": len(errors), "trees": trees, "recorded": recorded}


def shard_memory(shard: Shard) -> Path | None:
    """The shard's reflection memory when it lives in the shard (its ``memory/``, or a folder
    the config names relative to the run); a store outside the shard is not the shard's to
    copy."""
    options = shard.config.get("agent_options") or {}
    memory = options.get("memory") if isinstance(options, dict) else None
    where = memory.get("dir") if isinstance(memory, dict) else None
    if where is None:
        return shard.run.path / "memory"
    return None if Path(where).is_absolute() else shard.run.resolve(where)
