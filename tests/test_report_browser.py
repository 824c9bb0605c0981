"""The report page and the tree viewer in headless Chromium (issue 7 acceptance).

Needs Debian's ``chromium`` (``/usr/bin/chromium``, or ``CLEW_CHROMIUM``) and the ``playwright``
Python package; skipped cleanly when either is missing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from clew.reports.report import Prices, write_report
from clew.reports.tree_view import write_view
from clew.search.tree import save_tree
from report_fixtures import compute_runs, mcts_tree, record, write_run

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CLEW_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# built before the browser starts: Playwright's sync API keeps an event loop running
TREE = mcts_tree(7, 12)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


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


def test_report_page_shows_tables_and_plots(page, tmp_path):
    runs = []
    for name, p, err in (("weak", 0.25, 0.8), ("mid", 0.5, 0.4), ("strong", 0.75, 0.2)):
        recs = [record(i, success=i < 4 * p, params={"dag_level": ["easy", "hard"][i % 2]},
                       metrics={"exploration_error": err, "gap_total": 1 - p,
                                "gap_exploration": (1 - p) / 2, "gap_exploitation": (1 - p) / 2},
                       usage={"policy": {"prompt_tokens": int(100 / err), "completion_tokens": 5,
                                         "calls": 1}})
                for i in range(4)]
        runs.append(write_run(tmp_path / name, recs, agent_options={"n_simulations": int(4 / err)}))
    rep = write_report(runs, tmp_path / "report", react=runs[0])
    page.goto((rep.out / "report.html").as_uri())
    tables = page.locator("table.clew-table")
    assert tables.count() == len(rep.tables)
    assert page.locator("#table-summary tbody tr").count() == 3
    assert "strong" in page.locator("#table-summary").inner_text()
    imgs = page.locator("img.clew-plot")
    assert imgs.count() == len(rep.figures) >= 4
    for i in range(imgs.count()):  # every embedded PNG decoded to a real image
        assert imgs.nth(i).evaluate("img => img.complete && img.naturalWidth") > 100
    assert page.locator("#plot-success_vs_exploration_error").is_visible()
    assert page.errors == []


def test_tree_viewer_expands_nodes_and_replays(page, tmp_path):
    tree = dict(TREE, meta={"task_id": "line-0", "reflections": {"r1": "try the left door"}})
    tree["nodes"] = [dict(n) for n in TREE["nodes"]]
    tree["nodes"][0]["retrieved_policy_refl"] = ["r1"]
    path = tmp_path / "0.json.gz"
    save_tree(path, tree)
    page.goto(write_view(path).as_uri())
    assert page.errors == []
    # a node with children that starts collapsed: find one off the decision path
    nodes, edges = tree["nodes"], tree["edges"]
    target = next(n["node_id"] for n in nodes
                  if n["parent"] is not None and any(edges[e]["child"] is not None
                                                     for e in n["edges"])
                  and page.locator(f"li.tree-node[data-node='{n['node_id']}']").get_attribute(
                      "class").find("collapsed") >= 0)
    # make sure its own row is on screen, then expand it with its toggle button
    page.click("#expand-all")
    page.click("#collapse-all")
    chain, p = [], nodes[target]["parent"]
    while p is not None:
        chain.append(p)
        p = nodes[p]["parent"]
    for nid in reversed(chain):
        page.click(f"li[data-node='{nid}'] > .row > button.toggle")
    child = next(edges[e]["child"] for e in nodes[target]["edges"]
                 if edges[e]["child"] is not None)
    child_row = page.locator(f"li[data-node='{child}'] > .row")
    assert not child_row.is_visible()
    page.click(f"li[data-node='{target}'] > .row > button.toggle")
    assert child_row.is_visible()
    page.click(f"li[data-node='{target}'] > .row > button.toggle")
    assert not child_row.is_visible()
    # clicking a row shows its observation
    page.click(f"li[data-node='{target}'] > .row .action")
    assert nodes[target]["obs"][:10] in page.locator("#details").inner_text()
    # the root's details list the reflection retrieved at its expansion, with its text
    page.click("li[data-node='0'] > .row .action")
    assert "try the left door" in page.locator("#details").inner_text()
    # replay: at step 0 only the root and its edges; the first simulation visits one edge
    page.click("#expand-all")
    visible_final = page.locator("li.tree-node:visible").count()
    page.click("#replay-start")
    assert page.locator("#replay-label").inner_text() == f"simulation 0 / {len(tree['traversals'])}"
    assert page.locator("li.tree-node:visible").count() < visible_final
    page.click("#replay-next")
    first = tree["traversals"][0][0]
    row = page.locator(f"li[data-node='{edges[first]['child']}'] > .row")
    assert "N=1" in row.inner_text()
    assert "on-path" in page.locator(f"li[data-node='{edges[first]['child']}']").get_attribute(
        "class")
    page.click("#replay-end")
    assert page.locator("li.tree-node:visible").count() == visible_final
    assert page.errors == []


def test_cost_table_and_success_against_compute_plot(page, tmp_path):
    runs = compute_runs(tmp_path)   # three agents at three budgets
    rep = write_report(runs, tmp_path / "report",
                       prices=Prices(prompt=1.0, completion=2.0, gpu_hour=3.0))
    page.goto((rep.out / "report.html").as_uri())
    assert page.errors == []
    cost = page.locator("#table-cost")
    assert cost.locator("tbody tr").count() == 9
    headers = cost.locator("thead th").all_inner_texts()
    for column in ("cost/ep", "cost/success", "GPU s/ep", "tokens/success"):
        assert column in [h.replace("\u200b", "") for h in headers]
    text = cost.inner_text()
    assert all(agent in text for agent in ("react", "mcts", "rmcts"))
    plot = page.locator("#plot-success_vs_compute")
    assert plot.is_visible()
    assert plot.evaluate("img => img.complete && img.naturalWidth") > 100
    caption = page.locator("figure", has=plot).inner_text()
    assert "Success vs cost per episode" in caption and "standard error" in caption
    # the plot's points are the table's: one curve per agent over its three budgets
    rows = rep.tables["cost"].rows
    assert sorted({(row[1], row[2]) for row in rows}) == sorted(
        (a, float(n)) for a in ("react", "mcts", "rmcts") for n in (2, 5, 10))
