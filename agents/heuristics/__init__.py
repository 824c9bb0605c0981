"""clew.agents.heuristics: agents and roles with no LM (labelled heuristic in reports)."""
