"""``clew view TREE.json.gz``: one self-contained HTML page to inspect a search tree (docs/methods/mcts.md#tree-data).

The page (inline CSS and JS, no network) shows the tree of one real step as nested, collapsible
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


def render(tree: dict[str, Any], title: str = "search tree",
           reflections: dict[str, str] | None = None, nav: str = "") -> str:
    """The HTML page for a normalised tree dict; ``reflections`` adds texts by id, ``nav`` is
    the HTML of the links to the episode's other steps."""
    payload = {"tree": tree, "replay": replay_schedule(tree),
               "reflections": {**(reflections or {}), **reflection_texts(tree)}, "title": title}
    data = json.dumps(payload, ensure_ascii=False, allow_nan=False, default=str)
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return (_PAGE.replace("__TITLE__", html.escape(title)).replace("__NAV__", nav)
            .replace("__CSS__", _CSS).replace("__JS__", _JS).replace("__DATA__", data))


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


_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>__TITLE__</title><style>__CSS__</style></head>
<body>
<header><h1>__TITLE__</h1>__NAV__<div id="meta"></div>
<div id="legend">N: visits · Q: mean value of the edge · P: prior · V: value of the node it leads
to · ×k: the policy's samples proposed this action k times (identical answers merged)</div>
</header>
<div id="controls">
 <button id="expand-all">expand all</button> <button id="collapse-all">collapse all</button>
 <span class="sep"></span>
 <button id="replay-start" title="start">|&#x25C0;</button>
 <button id="replay-prev" title="previous step">&#x25C0;</button>
 <button id="replay-play" title="play / pause">play</button>
 <button id="replay-next" title="next step">&#x25B6;</button>
 <button id="replay-end" title="final tree">&#x25B6;|</button>
 <input id="replay-slider" type="range" min="0" value="0">
 <label id="by-wave-box" hidden><input id="replay-by-wave" type="checkbox"> by wave</label>
 <span id="replay-label"></span>
</div>
<main><div id="tree"></div><aside id="details"><p class="hint">Click a row to see its node.</p>
</aside></main>
<script type="application/json" id="tree-data">__DATA__</script>
<script>__JS__</script>
</body></html>
"""

_CSS = """
body{font-family:system-ui,sans-serif;margin:0;color:#222}
header{padding:8px 16px;background:#f4f4f4;border-bottom:1px solid #ddd}
h1{font-size:1.1em;margin:0 0 4px}#meta{font-size:0.85em;color:#444}
#steps{font-size:0.85em;margin:0 0 4px}#legend{font-size:0.8em;color:#666}
#controls{padding:6px 16px;border-bottom:1px solid #ddd;font-size:0.9em}
#controls .sep{display:inline-block;width:1.5em}#replay-slider{width:220px;vertical-align:middle}
main{display:flex;height:calc(100vh - 150px)}
#tree{flex:3;overflow:auto;padding:8px 16px;font-family:ui-monospace,monospace;font-size:0.85em}
#details{flex:2;overflow:auto;padding:8px 16px;border-left:1px solid #ddd;font-size:0.85em}
#details pre{white-space:pre-wrap;background:#fafafa;border:1px solid #eee;padding:6px}
ul.children{list-style:none;margin:0;padding-left:18px;border-left:1px dotted #bbb}
ul.root{list-style:none;margin:0;padding:0}
li.tree-node.collapsed>ul.children{display:none}li.tree-node.hidden{display:none}
.row{cursor:pointer;padding:1px 3px;border-radius:3px;white-space:nowrap}
.row:hover{background:#eef}.row.selected{background:#dde6ff}
.toggle{width:1.6em;padding:0;margin-right:4px;font-family:inherit}
.toggle.leaf{visibility:hidden}
.action{font-weight:bold}.stat{color:#555;margin-left:8px}
.badge{font-size:0.8em;padding:0 4px;border-radius:3px;margin-left:6px;background:#eee}
.badge.stop{background:#ffe0b3}.badge.unvisited{color:#888}.stub .row{color:#888}li.future>.row{color:#888}li.future>ul.children{display:none}li.future>.row>.toggle{visibility:hidden}.badge.none{background:#ffd6d6}.badge.term{background:#e0e0ff}
.decision>.row{background:#d9f7d9}.on-path>.row{outline:2px solid #f39c12}
#by-wave-box{margin:0 1em 0 .5em}.in-wave>.row{outline:2px dashed #8e44ad}.badge.wave{background:#efe3f7;color:#5b2c6f}
.new>.row .action{color:#c0392b}
"""

_JS = r"""
(function(){
const DATA = JSON.parse(document.getElementById('tree-data').textContent);
const T = DATA.tree, R = DATA.replay, REFL = DATA.reflections || {};
const nodes = T.nodes, edges = T.edges;
const decision = new Set(((T.decision||{}).edges)||[]);
const liOf = {}, nOf = {}, stubOf = {};
let step = R.steps, timer = null, selected = null;
// waves: shown only for trees searched in waves wider than one
const W = (R.waves && R.wave_size > 1) ? R.waves : null;
const nWaves = W ? W[W.length-1] : 0;

function el(tag, cls, text){const e=document.createElement(tag); if(cls) e.className=cls;
  if(text!==undefined&&text!==null) e.textContent=String(text); return e;}
function num(x, d){return (x===null||x===undefined)?'-':Number(x).toFixed(d);}

function buildMeta(){
  const m = T.meta||{}, c = T.counters||{}, parts = [];
  for (const k of ['task_id','step','t','agent','model']) if (m[k]!==undefined) parts.push(k+': '+m[k]);
  parts.push(nodes.length+' nodes, '+edges.length+' edges');
  for (const k of ['simulations','policy_calls','value_calls','seconds','stopped_by'])
    if (c[k]!==undefined && c[k]!==null) parts.push(k+': '+c[k]);
  if (W) parts.push('waves: '+nWaves+' (k = '+R.wave_size+(R.wave_pipeline ? ', pipelined' : '')+')');
  const d = T.decision||{};
  if (d.kind) parts.push('decision: '+d.kind+' '+(d.edges||[]).map(e=>JSON.stringify(edges[e]?edges[e].action:e)).join(' → '));
  document.getElementById('meta').textContent = parts.join(' · ');
}

function edgeStats(row, e, v){
  const nspan = el('span','stat n'); nOf[e.edge_id] = nspan; row.appendChild(nspan);
  row.appendChild(el('span','stat q','Q='+num(e.q,3)));
  row.appendChild(el('span','stat p','P='+num(e.prior,2)));
  row.appendChild(el('span','stat v','V='+num(v,3)));
  if (e.count){ const c = el('span','stat c','×'+e.count);
    c.title = 'proposed '+e.count+' time'+(e.count===1?'':'s')+" by the policy's samples";
    row.appendChild(c); }
}

function actionLabel(row, e){
  row.appendChild(el('span','action', e.action===null ? 'NONE' : e.action));
  if (e.is_stop) row.appendChild(el('span','badge stop','STOP'));
  if (e.is_none || e.action===null) row.appendChild(el('span','badge none','nothing parsed'));
}

function makeStub(eid){
  // an edge the search never followed: no child node yet
  const e = edges[eid], li = el('li','tree-node stub'); li.dataset.edge = eid; stubOf[eid] = li;
  const row = el('div','row'); li.appendChild(row);
  const tog = el('button','toggle leaf'); tog.type='button'; row.appendChild(tog);
  actionLabel(row, e); edgeStats(row, e, e.v_next);
  row.appendChild(el('span','badge unvisited','not visited'));
  row.addEventListener('click', ()=>selectEdge(eid));
  return li;
}

function makeNode(nid){
  const nd = nodes[nid], li = el('li','tree-node'); li.dataset.node = nid; liOf[nid] = li;
  const row = el('div','row'); li.appendChild(row);
  const tog = el('button','toggle'); tog.type='button'; tog.dataset.node = nid;
  tog.addEventListener('click', ev=>{ev.stopPropagation(); toggle(nid);});
  row.appendChild(tog);
  const inc = nd.incoming;
  if (inc===null || inc===undefined){ row.appendChild(el('span','action','root'));
  } else {
    const e = edges[inc];
    actionLabel(row, e);
    edgeStats(row, e, (e.v_next!==null&&e.v_next!==undefined) ? e.v_next : nd.value);
    if (decision.has(inc)) li.classList.add('decision');
  }
  if (nd.terminal) row.appendChild(el('span','badge term', nd.terminal_reason||'terminal'));
  if (W && nd.wave!==null && nd.wave!==undefined && nd.wave>0) {
    const b = el('span','badge wave','w'+nd.wave); b.title = 'created in wave '+nd.wave; row.appendChild(b); }
  if (inc===null || inc===undefined) row.appendChild(el('span','stat','V='+num(nd.value,3)+' Ns='+nd.ns));
  row.addEventListener('click', ()=>select(nid));
  const out = nd.edges||[];
  if (out.length){ const ul = el('ul','children');
    out.forEach(e=>{ const c = edges[e].child;
      ul.appendChild((c!==null&&c!==undefined) ? makeNode(c) : makeStub(e)); });
    li.appendChild(ul); }
  else tog.classList.add('leaf');
  li.classList.add('collapsed'); tog.textContent = '+';
  return li;
}

function setCollapsed(nid, c){ const li = liOf[nid]; if(!li) return;
  li.classList.toggle('collapsed', c);
  const tog = li.querySelector(':scope > .row > .toggle'); if (tog) tog.textContent = c ? '+' : '−';}
function toggle(nid){ setCollapsed(nid, !liOf[nid].classList.contains('collapsed')); }

function section(parent, title, text){ parent.appendChild(el('h3',null,title)); parent.appendChild(el('pre',null,text)); }

function highlight(li){
  if (selected) selected.querySelector(':scope > .row').classList.remove('selected');
  selected = li; li.querySelector(':scope > .row').classList.add('selected');
}

function selectEdge(eid){
  highlight(stubOf[eid]);
  const e = edges[eid], box = document.getElementById('details'); box.textContent = '';
  box.appendChild(el('h2',null,'edge '+eid+' (not visited)'));
  box.appendChild(el('p','facts','N='+e.n+' Q='+num(e.q,3)+' P='+num(e.prior,3)+' count='+e.count+' · key: '+e.key));
  if (e.raw) section(box, 'raw completion', e.raw);
}

function select(nid){
  highlight(liOf[nid]);
  const nd = nodes[nid], box = document.getElementById('details'); box.textContent = '';
  box.appendChild(el('h2',null,'node '+nid+' (depth '+nd.depth+')'));
  const facts = ['value: '+num(nd.value,3), 'Ns: '+nd.ns, 'expanded: '+nd.expanded,
                 'terminal: '+(nd.terminal ? (nd.terminal_reason||'yes') : 'no')];
  if (nd.incoming!==null && nd.incoming!==undefined){ const e = edges[nd.incoming];
    facts.push('edge '+e.edge_id+': N='+e.n+' Q='+num(e.q,3)+' P='+num(e.prior,3)+' V='+num(e.v_next,3)+' count='+e.count);
    facts.push('key: '+e.key); }
  box.appendChild(el('p','facts',facts.join(' · ')));
  if (nd.incoming!==null && nd.incoming!==undefined && edges[nd.incoming].raw)
    section(box, 'raw completion', edges[nd.incoming].raw);
  section(box, 'observation', nd.obs===null||nd.obs===undefined ? '(none)' : nd.obs);
  const vr = nd.value_record||{};
  const lists = [['policy reflections retrieved at expansion', nd.retrieved_policy_refl||[]],
                 ['value reflections retrieved at evaluation', vr.retrieved_reflection_ids||[]]];
  lists.forEach(([title, ids])=>{
    box.appendChild(el('h3',null,title+' ('+ids.length+')'));
    const ul = el('ul','reflections'); box.appendChild(ul);
    ids.forEach(id=>{ const li = el('li'); li.appendChild(el('b',null,String(id)));
      if (REFL[id]) li.appendChild(el('div',null,REFL[id])); ul.appendChild(li); });
  });
  if (nd.value_record) section(box, 'value record', JSON.stringify(nd.value_record, null, 1));
  if (nd.info && Object.keys(nd.info).length) section(box, 'info', JSON.stringify(nd.info, null, 1));
  const known = new Set(['node_id','parent','incoming','depth','obs','edges','expanded','ns','value',
    'value_record','terminal','terminal_reason','needs_eval','retrieved_policy_refl','wave','info']);
  const extra = Object.keys(nd).filter(k=>!known.has(k));
  if (extra.length){ const o = {}; extra.forEach(k=>o[k]=nd[k]); section(box, 'other fields', JSON.stringify(o, null, 1)); }
}

function showStep(k){
  step = Math.max(0, Math.min(R.steps, k));
  const final = step===R.steps, trav = R.mode==='traversals';
  const counts = new Array(edges.length).fill(0);
  if (trav) for (let j=0;j<step;j++) for (const e of T.traversals[j]) counts[e]++;
  edges.forEach((e,i)=>{ if (nOf[i]) nOf[i].textContent = 'N='+(trav ? counts[i] : e.n); });
  const path = new Set(), wavePath = new Set();
  if (trav && step>0) for (const e of T.traversals[step-1]) if (edges[e].child!==null) path.add(edges[e].child);
  // the other simulations of the current wave: selected together, backed up together
  const wave = (W && step>0) ? W[step-1] : null;
  if (wave!==null) W.forEach((w,j)=>{ if (w===wave && j!==step-1)
    for (const e of T.traversals[j]) if (edges[e].child!==null && !path.has(edges[e].child)) wavePath.add(edges[e].child); });
  nodes.forEach((nd,i)=>{ const li = liOf[i]; if(!li) return;
    // not reached yet: its edge exists once the parent is expanded (shown greyed), else hidden
    const future = R.node_step[i] > step, px = nd.parent===null||nd.parent===undefined ? 0 : R.expand_step[nd.parent];
    li.classList.toggle('hidden', future && !(px!==null && px!==undefined && px <= step));
    li.classList.toggle('future', future);
    li.classList.toggle('on-path', !final && path.has(i));
    li.classList.toggle('in-wave', !final && wavePath.has(i));
    li.classList.toggle('new', !final && step>0 && (R.node_step[i]===step || R.expand_step[i]===step));
  });
  Object.keys(stubOf).forEach(eid=>{ const x = R.expand_step[edges[eid].parent];
    stubOf[eid].classList.toggle('hidden', x===null || x===undefined || x > step); });
  if (!final) [...path, ...wavePath].forEach(i=>{ let p = nodes[i].parent; while(p!==null&&p!==undefined){ setCollapsed(p,false); p = nodes[p].parent; } });
  if (!final && !trav){ const x = T.expansion_order[step-1]; if (x!==undefined){ let p = x; while(p!==null&&p!==undefined){ setCollapsed(p,false); p = nodes[p].parent; } } }
  document.getElementById('replay-slider').value = step;
  const unit = trav ? 'simulation' : 'expansion';
  let label = final ? ('final tree ('+R.steps+' '+unit+'s)') : (unit+' '+step+' / '+R.steps);
  if (W) label += final ? (', '+nWaves+' waves of up to '+R.wave_size)
                        : (step>0 ? ' · wave '+wave+' / '+nWaves+' ('+W.filter(w=>w===wave).length+' simulations)' : '');
  document.getElementById('replay-label').textContent = label;
}

// "by wave": next / previous go to the last simulation of the next / previous wave
function byWave(){ return W && document.getElementById('replay-by-wave').checked; }
function nextStep(){ if (!byWave() || step>=R.steps) return step+1;
  const w = W[step]; let j = step; while (j<R.steps && W[j]===w) j++; return j; }
function prevStep(){ if (!byWave() || step<=0) return step-1;
  const cur = W[step-1]; let j = step-1; while (j>0 && W[j-1]>=cur) j--; return j; }

function play(){ const b = document.getElementById('replay-play');
  if (timer){ clearInterval(timer); timer=null; b.textContent='play'; return; }
  if (step>=R.steps) showStep(0);
  b.textContent='pause';
  timer = setInterval(()=>{ if (step>=R.steps){ play(); return; } showStep(nextStep()); }, 700); }

buildMeta();
const rootUl = el('ul','root');
if (nodes.length) rootUl.appendChild(makeNode(T.root||0));
document.getElementById('tree').appendChild(rootUl);
setCollapsed(T.root||0, false);
decision.forEach(e=>{ let p = edges[e].parent; while(p!==null&&p!==undefined){ setCollapsed(p,false); p = nodes[p].parent; } });
const slider = document.getElementById('replay-slider'); slider.max = R.steps;
slider.addEventListener('input', ()=>showStep(parseInt(slider.value,10)));
document.getElementById('replay-start').addEventListener('click', ()=>showStep(0));
document.getElementById('replay-prev').addEventListener('click', ()=>showStep(prevStep()));
document.getElementById('replay-next').addEventListener('click', ()=>showStep(nextStep()));
if (W) document.getElementById('by-wave-box').hidden = false;
document.getElementById('replay-end').addEventListener('click', ()=>showStep(R.steps));
document.getElementById('replay-play').addEventListener('click', play);
document.getElementById('expand-all').addEventListener('click', ()=>nodes.forEach((_,i)=>setCollapsed(i,false)));
document.getElementById('collapse-all').addEventListener('click', ()=>nodes.forEach((_,i)=>setCollapsed(i,true)));
showStep(R.steps);
if (nodes.length) select(T.root||0);
window.clewTreeView = {showStep: showStep, step: ()=>step, steps: R.steps, toggle: toggle,
                      waves: W};
})();
"""
