"""Shared fixtures for the grid-map tests: docs/methods/envs.md#grid-map-with-task-dag instances, a hypothesis strategy for random
small instances, and the spec's docs/methods/metric-explore-exploit-error.md#per-step-error reference scorer (brute force, recomputed every step)."""

from __future__ import annotations

from collections import Counter, deque
from itertools import pairwise

from clew.envs.gridmap.instance import DIRECTIONS, Instance, build_instance
from hypothesis import strategies as st

OPEN3 = [(x, y) for x in range(3) for y in range(3)]
_DELTA = {v: k for k, v in DIRECTIONS.items()}


def actions_for(path):
    """Direction names that walk ``path`` (consecutive cells must be 4-neighbours)."""
    return [_DELTA[(b[0] - a[0], b[1] - a[1])] for a, b in pairwise(path)]


def instance_a() -> Instance:
    """docs/methods/metric-explore-exploit-error.md#worked-examples Test A/C: A at (0,0) primitive, goal G at (2,2) needs A."""
    return build_instance(3, 3, OPEN3, (1, 1), {"A": [], "G": [["A"]]},
                          {"A": (0, 0), "G": (2, 2)}, "G")


def instance_b() -> Instance:
    """docs/methods/metric-explore-exploit-error.md#worked-examples Test B: A primitive at (0,0), B at (2,1) needs A, goal G at (2,2) needs B."""
    return build_instance(3, 3, OPEN3, (1, 1), {"A": [], "B": [["A"]], "G": [["B"]]},
                          {"A": (0, 0), "B": (2, 1), "G": (2, 2)}, "G")


@st.composite
def small_instances(draw, max_side: int = 5, max_nodes: int = 5):
    """A random connected map (any shape) with a random DNF DAG whose unique sink is the goal."""
    w = draw(st.integers(2, max_side))
    h = draw(st.integers(2, max_side))
    box = [(x, y) for x in range(w) for y in range(h)]
    open_flags = draw(st.lists(st.booleans(), min_size=len(box), max_size=len(box)))
    start = draw(st.sampled_from(box))
    cells = {c for c, f in zip(box, open_flags) if f} | {start}
    comp = {start}
    queue = deque([start])
    while queue:
        c = queue.popleft()
        for dx, dy in DIRECTIONS.values():
            n = (c[0] + dx, c[1] + dy)
            if n in cells and n not in comp:
                comp.add(n)
                queue.append(n)
    free = sorted(comp - {start})
    if not free:  # make room for at least one node
        for dx, dy in DIRECTIONS.values():
            n = (start[0] + dx, start[1] + dy)
            if 0 <= n[0] < w and 0 <= n[1] < h:
                comp.add(n)
                free = [n]
                break
    k = draw(st.integers(1, min(max_nodes, len(free))))
    node_cells = draw(st.permutations(free))[:k]
    names = [f"N{i}" for i in range(k)]
    dag: dict[str, list[list[str]]] = {}
    for i, u in enumerate(names[:-1]):
        options = []
        if i > 0:
            n_opt = draw(st.integers(0, 2))
            for _ in range(n_opt):
                opt = sorted(draw(st.sets(st.sampled_from(names[:i]), min_size=1, max_size=3)))
                if opt not in options:
                    options.append(opt)
        dag[u] = options
    has_child = {p for opts in dag.values() for o in opts for p in o}
    sinks = [u for u in names[:-1] if u not in has_child]
    dag[names[-1]] = [sinks] if sinks else []
    return build_instance(w, h, comp, start, dag, dict(zip(names, node_cells)), names[-1])


@st.composite
def walks(draw, inst: Instance, max_len: int = 60):
    """Random action lists: mostly admissible moves along the walk, some blocked/unknown words."""
    pos, actions = inst.start, []
    for _ in range(draw(st.integers(0, max_len))):
        kind = draw(st.integers(0, 19))
        if kind == 0:
            actions.append(draw(st.sampled_from(["jump", "", "UP!", "{\"action\": \"fly\"}"])))
            continue
        if kind == 1:
            blocked = [d for d in DIRECTIONS if d not in inst.moves[pos]]
            if blocked:
                actions.append(draw(st.sampled_from(blocked)))
                continue
        d = draw(st.sampled_from(inst.moves[pos]))
        actions.append(d)
        pos = (pos[0] + DIRECTIONS[d][0], pos[1] + DIRECTIONS[d][1])
    return actions


# --- the spec's docs/methods/metric-explore-exploit-error.md#per-step-error reference implementation (brute force, for cross-checking) ----------------
def bfs_from(cells, src):
    dist = {src: 0}
    q = deque([src])
    while q:
        c = q.popleft()
        for dx, dy in DIRECTIONS.values():
            n = (c[0] + dx, c[1] + dy)
            if n in cells and n not in dist:
                dist[n] = dist[c] + 1
                q.append(n)
    return dist


def stale(walk):
    vc = Counter(walk)
    ec = Counter(frozenset(pair) for pair in pairwise(walk))
    c = len(ec) - len(vc) + 1
    e = sum(max(m - 2, 0) for m in ec.values())
    n = sum(max(m - 2, 0) for m in vc.values())
    return c + e + n, (c, e, n)


def reference_score(inst: Instance, traj):
    """docs/methods/metric-explore-exploit-error.md#per-step-error ``score_trajectory`` on a position sequence (noops repeat the cell)."""
    cells = inst.cells
    loc = {n.name: n.cell for n in inst.nodes}
    prereq = {n.name: [set(o) for o in n.options] for n in inst.nodes}
    goal = inst.goal
    cell2node = {v: k for k, v in loc.items()}
    status = {u: "undiscovered" for u in loc}
    observed = set()

    def prec(u):
        return (not prereq[u]) or any(all(status[p] == "achieved" for p in opt)
                                      for opt in prereq[u])

    def arrive(c):
        observed.add(c)
        u = cell2node.get(c)
        if u is None:
            return
        if status[u] == "undiscovered":
            status[u] = "discovered"
        if status[u] == "discovered" and prec(u):
            status[u] = "achieved"

    arrive(traj[0])
    seg = [traj[0]]
    n_case, n_err, rows = Counter(), Counter(), []
    for t in range(len(traj) - 1):
        p, q = traj[t], traj[t + 1]
        P = {u for u in loc if status[u] == "discovered" and prec(u)}
        U = {(c[0] + dx, c[1] + dy) for c in observed for dx, dy in DIRECTIONS.values()
             if (c[0] + dx, c[1] + dy) in cells and (c[0] + dx, c[1] + dy) not in observed}
        assert P or U  # invariant 2
        if not P:
            case, T = 1, U
        elif goal in P:
            case, T = 2, {loc[goal]}
        elif not U:
            case, T = 3, {loc[u] for u in P}
        else:
            case, T = 4, U | {loc[u] for u in P}
        dtab = {z: bfs_from(cells, z) for z in T}
        noop = q == p
        progress = (not noop) and (q not in observed or q in {loc[u] for u in P})
        gain = (not noop) and (q in T or any(dtab[z][q] < dtab[z][p] for z in T))
        s_before, _ = stale(seg)
        s_after = s_before if noop else stale(seg + [q])[0]
        if progress:
            err = 0
        elif noop or not gain:
            err = 1
        elif len(T) == 1:
            err = 0
        else:
            err = int(s_after > s_before)
        n_case[case] += 1
        n_err[case] += err
        rows.append({"t": t, "p": p, "q": q, "case": case, "nT": len(T), "T": T, "P": P,
                     "progress": progress, "gain": gain, "S_before": s_before,
                     "S_after": s_after, "err": err})
        if progress:
            seg = [q]
        elif not noop:
            seg = seg + [q]
        arrive(q)
        if status[goal] == "achieved":
            break
    den_x, num_x = n_case[1] + n_case[4], n_err[1] + n_err[4]
    den_e, num_e = n_case[2] + n_case[3] + n_case[4], n_err[2] + n_err[3] + n_err[4]
    nan = float("nan")
    return {"rows": rows, "success": status[goal] == "achieved",
            "exploration_error": num_x / den_x if den_x else nan,
            "exploitation_error": num_e / den_e if den_e else nan}


def positions(inst: Instance, actions):
    """The position sequence of ``actions`` (invalid ones repeat the cell)."""
    from clew.envs.gridmap.actions import parse_direction

    pos, out = inst.start, [inst.start]
    for a in actions:
        d = parse_direction(a)
        if d is not None and d in inst.moves[pos]:
            pos = (pos[0] + DIRECTIONS[d][0], pos[1] + DIRECTIONS[d][1])
        out.append(pos)
    return out
