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
