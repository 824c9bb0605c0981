"""Task texts of HillSearch, TreeSearch and MaxSatSearch (spec_003 §3.2–§3.5, §5.3).

The wording paraphrases the paper's prompts (Figures 5–7) as the spec does; every listed item and
the exact JSON keys are kept. Functions here are pure text builders over plain data, so the envs,
the hand-off wrapper and tests share one copy of every message.

Decisions recorded here:
* [D §7.5] MaxSat system prompt: clause count ``c = m`` (multiplicity-counted) and
  ``l = max(k_gold, k_other)``.
* [D §3.5] JSON schemas: a free-text ``reason`` before the ``query`` object, no numeric bounds on
  ``x`` (checked semantically by the env).
* The STOP action that wrappers use (see ``protocol.STOP``) is deliberately not announced: the
  paper's protocol has no final-answer or stop step.
"""

from __future__ import annotations

import itertools
from typing import Any

# --- system prompts (Env.instructions) ----------------------------------------------------------

HILL_SYSTEM = """\
You are playing a game: find the global maximum of a hidden continuous function f(x).
Be aware that f can have many local maxima that are not the global one. Your number of queries is limited.
f is defined on [0, 10].
Rules:
- Each turn you may ask for f(x) at any real x in [0, 10].
- You are told how many queries remain on every turn.
- Your objective is the global maximum value of f.
Response format:
- Reply with ONLY this JSON and no other text:
  {"reason": "<your strategy for choosing x>", "query": {"x": <number between 0 and 10>}}
- After each query you will receive f(x) for the x you chose."""

TREE_SYSTEM = """\
You are playing a graph game: find the largest hidden node value. Your queries are limited.
Rules:
- You get the graph structure and the value of a start node.
- Adjacency lists are in random order. The list of nodes you may query next puts neighbours of recently
  queried nodes first; ties are in random order.
- Querying a node reveals its value.
- Never query the same node twice.
- You may only query a node that is a neighbour of a node whose value you already know.
- The values of two connected nodes differ by at most 4.
Response format:
- Reply with ONLY this JSON and no other text: {"reason": "<your reasoning>", "query": {"node": <id>}}
- After each query you will receive the value of that node."""

MAXSAT_SYSTEM = """\
You are playing a game: find a 0/1 assignment that earns the highest total weight of satisfied constraints in a
hidden Boolean formula.
IMPORTANT: this formula is NOT in conjunctive normal form.
Rules:
- There are {n} Boolean variables x_0 .. x_{last}.
- There are {c} weighted clauses.
- Each clause joins between 1 and {l} literals (a variable or its negation) with logical AND.
- A clause counts as satisfied only if EVERY literal in it is true (the opposite of usual CNF, which uses OR).
- Each turn you may query ANY complete assignment (0/1 value for every variable).
- You receive the total weight of the clauses your assignment satisfies.
- Your objective is the largest weighted sum you can find within the budget.
Response format:
- Reply with ONLY this JSON and no other text:
  {{"reason": "<your strategy>", "query": {example}}}"""


def task_part(system: str) -> str:
    """A system prompt without its reply rule (Env.task_description): the "Reply with ONLY this
    JSON" line and the JSON template under it go; the feedback line stays."""
    lines, out, skip = system.splitlines(), [], False
    for line in lines:
        if line.startswith("- Reply with ONLY"):
            skip = not line.rstrip().endswith("}")   # the template may be on the next line
            continue
        if skip and line.startswith("  "):
            skip = False
            continue
        skip = False
        out.append("Feedback:" if line == "Response format:" else line)
    if out and out[-1] == "Feedback:":        # nothing left under the header
        out.pop()
    return "\n".join(out)


HILL_ANSWER = ('a JSON object {"reason": "<your strategy for choosing x>", "query": {"x": '
               '<number between 0 and 10>}}')
TREE_ANSWER = 'a JSON object {"reason": "<your reasoning>", "query": {"node": <id>}}'
HILL_HELP = "One query per turn: f(x) at a real x in [0, 10]."
TREE_HELP = ("One query per turn: the value of a node that is a neighbour of a node whose value "
             "you know; each observation lists the nodes you may query.")


def maxsat_answer(n: int) -> str:
    return f'a JSON object {{"reason": "<your strategy>", "query": {{"x0": 0|1, ..., "x{n - 1}": 0|1}}}}'


def maxsat_help(n: int) -> str:
    return f"One query per turn: a complete 0/1 assignment of x0 .. x{n - 1}."


def hill_system() -> str:
    return HILL_SYSTEM


def tree_system() -> str:
    return TREE_SYSTEM


def maxsat_system(n: int, m: int, max_literals: int) -> str:
    """§3.4 with c = m and l = max(k_gold, k_other) [D §7.5]."""
    if n >= 3:
        example = f'{{"x0": 0, "x1": 1, ..., "x{n - 1}": 0}}'
    else:
        example = "{" + ", ".join(f'"x{i}": {i % 2}' for i in range(n)) + "}"
    return MAXSAT_SYSTEM.format(n=n, last=n - 1, c=m, l=max_literals, example=example)


# --- first user messages ------------------------------------------------------------------------

def hill_first(budget: int) -> str:
    return f"Budget: {budget} queries. Find the maximum value of f."


def tree_first(n_nodes: int, adjacency_lines: list[str], root: int, budget: int,
               queryable: list[int]) -> str:
    graph = "\n".join(adjacency_lines)
    return (
        f"n = {n_nodes}\n"
        "Graph (adjacency list; the order of nodes and of each node's neighbours is random):\n"
        f"{graph}\n"
        f"Start node: {root}, value 0. Queries left: {budget}. Find the maximum node value.\n"
        f"Nodes you may query now: {format_ids(queryable)}"
    )


def maxsat_first(budget: int, m: int) -> str:
    return f"Budget: {budget} queries. Maximise the number of satisfied clauses (m={m})."


# --- feedback after a valid query ---------------------------------------------------------------

def format_x(x: float) -> str:
    """A query point as the model will read it back (shortest exact repr, no '1.0' noise)."""
    return repr(float(x))


def format_hill_value(y: float) -> str:
    """[D §2.1.4] values are printed with 4 decimals."""
    return f"{y:.4f}"


def format_ids(ids: list[int]) -> str:
    return "[" + ", ".join(str(i) for i in ids) + "]"


def hill_feedback(x: float, y: float, left: int) -> str:
    return f"f({format_x(x)}) = {format_hill_value(y)}. Queries left: {left}."


def tree_feedback(node: int, value: int, left: int, new: list[int], available: list[int]) -> str:
    """§3.3: children just opened, or (for a leaf) every queryable node, most recent first."""
    head = f"Node {node} has value {value}. Queries left: {left}."
    if new:
        return (f"{head} Newly queryable because of this query: {format_ids(new)}.\n"
                "Nodes that were queryable before remain valid choices.")
    return (f"{head} This query opened no new nodes.\n"
            f"All nodes you can query now (most recently opened first): {format_ids(available)}")


def maxsat_feedback(score: int, left: int) -> str:
    return f"Satisfied clauses: {score}. Queries left: {left}."


def invalid_feedback(message: str) -> str:
    """§3.6 the informative error message of a 'loud' retry."""
    return f"Invalid query: {message}. Please try again."


# --- hand-off messages (§5.3) -------------------------------------------------------------------

def hill_handoff(history: list[tuple[float, float]], q_left: int, gap_min: float = 0.5,
                 max_gaps: int = 10, fallback_gaps: int = 3) -> str:
    """§5.3 HillSearch hand-off: data sorted by x, unexplored stretches, reflection questions.

    Gap rule [D]: distinct queried x plus the endpoints 0 and 10; every interval of length
    >= 0.5 (the baseline window), largest first, at most 10; if none qualifies, the 3 largest.
    """
    lines = [
        "### MISSION HAND-OFF",
        (f"A previous agent used {len(history)} queries on the domain [0, 10] and was then "
         "stopped. You are a NEW agent taking over."),
        "Your job is to find the global maximum.",
        "Data collected so far (sorted by x):",
    ]
    seen: dict[float, float] = {}
    for x, y in history:
        seen.setdefault(x, y)
    for x in sorted(seen):
        lines.append(f"  x={format_x(x)} -> f(x)={format_hill_value(seen[x])}")
    lines.append("Stretches of the domain with no queries yet:")
    for lo, hi in hill_gaps(sorted(seen), gap_min, max_gaps, fallback_gaps):
        lines.append(f"  * [{lo:.3f}, {hi:.3f}] (length {hi - lo:.3f})")
    lines += [
        "Instructions for the new agent:",
        "  1. Look over the history. Did the previous agent get stuck on a local maximum?",
        "  2. Make a fresh plan for the budget that is left.",
        f"You have {q_left} queries remaining. Using the hand-off above, output your next query.",
    ]
    return "\n".join(lines)


def hill_gaps(xs: list[float], gap_min: float = 0.5, max_gaps: int = 10,
              fallback_gaps: int = 3) -> list[tuple[float, float]]:
    """Unqueried intervals of [0, 10] for the hand-off (§5.3 gap rule), largest first."""
    points = sorted({0.0, 10.0, *(min(10.0, max(0.0, x)) for x in xs)})
    gaps = list(itertools.pairwise(points))
    gaps.sort(key=lambda g: (-(g[1] - g[0]), g[0]))
    wide = [g for g in gaps if g[1] - g[0] >= gap_min]
    return wide[:max_gaps] if wide else gaps[:fallback_gaps]


def tree_handoff(history: list[tuple[int, int]], best: tuple[int, int],
                 frontier_by_height: list[tuple[int, list[int]]], q_left: int,
                 graph_text: str | None = None) -> str:
    """§5.3 TreeSearch hand-off; ``frontier_by_height`` is already shuffled inside each height."""
    lines = [
        "### MISSION HAND-OFF ###",
        (f"A previous agent used {len(history)} queries on the graph and was then stopped. "
         "You are a NEW agent taking over. Find the maximum value."),
    ]
    if graph_text:
        lines.append(graph_text)
    lines.append("Query history (chronological):")
    lines += [f"  * Node {v} -> value {x}" for v, x in history]
    lines += [
        f"Best found so far: node {best[0]} with value {best[1]}.",
        ("Nodes you can query next, grouped by height (distance from the start node); each is "
         "unknown and has a known neighbour; order inside each height is shuffled:"),
    ]
    lines += [f"  * height {h}: {format_ids(ids)}" for h, ids in frontier_by_height]
    lines.append(
        "Instructions: choose the next node. Do not just keep extending the last path; think about "
        "switching to another height or another part of the frontier. "
        f"You have {q_left} queries remaining. Output your next query.")
    return "\n".join(lines)


def maxsat_handoff(history: list[tuple[str, int]], n: int, q_left: int, top: int = 5) -> str:
    """§5.3 MaxSatSearch hand-off with the coverage counts [D: 5 variables each way]."""
    t = len(history)
    best_bits, best_score = "", 0
    if history:  # first occurrence of the maximum (ties: earliest query)
        best_score = max(s for _, s in history)
        best_bits = next(b for b, s in history if s == best_score)
    lines = [
        "### MISSION HAND-OFF ###",
        (f"A previous agent used {t} queries on the MAX-SAT black box and was then stopped. "
         "You are a NEW agent taking over."),
        f"Progress: {t} assignments tried. Best score so far: {best_score}.",
        "Query history (chronological):",
    ]
    lines += [f"  * step {i}: score={s} — assignment={b}" for i, (b, s) in enumerate(history, 1)]
    lines.append(f"Best assignment found (bits for x0..x{n - 1}): {best_bits or 'none yet'}")
    zeros = [sum(1 for b, _ in history if b[i] == "0") for i in range(n)]
    ones = [t - z for z in zeros]
    few0 = sorted(range(n), key=lambda i: (zeros[i], i))[:top]
    few1 = sorted(range(n), key=lambda i: (ones[i], i))[:top]
    lines += [
        "Coverage summary (how often each variable was 0 or 1 across the queried assignments):",
        "  - fewest 0s: " + ", ".join(f"x{i} (0 in {zeros[i]}/{t})" for i in few0),
        "  - fewest 1s: " + ", ".join(f"x{i} (1 in {ones[i]}/{t})" for i in few1),
        f"You have {q_left} queries remaining. Output your next query.",
    ]
    return "\n".join(lines)


# --- structured output (§3.5) -------------------------------------------------------------------

def response_schema(query_properties: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of one answer: ``reason`` first (a chain-of-thought slot), then ``query``."""
    return {
        "type": "object",
        "properties": {
            "reason": {"type": "string"},
            "query": {
                "type": "object",
                "properties": query_properties,
                "required": list(query_properties),
                "additionalProperties": False,
            },
        },
        "required": ["reason", "query"],
        "additionalProperties": False,
    }


def hill_schema() -> dict[str, Any]:
    return response_schema({"x": {"type": "number"}})


def tree_schema() -> dict[str, Any]:
    return response_schema({"node": {"type": "integer"}})


def maxsat_schema(n: int) -> dict[str, Any]:
    return response_schema({f"x{i}": {"type": "integer", "enum": [0, 1]} for i in range(n)})
