"""The progress bar counts episodes as they finish (issue 19 item 5): two episodes done, then a
long wait on a slow model, and the bar must already say 2/4."""

from __future__ import annotations

import asyncio
import io
import sys
from typing import ClassVar

from clew.agents.base import BaseAgent, Decision
from clew.records import RunDir
from clew.runner.episodes import run_suite
from toyenv import line_task, register

register()


class Agent(BaseAgent):
    """Tasks 0 and 1 finish at once; the others wait (a hanging server), and the first of them
    notes what the bar shows meanwhile."""

    name = "waits"
    seen: ClassVar[list[str]] = []

    async def act(self, episode):
        if episode.task.seed >= 2 and not Agent.seen:
            await asyncio.sleep(0.5)  # two episodes done long ago, nothing since
            Agent.seen.append(sys.stderr.getvalue())
        return Decision("right")


def test_the_bar_shows_finished_episodes_while_the_others_wait(tmp_path, monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    run = RunDir(tmp_path / "run")
    run.open({}, resume=False)
    tasks = [line_task(i, length=1) for i in range(4)]
    counts = asyncio.run(run_suite(Agent, tasks, run, concurrency=4, progress=True))
    run.close()
    assert counts["finished"] == 4
    shown = Agent.seen[0].replace("\n", "\r").split("\r")
    last = [x for x in shown if "episodes" in x][-1]
    assert "2/4" in last, last
