"""No silent failure (issue 11 items 3-4): parse failures per role and context-length failures
show in the records, metrics.json, summary.md, the report and the progress line; a run past the
parse-failure threshold stops with one clear error naming the role, the model and three outputs,
and keeps its finished episodes; an episode that cannot fit the context is recorded, and
--resume keeps it."""

from __future__ import annotations

import asyncio
import json

import pytest
from clew.agents.lm.fake import FakeLM
from clew.agents.parsing import ParseTally
from clew.cli.main import main
from clew.envs.suites import resolve
from clew.records import RunDir
from clew.reports.report import write_report
from clew.runner.episodes import progress_note, run_suite
from clew.runner.evaluate import finalize
from clew.runner.registry import build_agent

GOOD = {
    "policy": 'The goal is east.\n**Next action:**\n```json\n{"action": "right"}\n```',
    "value": "Thoughts: the agent is moving.\n**STATUS CODE:** C",
    "judge": "Thoughts: on track.\n### Status code: (C)",
    "debate": "The agent moved toward unexplored cells.",
    "reflection": "Explore the unvisited side before committing to a route.",
}
BAD = {   # failing styles: reasoning never closed, cut completions, a quoted scale only
    "policy": ("<think>Which way now? Up looks free but", "length"),
    "value": "Thoughts: STATUS CODE: A only if the goal is active, and it is not.",
    "judge": ("Thoughts: the agent is on track, so STATUS CODE:", "length"),
    "debate": ("The agent has not", "length"),
    "reflection": "<think>What went wrong here",
}
ROLES = ("policy", "value", "rubric", "debate", "judge", "reflection")


def failing_styles(req, i):
    """Every other answer of each role fails; the rubric never has checks."""
    if req.role == "rubric":
        return "I would check the goal."
    role = "reflection" if req.role == "expect" else req.role
    return GOOD[role] if i % 2 == 0 else BAD[role]


def agent_factory(kind, tmp_path):
    options = {"search": {"branching_factor": 2, "n_simulations": 2},
               "policy": {"n_samples_min": 2, "max_tokens": 64},
               "reflection": {"policy": {"threshold": -1.0}, "value": {"threshold": -1.0}},
               "memory": {"dir": str(tmp_path / f"memory-{kind}")}}
    if kind == "rmcts":
        options["value"] = {"single": {"n": 2, "rubric": True}}
    else:
        options["value"] = {"debate": {"judge_samples_per_order": 1}}
    lm = FakeLM(failing_styles, spec="fake:failing-styles")
    return lambda: build_agent(kind, model=lm, **options)


@pytest.mark.slow
def test_every_roles_parse_failure_rate_shows_in_summary_and_report(tmp_path):
    tasks = resolve("gridmap-mini:test")[:2]
    runs = []
    for kind in ("rmcts", "rmcts-mad"):
        run = RunDir(tmp_path / kind)
        run.open({"agent": kind}, resume=False, compare=())
        asyncio.run(run_suite(agent_factory(kind, tmp_path), tasks, run, concurrency=1,
                              max_steps=3, progress=False))
        finalize(run)
        runs.append(run)
    seen = {}
    for run in runs:
        for rec in run.episodes():
            for role, p in rec["parses"].items():
                assert p["model"] == "fake:failing-styles"
                seen.setdefault(role, [0, 0])
                seen[role][0] += p["failures"]
                seen[role][1] += p["outputs"]
    assert set(ROLES) <= set(seen)
    assert all(0 < f <= n for f, n in seen.values())
    metrics = json.loads((runs[1].path / "metrics.json").read_text())
    assert {"policy", "debate", "judge", "reflection"} <= set(
        metrics["aggregate"]["parse_failures"])
    for run, roles in zip(runs, (("policy", "value", "rubric", "reflection"),
                                 ("policy", "debate", "judge", "reflection"))):
        summary = (run.path / "summary.md").read_text()
        assert "parse fail" in summary and "ctx fail" in summary
        for role in roles:
            assert f"{role} " in summary and "%" in summary
    write_report([r.path for r in runs], tmp_path / "report")
    report = (tmp_path / "report" / "report.md").read_text()
    assert "Parse and context-length failures" in report
    for role in ROLES:
        assert f"parse: {role}" in report


def test_progress_note_names_each_role_and_context_failures():
    tally = ParseTally()
    tally.note("judge", "m", [(False, "x"), (True, "STATUS CODE: B")])
    tally.note("policy", "m", [(True, "up")] * 3)
    assert progress_note(tally, 2) == "parse fail: judge 50% policy 0% | ctx fail: 2"


def test_a_run_past_the_threshold_stops_with_one_error_and_keeps_finished_episodes(
        tmp_path, capsys):
    out = tmp_path / "run"
    model = "fake:Next action: ```up```|I am not sure where to go.|<think>Left or right"
    code = main(["eval", "--agent", "react", "--model", model, "--suite", "gridmap-mini:test",
                 "--repeats", "5", "--concurrency", "1", "--out", str(out), "max_episode_steps=6",
                 "parse_failure_min_outputs=10"])
    err = capsys.readouterr().err
    assert code == 3
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1
    assert "role 'policy'" in lines[0] and model in lines[0] and "threshold 50% after 10" in lines[0]
    assert err.count("  output ") == 3 and "I am not sure" in err
    kept = RunDir(out).episodes()
    assert kept and all(r["outcome"]["stopped_by"] in ("max_steps", "done", "invalid_streak")
                        for r in kept)                           # finished ones, whole
    assert "kept in" in err and "--resume" in err


def test_the_threshold_can_be_turned_off(tmp_path):
    out = tmp_path / "run"
    code = main(["eval", "--agent", "react", "--model", "fake:no idea", "--suite",
                 "gridmap-mini:test", "--out", str(out), "max_episode_steps=3",
                 "parse_failure_min_outputs=2", "parse_failure_rate=null"])
    assert code == 0
    recs = RunDir(out).episodes()
    assert len(recs) == 4 and all(r["parses"]["policy"]["failures"] == 3 for r in recs)
    assert "policy 100% (12/12)" in (out / "summary.md").read_text()


# --- context ------------------------------------------------------------------------------------
def react_in(context_length):
    lm = FakeLM(lambda req, i: 'Next action: ```{"action": "up"}```',
                context_length=context_length)
    return lm, lambda: build_agent("react", model=lm, max_tokens=40)


def test_an_episode_that_cannot_fit_is_recorded_and_resume_keeps_it(tmp_path):
    tasks = resolve("gridmap-mini:test")
    lm, factory = react_in(context_length=500)   # the first turns fit, later ones do not
    run = RunDir(tmp_path / "run")
    run.open({"agent": "react"}, resume=False, compare=())
    counts = asyncio.run(run_suite(factory, tasks, run, concurrency=2, max_steps=40,
                                   max_invalid_streak=0, progress=False))
    recs = run.episodes()
    assert counts["finished"] == len(tasks) == len(recs)          # the run went on
    for r in recs:
        assert r["outcome"]["stopped_by"] == "context_length"
        fail = r["outcome"]["failure"]
        assert fail["reason"] == "context_length" and fail["t"] == len(r["steps"]) > 0
        assert "does not fit the context" in fail["detail"]
    # every request the model saw fit, prompt + max_tokens
    assert all(lm.count_tokens(c.messages) + c.sampling.max_tokens <= 500 for c in lm.calls)
    # --resume: the recorded outcome stands, nothing is played again
    before = len(lm.calls)
    again = asyncio.run(run_suite(factory, tasks, run, concurrency=2, max_steps=40,
                                  progress=False))
    assert again["skipped"] == len(tasks) and len(lm.calls) == before
    agg = finalize(run)
    assert agg["context_length_failures"] == len(tasks)
    assert f"| {len(tasks)} |" in (run.path / "summary.md").read_text()
