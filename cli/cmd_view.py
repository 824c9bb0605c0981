"""``clew view TREE.json.gz | EPISODE_DIR [--out FILE.html]``: search trees as HTML pages.

Given a tree of a run (``RUN/trees/EPISODE/STEP.json.gz``) or an episode folder, writes the page
of every step of that episode beside the trees (``STEP.html``, linked to each other) and prints
where the requested page is, as a path and as a ``file://`` address that a browser opens.
``--out`` writes the one tree given to that file instead.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from clew.records.rundir import tree_step
from clew.reports.tree_view import write_episode_views, write_view


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("tree", help="a tree file written by a search (RUN/trees/EPISODE/STEP.json.gz) "
                                "or an episode folder (RUN/trees/EPISODE)")
    p.add_argument("--out", help="write only this tree's page, to this HTML file")


def run(args: argparse.Namespace) -> int:
    target = Path(args.tree)
    if not target.exists():
        raise FileNotFoundError(f"{target}: no such tree file or episode folder")
    if args.out:
        page = write_view(target, Path(args.out))
        pages = [page]
    else:
        if target.is_dir() or tree_step(target) is not None:
            written = write_episode_views(target if target.is_dir() else target.parent)
            pages = list(written.values())
            page = pages[0] if target.is_dir() else written[tree_step(target)]
        else:
            page = write_view(target)
            pages = [page]
    page = page.resolve()
    more = f" ({len(pages)} step pages of the episode, linked)" if len(pages) > 1 else ""
    print(f"tree view written to {page}{more}\nopen {page.as_uri()}")
    return 0
