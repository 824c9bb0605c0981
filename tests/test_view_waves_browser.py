"""The tree viewer shows MCTS waves (issue 12): the replay names each simulation's wave,
outlines the other paths of that wave, tags nodes with the wave that created them and can step
one wave at a time. The page runs in headless Chromium (as tests/test_report_browser.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from clew.reports.tree_view import normalise, replay_schedule, write_view
from clew.search.tree import save_tree
from report_fixtures import mcts_tree

CHROMIUM = os.environ.get("CLEW_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# built before the browser starts: Playwright's sync API keeps an event loop running
WAVES = mcts_tree(7, 12, wave_size=4)
W = WAVES["waves"]["traversals"]      # b = 3: the first wave holds the root's 3 edges only
ENDS = [j + 1 for j in range(len(W)) if j + 1 == len(W) or W[j + 1] != W[j]]
SEQUENTIAL = mcts_tree(7, 6)
PIPELINED = mcts_tree(7, 12, wave_size=4, pipeline=True)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def test_replay_schedule_carries_the_waves():
    sched = replay_schedule(normalise(WAVES))
    assert W == [1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4]
    assert sched["wave_size"] == 4 and sched["waves"] == W and sched["wave_pipeline"] is False
    assert replay_schedule(normalise(PIPELINED))["wave_pipeline"] is True
    old = dict(WAVES, waves=None)
    assert replay_schedule(normalise(old))["waves"] is None


@pytest.fixture(scope="module")
def page():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        pg = browser.new_page()
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.errors = errors
        yield pg
        browser.close()


def child_of(edge_id: int) -> int:
    return WAVES["edges"][edge_id]["child"]


def test_viewer_replays_waves(page, tmp_path):
    path = tmp_path / "0.json.gz"
    save_tree(path, WAVES)
    page.goto(write_view(path).as_uri())
    assert page.errors == []
    assert "waves: 4 (k = 4)" in page.locator("#meta").inner_text()
    save_tree(tmp_path / "1.json.gz", PIPELINED)
    page.goto(write_view(tmp_path / "1.json.gz").as_uri())
    assert "(k = 4, pipelined)" in page.locator("#meta").inner_text()
    page.goto(write_view(path).as_uri())
    assert page.locator("#by-wave-box").is_visible()
    page.click("#expand-all")
    # every node made by a wave carries its wave
    for nd in WAVES["nodes"][1:]:
        badge = page.locator(f"li[data-node='{nd['node_id']}'] > .row .badge.wave")
        assert badge.inner_text() == f"w{nd['wave']}"
    # simulation 5 (wave 2): its own path highlighted, the other paths of wave 2 outlined
    page.click("#replay-start")
    for _ in range(5):
        page.click("#replay-next")
    label = page.locator("#replay-label").inner_text()
    assert label == "simulation 5 / 12 · wave 2 / 4 (4 simulations)"
    trav = WAVES["traversals"]
    own = child_of(trav[4][-1])
    assert "on-path" in page.locator(f"li[data-node='{own}']").get_attribute("class")
    same = [j for j, w in enumerate(W) if w == 2 and j != 4]
    for j in same:
        nid = child_of(trav[j][-1])
        if nid != own:
            cls = page.locator(f"li[data-node='{nid}']").get_attribute("class")
            assert "in-wave" in cls and "on-path" not in cls
    others = {child_of(t[-1]) for t, w in zip(trav, W) if w != 2} - \
        {e["child"] for j in [4, *same] for e in (WAVES["edges"][i] for i in trav[j])}
    assert others
    for nid in others:
        assert "in-wave" not in page.locator(f"li[data-node='{nid}']").get_attribute("class")
    # by wave: next goes to the end of a wave, then of the next; prev back to the one before
    page.check("#replay-by-wave")
    page.click("#replay-next")
    assert page.locator("#replay-label").inner_text().startswith(
        f"simulation {ENDS[1]} / 12 · wave 2 / 4")
    page.click("#replay-next")
    assert page.locator("#replay-label").inner_text().startswith(
        f"simulation {ENDS[2]} / 12 · wave 3 / 4")
    page.click("#replay-prev")
    assert page.locator("#replay-label").inner_text().startswith(f"simulation {ENDS[1]} / 12")
    page.click("#replay-end")
    assert page.locator("#replay-label").inner_text() == \
        "final tree (12 simulations), 4 waves of up to 4"
    assert page.errors == []


def test_sequential_trees_show_no_waves(page, tmp_path):
    path = tmp_path / "1.json.gz"
    save_tree(path, SEQUENTIAL)
    page.goto(write_view(path).as_uri())
    assert not page.locator("#by-wave-box").is_visible()
    assert page.locator(".badge.wave").count() == 0
    page.click("#replay-start")
    page.click("#replay-next")
    assert page.locator("#replay-label").inner_text() == "simulation 1 / 6"
    assert page.errors == []
