"""Best-first "Search Agent" of Koh et al. (spec_002 §5.4).

The frontier search of :mod:`clew.search.bfs_dfs` with a max-priority queue: the priority of a
frontier edge is the value of the state it would be applied in (its parent's value; the root's
children start at 0.5); ties go to the lower rank of the root action the edge descends from, then
the lower rank among its siblings, then insertion order. Each pop is one budget unit; the best
(score, sequence) found is committed whole. STOP candidates are evaluated by V (D17;
``stop_eval="code"`` for the code's negated-priority quirk).
"""

from __future__ import annotations

from typing import Any

from clew.search.bfs_dfs import FrontierSearch


def make_best_first(**options: Any):
    """``best-first``: SA value, max-value frontier (spec_002 §5.4)."""
    from clew.search.rmcts import build_search_agent

    stop_eval = options.get("stop_eval", "evaluate")
    agent = build_search_agent("best-first", dict(options),
                               defaults={"value": {"kind": "single"}, "reflection": False})
    agent.algorithm = FrontierSearch(agent.config.search, "best", stop_eval)
    return agent
