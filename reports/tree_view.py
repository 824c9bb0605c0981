"""``clew view TREE.json.gz``: one self-contained HTML page to inspect a search tree (docs/methods/mcts.md#tree-data).

The page (its HTML, CSS and JS from ``reports/templates/``, inlined: no network) shows the tree of
one real step as nested, collapsible
rows. Each row is an edge and the node it leads to: action text (STOP / NONE marked), N, Q, prior
P and V (the child's value), the sample count; the executed decision is highlighted. Clicking a
row shows the node's observation, the raw completion, the reflections retrieved at its expansion
(``retrieved_policy_refl``) and evaluation (``value_record["retrieved_reflection_ids"]``) and its
value record. A replay steps through the search in order.

Replay (docs/methods/mcts.md#tree-data): step 0 is the tree after the free root expansion; step k is the tree
after simulation k. A node appears at the first step whose traversal passes through it, N counts
the traversals so far, and the path of traversal k is highlighted. Q, V and priors are shown with
their final values (the tree stores only those). A tree with no traversals (a search that records
only ``expansion_order``) is replayed one expansion per step instead, children appearing when
their parent is expanded; N is then final.

Waves (``docs/methods/mcts.md#leaf-parallel-waves``): when the tree was searched in waves wider
than one, the replay says which wave each simulation belongs to, outlines the paths of the other
simulations of that wave (selected together, backed up together), tags each node with the wave
that created it, and can step a whole wave at a time ("by wave").

Decisions:

* The page is built from the dict form of :mod:`clew.search.tree`, normalised through
  ``tree_from_dict``/``tree_to_dict`` (missing optional fields get their defaults, structural
  damage is a :class:`~clew.search.tree.TreeFormatError` naming the file); fields the viewer does
  not know are kept and listed in the detail panel, so a newer tree still shows everything.
* Reflection texts are shown with their ids: from the tree (``meta["reflections"]`` as
  ``{id: text}`` or a list of ``{"id", "text"}``), else looked up in the reflection memory of
  the run the tree belongs to (``RUN/memory``, the shard memories of a merged run, or the
  store its config names); an id found nowhere is shown alone.
* Pages of one episode link to each other (previous, next, every step): ``clew view`` writes the
  pages of every step of the episode beside its trees (``STEP.html``), so the links work. Links
  between pages are relative; a printed ``file://`` address is percent-encoded, so a folder
  named ``TASK#0`` (an episode key) does not cut the address at the ``#``.
* On load, the root and the nodes on the executed decision path are expanded, the rest collapsed.
* The tree JSON is embedded in a ``<script type="application/json">`` with ``<`` escaped, and all
  text goes into the page through ``textContent``: observation text cannot inject markup.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from clew.records import RecordError, RunDir, clean_json, read_jsonl
from clew.records.rundir import tree_files
from clew.search.tree import TreeFormatError, load_tree_dict, tree_from_dict, tree_to_dict


def normalise(data: dict[str, Any], where: str = "tree") -> dict[str, Any]:
    """The tree dict with every schema field present; unknown extra fields kept."""
    clean = tree_to_dict(tree_from_dict(data, where))
    for kind in ("nodes", "edges"):
        clean[kind] = [{**orig, **new} for orig, new in zip(data[kind], clean[kind])]
    for k, v in data.items():
        clean.setdefault(k, v)
    return clean


def reflection_texts(tree: dict[str, Any]) -> dict[str, str]:
    """``{reflection id: text}`` from the tree's meta, when it carries the texts."""
    found = (tree.get("meta") or {}).get("reflections")
    out: dict[str, str] = {}
    if isinstance(found, dict):
        out = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in found.items()}
    elif isinstance(found, list):
        for item in found:
            if isinstance(item, dict) and "id" in item:
                out[str(item["id"])] = str(item.get("text", item.get("content", "")))
    return out


def replay_schedule(tree: dict[str, Any]) -> dict[str, Any]:
    """When each node appears and is expanded during the replay (see the module docstring).

    Returns ``{"mode": "traversals"|"expansions", "steps": K, "node_step": [...],
    "expand_step": [...], "waves": [...] | None, "wave_size": k | None, "wave_pipeline": bool}``;
    ``expand_step`` is None for nodes never expanded; ``waves`` holds the wave of each traversal
    (traversal mode, trees searched in waves only).
    """
    nodes, edges = tree["nodes"], tree["edges"]
    traversals = tree.get("traversals") or []
    order = tree.get("expansion_order") or []
    n = len(nodes)
    root = tree.get("root", 0)
    node_step: list[int | None] = [None] * n
    expand_step: list[int | None] = [None] * n
    if n:
        node_step[root] = 0
    if traversals:
        mode, steps = "traversals", len(traversals)
        for k, trav in enumerate(traversals, 1):
            for eid in trav:
                child = edges[eid]["child"]
                if child is not None and node_step[child] is None:
                    node_step[child] = k
        # a search expands a leaf in the simulation that first reaches it (root: before any)
        for nid in order:
            expand_step[nid] = node_step[nid] if node_step[nid] is not None else 0
    else:
        mode, steps = "expansions", len(order)
        for k, nid in enumerate(order, 1):
            expand_step[nid] = 0 if nid == root else k
            for eid in nodes[nid]["edges"]:
                child = edges[eid]["child"]
                if child is not None and node_step[child] is None:
                    node_step[child] = expand_step[nid]
    # nodes no step reached (a tree built some other way) appear with their parent
    for nd in sorted(nodes, key=lambda d: d["depth"]):
        i = nd["node_id"]
        if node_step[i] is None:
            parent = nd["parent"]
            node_step[i] = node_step[parent] if parent is not None and node_step[parent] is not None else 0
    waves = tree.get("waves") if mode == "traversals" else None
    return {"mode": mode, "steps": steps, "node_step": node_step, "expand_step": expand_step,
            "waves": list(waves["traversals"]) if waves else None,
            "wave_size": waves["size"] if waves else None,
            "wave_pipeline": bool(waves.get("pipeline")) if waves else False}

#: the page's HTML, CSS and JavaScript (``reports/templates/``, shipped as package data)
TEMPLATES = Path(__file__).resolve().parent / "templates"


def template(name: str) -> str:
    """A template file's text (read once per process)."""
    if name not in _templates:
        _templates[name] = (TEMPLATES / name).read_text(encoding="utf-8")
    return _templates[name]


_templates: dict[str, str] = {}


def render(tree: dict[str, Any], title: str = "search tree",
           reflections: dict[str, str] | None = None, nav: str = "") -> str:
    """The HTML page for a normalised tree dict; ``reflections`` adds texts by id, ``nav`` is
    the HTML of the links to the episode's other steps."""
    payload = {"tree": tree, "replay": replay_schedule(tree),
               "reflections": {**(reflections or {}), **reflection_texts(tree)}, "title": title}
    data = json.dumps(payload, ensure_ascii=False, allow_nan=False, default=str)
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    page, css, js = (template(f"tree_view.{kind}") for kind in ("html", "css", "js"))
    return (page.replace("__TITLE__", html.escape(title)).replace("__NAV__", nav)
            .replace("__CSS__", css).replace("__JS__", js).replace("__DATA__", data))



def run_of(tree_path: Path) -> Path | None:
    """The run directory a tree file sits in (``RUN/trees/EPISODE/STEP.json.gz``)."""
    up = tree_path.resolve().parents
    return up[2] if len(up) > 2 and up[1].name == "trees" else None


def memory_texts(run: Path | None) -> dict[str, str]:
    """``{reflection id: text}`` from the reflection memories of ``run``."""
    if run is None:
        return {}
    folders = [run / "memory", *sorted((run / "shard_memory").glob("*"))]
    try:
        named = ((RunDir(run).config().get("agent_options") or {}).get("memory") or {}).get("dir")
    except (OSError, RecordError, AttributeError):
        named = None
    if isinstance(named, str):
        folders.append(RunDir(run).resolve(named))
    texts: dict[str, str] = {}
    for folder in folders:
        for store in ("policy", "value"):
            try:
                records = read_jsonl(folder / f"{store}.jsonl")
            except (OSError, RecordError):
                continue  # a damaged memory must not stop the viewer: ids are shown instead
            for rec in records:
                if isinstance(rec, dict) and "id" in rec and isinstance(rec.get("reflection"), str):
                    texts.setdefault(str(rec["id"]), rec["reflection"])
    return texts


def _nav(steps: list[int], current: int, key: str) -> str:
    def link(k: int, text: str, ident: str = "") -> str:
        who = f" id='{ident}'" if ident else ""
        return f"<a{who} href='{quote(f'{k}.html')}'>{html.escape(text)}</a>"

    i = steps.index(current)
    parts = [f"<b>episode {html.escape(key)}</b>"]
    if i > 0:
        parts.append(link(steps[i - 1], f"◀ step {steps[i - 1]}", "step-prev"))
    parts.append(f"step {current} ({i + 1} of {len(steps)})")
    if i + 1 < len(steps):
        parts.append(link(steps[i + 1], f"step {steps[i + 1]} ▶", "step-next"))
    every = " ".join(f"<b>{k}</b>" if k == current else link(k, str(k)) for k in steps)
    return f"<nav id='steps'>{' · '.join(parts)} · all steps: {every}</nav>"


def default_out(tree_path: Path) -> Path:
    name = tree_path.name
    for suffix in (".json.gz", ".json", ".gz"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return tree_path.with_name(name + ".html")


def write_view(tree_path: Path, out: Path | None = None, *, nav: str = "",
               reflections: dict[str, str] | None = None) -> Path:
    """One page. Reflection texts come from the run's memory unless given."""
    data = load_tree_dict(tree_path)
    tree = normalise(_nan_free(data), str(tree_path))
    out = out or default_out(tree_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    title = f"{tree_path.parent.name}/{tree_path.name}" if tree_path.parent.name else tree_path.name
    if reflections is None:
        reflections = memory_texts(run_of(tree_path))
    out.write_text(render(tree, title, reflections, nav), encoding="utf-8")
    return out


def write_episode_views(folder: Path) -> dict[int, Path]:
    """Every step page of one episode folder, beside its trees, linked to each other."""
    trees = tree_files(folder)
    if not trees:
        raise TreeFormatError(f"{folder}: no search trees (STEP.json.gz) in this folder")
    steps = [k for k, _ in trees]
    reflections = memory_texts(run_of(trees[0][1]))
    return {k: write_view(p, nav=_nav(steps, k, folder.name), reflections=reflections)
            for k, p in trees}


def _nan_free(obj: Any) -> Any:
    return clean_json(obj)
