"""Does a distilled model read the observation? (docs/results.md#why-grid-maps-and-rooms-stayed-at-random-round-2)

One rule per family, each reading a single line of the observation:

* grid map: never undo the previous move unless nothing else is legal;
* rooms: pick up a ball when one is visible, else take a door other than the one just used.

Two measurements, one JSON line each:

* ``rules``: the rule against the uniform random walk on a task file (``clew`` task JSONL), so
  it says how much a model that learned only this rule would gain over random;
* ``probe``: on the chats of a ``clew data`` JSONL, at the last turn of each chat where the rule
  narrows the choice (rooms: where a ball is in sight), the model's probability of the answers the rule allows (its probabilities
  of the legal answers, renormalised), beside the teacher's rate and the uniform share. A model
  that reads the line puts more than the uniform share there.

  python benchmarks/distill_reads.py rules --tasks FILE [--episodes 300]
  python benchmarks/distill_reads.py probe --model DIR --data el.jsonl [--turns 300]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import statistics
from pathlib import Path

from clew.agents.lm.base import LMError
from clew.envs.base import Task
from clew.envs.registry import make_for
from clew.envs.suites import load_tasks_file
from clew.records.jsonl import read_jsonl

OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}
ANSWER = re.compile(r"Next action: ```(.*?)```")


def allowed(env: str, legal: list[str], previous: str | None) -> list[str]:
    """The legal answers the family's rule allows (all of them where it says nothing)."""
    if env == "gridmap":
        back = OPPOSITE.get(previous or "")
        rest = [a for a in legal if a != back]
        return rest or legal
    if env == "rooms":
        balls = [a for a in legal if a.endswith("ball")]
        return balls or [a for a in legal if a != previous] or legal
    raise ValueError(f"no rule for env {env!r} (gridmap, rooms)")


def play(task: Task, rule: bool, rng: random.Random, max_steps: int = 40) -> float:
    """One episode of the rule (or of the uniform walk); its grade. The grid map's own budget
    ends its episodes; rooms get the experiment's 40 actions."""
    env = make_for(task)
    env.reset(task)
    previous = None
    steps = task.params.get("budget", max_steps) if task.env == "gridmap" else max_steps
    for _ in range(steps):
        legal = env.legal_actions()
        action = rng.choice(allowed(task.env, legal, previous) if rule else legal)
        previous = action
        if env.step(action).terminated:
            break
    return float(env.grade())


def rules(args: argparse.Namespace) -> dict:
    tasks = load_tasks_file(Path(args.tasks))
    per_task = args.episodes // max(len(tasks), 1)
    if per_task < 1:
        raise SystemExit(f"error: {args.tasks}: --episodes {args.episodes} is less than one per "
                         f"task ({len(tasks)} tasks)")
    out = {"bench": "distill_reads.rules", "tasks": args.tasks, "episodes": 0}
    for name, rule in (("uniform", False), ("rule", True)):
        rng = random.Random(args.seed)
        grades = [play(t, rule, rng) for t in tasks for _ in range(per_task)]
        out["episodes"] = len(grades)
        out[name] = round(statistics.fmean(grades), 4)
        out[f"{name}_se"] = round(statistics.stdev(grades) / math.sqrt(len(grades)), 4)
    return out


def turn(row: dict) -> tuple[list[str], list[str], str] | None:
    """(legal answers, answers the rule allows, teacher's answer) at a chat's last turn, or None
    where the rule leaves the choice as it is."""
    env, user, target = row["meta"]["env"], row["messages"][-2]["content"], row["messages"][-1]["content"]
    answer = ANSWER.search(target)
    if env == "gridmap":
        moves = re.search(r"Legal moves: ([a-z, ]+)\.", user)
        previous = re.search(r"PREVIOUS ACTION: (\S+)", user)
        legal = moves.group(1).split(", ") if moves else []
        ok = allowed(env, legal, previous.group(1) if previous else None)
    else:
        # rooms: only the turns with a ball in sight (the teacher itself often goes back through
        # the door it came by, so the door half of the rule says little about what it teaches)
        seen = re.findall(r"You see: (.*)", user)
        legal = seen[-1].split(", ") if seen else []
        ok = [a for a in legal if a.endswith("ball")]
    if not answer or answer.group(1) not in legal:
        return None  # a backtrack, or a reply the probe cannot place among the legal answers
    return (legal, ok, answer.group(1)) if 0 < len(ok) < len(legal) else None


def probe(args: argparse.Namespace) -> dict:
    import torch
    from clew.agents.lm.hf import HFModel

    torch.set_num_threads(1)
    # the constrained agent's own scorer: each legal answer, its closing fence and the end of
    # the turn, after the prompt and the target's text up to the opening fence
    lm = HFModel(args.model, device="cpu")
    rows = [r for r in read_jsonl(args.data) if r["meta"]["env"] in ("gridmap", "rooms")]
    random.Random(args.seed).shuffle(rows)
    model_share, teacher, uniform, n = 0.0, 0, 0.0, 0
    for row in rows:
        found = turn(row)
        if found is None:
            continue
        legal, ok, answer = found
        target = row["messages"][-1]["content"]
        context = (lm.prompt_ids(row["messages"][:-1])
                   + lm.text_ids(target[: target.index("```") + 3]))
        logp = dict(zip(legal, lm.choice_logprobs([context], [legal])[0]))
        top = max(logp.values())
        z = sum(math.exp(v - top) for v in logp.values())
        model_share += sum(math.exp(logp[a] - top) for a in ok) / z
        teacher += answer in ok
        uniform += len(ok) / len(legal)
        n += 1
        if n >= args.turns:
            break
    if n == 0:
        raise SystemExit(f"error: {args.data}: no grid-map or rooms turn where the rule narrows "
                         "the choice")
    return {"bench": "distill_reads.probe", "model": args.model, "data": args.data, "turns": n,
            "model_share": round(model_share / n, 3), "teacher_share": round(teacher / n, 3),
            "uniform_share": round(uniform / n, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("rules")
    r.add_argument("--tasks", required=True)
    r.add_argument("--episodes", type=int, default=300)
    p = sub.add_parser("probe")
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--turns", type=int, default=300)
    for q in (r, p):
        q.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    try:
        print(json.dumps(rules(args) if args.cmd == "rules" else probe(args)))
    except (OSError, ValueError, LMError) as e:  # a task or chat file, a model, unreadable
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
