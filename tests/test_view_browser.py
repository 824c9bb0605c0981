"""The report and the tree viewer for people (issue 19 item 9), in headless Chromium: the summary
table is not cut off at 1400 px; the viewer shows retrieved reflections as text from the run's
memory, explains its badges, links an episode's step pages, and `clew view` prints an address
that opens even for a folder named TASK#0."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from clew.cli.main import main
from clew.reports.report import write_report
from clew.search.tree import save_tree
from report_fixtures import mcts_tree, record, write_run

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CLEW_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
TREES = [mcts_tree(seed, 8) for seed in (1, 2, 3)]  # before the browser: see test_report_browser
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def page():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.errors = errors
        yield pg
        browser.close()


def test_summary_table_is_not_cut_off_at_1400_px(page, tmp_path):
    runs = []
    for name, p, err in (("rmcts-mad-no-vrefl-seed1", 0.25, 0.8),
                         ("rmcts-mad-no-prefl-seed2", 0.5, 0.4),
                         ("tot-bfs-qwen72b-long-run", 0.75, 0.2)):
        metrics = {"exploration_error": err, "exploitation_error": err / 2, "coverage": 0.4,
                   "normalized_reward": 0.5, "gap_total": 1 - p, "gap_exploration": (1 - p) / 2,
                   "gap_exploitation": (1 - p) / 2}
        recs = [record(i, success=i < 4 * p, metrics=metrics, simulated=30,
                       usage={"policy": {"prompt_tokens": 1000, "completion_tokens": 50,
                                         "calls": 3}}) for i in range(4)]
        runs.append(write_run(tmp_path / name, recs, agent_options={"n_simulations": 10}))
    rep = write_report(runs, tmp_path / "report", react=runs[0])
    page.goto((rep.out / "report.html").as_uri())
    width = page.evaluate("window.innerWidth")
    # the page itself is no wider than the window, and every summary column is on screen
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    last = page.locator("#table-summary thead th").last
    assert "wall" in last.inner_text()
    box = last.bounding_box()
    assert box["x"] + box["width"] <= width
    assert page.errors == []


def test_viewer_step_links_reflection_texts_and_badges(page, tmp_path, capsys):
    run = tmp_path / "run"
    episode = run / "trees" / "task#0"   # an episode key, '#' and all
    for step, tree in enumerate(TREES):
        tree = dict(tree, nodes=[dict(n) for n in tree["nodes"]])
        tree["nodes"][0]["retrieved_policy_refl"] = ["policy-r1"]
        save_tree(episode / f"{step}.json.gz", tree)
    (run / "memory").mkdir(parents=True)
    (run / "memory" / "policy.jsonl").write_text(json.dumps(
        {"id": "policy-r1", "reflection": "try the left door first", "key_text": "k"}) + "\n")
    (run / "config.yaml").write_text("agent: rmcts\n")

    assert main(["view", str(episode / "1.json.gz")]) == 0
    out = capsys.readouterr().out
    path = (episode / "1.html").resolve()
    assert f"tree view written to {path}" in out and "3 step pages" in out
    uri = out.split("open ", 1)[1].split()[0]
    assert "%23" in uri and "#" not in uri    # the '#' of the folder name is escaped
    page.goto(uri)
    assert "task#0/1.json.gz" in page.title()
    # the reflection retrieved at the root is shown by its text, from the run's memory
    page.click("li[data-node='0'] > .row .action")
    details = page.locator("#details").inner_text()
    assert "policy-r1" in details and "try the left door first" in details
    # "×k" says what it counts
    badge = page.locator("span.stat.c").first
    k = badge.inner_text().lstrip("×")
    assert badge.get_attribute("title") == f"proposed {k} time{'' if k == '1' else 's'} by " \
                                           "the policy's samples"
    assert "×k: the policy's samples proposed this action k times" in \
        page.locator("#legend").inner_text()
    # the step pages of the episode link to each other
    page.click("#step-next")
    assert page.url.endswith("/2.html") and "task#0/2.json.gz" in page.title()
    assert page.locator("#step-next").count() == 0        # the last step
    page.click("#step-prev")
    page.click("#step-prev")
    assert page.url.endswith("/0.html") and page.locator("#step-prev").count() == 0
    assert page.errors == []
