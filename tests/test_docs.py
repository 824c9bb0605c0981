"""Citations stay inside the repository: code and docs cite the repo's own pages
(docs/architecture.md, docs/methods/*.md, ...), never the design notes or specs the project was
written from, and every ``docs/<page>.md#anchor`` they cite names an existing heading."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {".git", "exp", "corpus", "node_modules", "__pycache__", "runs"}
OUTSIDE = re.compile(r"spec_00\d|DESIGN\.md|DESIGN §|STYLE\.md|STACK\.md|\.\./shared")
CITED = re.compile(r"docs/([\w./-]+\.md)#([\w-]+)")


def repo_files():
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if any(part in SKIP or part.startswith(".venv") for part in rel.parts):
            continue
        if path.is_file() and (path.suffix in (".py", ".md", ".yaml") or path.name == "Makefile"):
            yield path


def anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    headings = re.finditer(r"^#+\s+(.*)$", page.read_text(), re.MULTILINE)
    return {anchor(m.group(1)) for m in headings}


def test_no_citation_leaves_the_repository():
    bad = [f"{p.relative_to(ROOT)}:{i}: {line.strip()[:80]}"
           for p in repo_files() if p.name != "test_docs.py"
           for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
           if OUTSIDE.search(line)]
    assert not bad, "citations of documents outside the repository:\n" + "\n".join(bad)


def test_cited_doc_anchors_exist():
    cache: dict[str, set[str]] = {}
    missing = []
    for p in repo_files():
        for m in CITED.finditer(p.read_text(errors="replace")):
            page = ROOT / "docs" / m.group(1)
            if not page.exists():
                missing.append(f"{p.relative_to(ROOT)}: docs/{m.group(1)} (no such page)")
                continue
            known = cache.setdefault(m.group(1), anchors(page))
            if m.group(2) not in known:
                missing.append(f"{p.relative_to(ROOT)}: docs/{m.group(1)}#{m.group(2)}")
    assert not missing, "cited anchors that do not exist:\n" + "\n".join(sorted(set(missing)))


def test_the_anchor_rule_matches_githubs():
    assert anchor("Free and charged simulation") == "free-and-charged-simulation"
    assert anchor("vLLM's CPU build: what the tests rely on") == "vllms-cpu-build-what-the-tests-rely-on"
    assert anchor("Grid map with task DAG") == "grid-map-with-task-dag"


#: where the package's code lives (pyproject.toml's package map), benchmarks beside it
CODE = ("envs", "agents", "search", "training", "metrics", "runner", "reports", "loop", "cli",
        "records", "benchmarks")
#: what points outside the repository from code: an issue number, a spec's decision code (the
#: grid-map spec's D1..D31, TextMiniGrid's A1..A30) or section sign
POINTS_OUT = re.compile(r"\b[Ii]ssues? #?\d|\b[DA]\d{1,2}\b|§")


def test_code_cites_no_issue_numbers_or_spec_codes():
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for part in CODE for path in sorted((ROOT / part).rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if POINTS_OUT.search(line)]
    assert not found, "\n".join(found)
    assert POINTS_OUT.search("decisions D13–D18") and POINTS_OUT.search("(issue 7)")
