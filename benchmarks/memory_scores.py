"""Retrieval scores of the reflection memory per env family, to calibrate ``memory.min_score``
(docs/methods/reflection-memory.md#scores).

R-MCTS with heuristic roles (no model: sampled priors over legal actions, noisy ground-truth
value, template reflections) plays the first tasks of a family's train split in task order, one
episode per wave (each sees every earlier episode's reflections), with ``min_score = -1`` so
that every top-m match is returned and logged. The script reads the logged scores back from the
trees (``policy_refl_scores`` on expanded nodes, ``retrieved_scores`` in value records) and
prints, per family, the quantiles of the best score of each query and of all returned scores,
and the cut the docs adopt: the median best score (a reflection is shown where its state is
closer than the family's typical best match). Keys are what the agent builds
(``Env.memory_view``), so the numbers follow the key form.

``--keys`` instead compares the two key forms: the states of random walks on the first tasks of
each split, keyed the old way ("Task: <first 40 words of the instructions>" + the
observation) and by ``Env.memory_view``; it prints quantiles of the cosine similarity between
keys of states of *different* tasks (what retrieval has to tell apart).

    python benchmarks/memory_scores.py --tasks 12
    python benchmarks/memory_scores.py --keys
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import itertools
import json
import random
import statistics
import tempfile
from pathlib import Path

from clew.envs.suites import resolve
from clew.records import RunDir
from clew.runner.episodes import run_suite
from clew.runner.registry import build_agent

SUITES = {"gridmap": "gridmap-v1:train", "rooms": "rooms-v1:train",
          "textminigrid": "textminigrid-v1:train", "oracle-search": "paper-003-main:train"}


def quantiles(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {}
    qs = statistics.quantiles(xs, n=20, method="inclusive")
    return {"n": len(xs), "p10": round(qs[1], 3), "p25": round(qs[4], 3),
            "p50": round(statistics.median(xs), 3), "p75": round(qs[14], 3),
            "p90": round(qs[17], 3)}


def logged_scores(run: Path, families: dict[str, str]
                  ) -> tuple[list[float], list[float], dict[str, list[float]]]:
    """Best and all logged scores, and the best ones by env family (``families``: env name ->
    ``Env.family``; its cut is the env class's ``memory_min_score``)."""
    best, every, by_family = [], [], {}
    for file in sorted((run / "trees").rglob("*.json.gz")):
        tree = json.loads(gzip.decompress(file.read_bytes()))
        family = families[tree["meta"]["env"]]
        for node in tree["nodes"]:
            lists = [node["info"].get("policy_refl_scores") or []]
            record = node.get("value_record") or {}
            lists.append(record.get("retrieved_scores") or [])
            for scores in lists:
                if scores:
                    best.append(max(scores))
                    every.extend(scores)
                    by_family.setdefault(family, []).append(max(scores))
    return best, every, by_family


def key_similarity(suite: str, n_tasks: int = 12, steps: int = 6) -> dict[str, dict]:
    """Cosine similarity between keys of states of different tasks, old and new key forms."""
    from clew.agents.memory_store import Embedder
    from clew.agents.prompts import short_task
    from clew.envs.registry import make_for

    keys: dict[str, list[tuple[str, str]]] = {"old": [], "new": []}
    for task in resolve(suite)[:n_tasks]:
        env = make_for(task)
        obs = [env.reset(task).text]
        rng = random.Random(task.seed)
        for _ in range(steps):
            legal = env.legal_actions()
            if not legal or env.done:
                break
            obs.append(env.step(rng.choice(legal)).obs.text)
        old_task = short_task(env.instructions())
        keys["old"] += [(task.id, f"Task: {old_task}\nObservation:\n{o}") for o in obs]
        keys["new"] += [(task.id, env.memory_view(o)) for o in obs]
    emb = Embedder()
    out = {}
    for form, pairs in keys.items():
        vecs = emb.encode([k for _, k in pairs])
        sims = [float(vecs[i] @ vecs[j]) for i, j in itertools.combinations(range(len(pairs)), 2)
                if pairs[i][0] != pairs[j][0]]
        out[form] = {"min": round(min(sims), 3), **quantiles(sims), "max": round(max(sims), 3)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=12, help="first N tasks of each train split")
    p.add_argument("--max-steps", type=int, default=30)
    p.add_argument("--simulations", type=int, default=5)
    p.add_argument("--family", action="append", help=f"one of {', '.join(SUITES)}")
    p.add_argument("--keys", action="store_true", help="compare the old and new key forms")
    args = p.parse_args()
    if args.keys:
        for family in args.family or list(SUITES):
            print(json.dumps({"family": family, "suite": SUITES[family],
                              **key_similarity(SUITES[family], args.tasks)}), flush=True)
        return
    for family in args.family or list(SUITES):
        tasks = resolve(SUITES[family])
        if family == "oracle-search":   # the first N of each of the three families
            per = {}
            for t in tasks:
                per.setdefault(t.env, [])
                if len(per[t.env]) < args.tasks:
                    per[t.env].append(t)
            tasks = [t for ts in per.values() for t in ts]
        else:
            tasks = tasks[:args.tasks]
        with tempfile.TemporaryDirectory() as tmp:
            run = RunDir(Path(tmp) / "run")
            run.open({}, resume=False)
            opts = {"roles": "heuristic", "search": {"n_simulations": args.simulations},
                    "memory": {"dir": str(Path(tmp) / "memory"), "min_score": -1.0},
                    "reflection": {"policy": {"threshold": 0.0}, "value": {"threshold": 0.0}}}
            asyncio.run(run_suite(lambda opts=opts: build_agent("rmcts", **opts), tasks, run,
                                  concurrency=1, max_steps=args.max_steps, progress=False,
                                  waves=True))
            from clew.envs.registry import make_for

            families = {t.env: make_for(t).family for t in tasks}
            best, every, by_family = logged_scores(run.path, families)
        rows = by_family.items() if family == "oracle-search" else [(family, best)]
        for fam, xs in rows:
            q = quantiles(xs)
            print(json.dumps({"family": fam, "suite": SUITES[family], "tasks": len(tasks),
                              "best_score": q, "cut_p50": q.get("p50"),
                              "all_scores": quantiles(every) if fam == family else None}),
                  flush=True)


if __name__ == "__main__":
    main()
