"""What a model-free search policy proposes on a web page (docs/web.md), the
:meth:`~clew.envs.browsergym.env.BrowserGymEnv.heuristic_candidates` hook: what search on
BrowserGym tasks runs with on a CPU with no weights.

* **Policy** (:func:`candidate_actions`): a click on every clickable element of the page and, for
  every text field, a ``fill`` with each string the goal puts in quotes (MiniWoB++ quotes what to
  type: ``Enter "Myron" into the text field``). Left out: fills of a field that holds text already
  (a password field shows its text masked), clicks on a box or option that is checked already, and
  the action just taken. These would only undo progress or change nothing: the search sees no
  value before the end, and without them its choice among equal values toggles a box or
  overwrites a field until the budget runs out. :class:`~clew.agents.heuristics.search_roles.HeuristicPolicy`
  gives the candidates of any env that has them uniform priors, whatever its ``prior`` option
  says.
* **Value**: the task's own reward at the end: :class:`~clew.agents.heuristics.search_roles.HeuristicValue`
  reads the env's ``progress()``, which for web envs is their grade (1 after success, 0 before
  and after failure), and adds its noise (``value.noise=0`` gives the reward itself).

Decision: with uniform priors, the order of the candidates decides which ones survive the search's
branching factor and which are tried first (ties go to the first edge). Candidates that the goal
names come first: fills of its quoted strings, then clicks on elements whose text the goal mentions
(or that show a quoted string); then the other clicks, in page order.
"""

from __future__ import annotations

import re
from typing import Any

from clew.envs.browsergym.observation import TEXT_ROLES

QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”")


def quoted_strings(goal: str) -> list[str]:
    """Strings the goal puts in double quotes, in order, each once."""
    found = [a or b for a, b in QUOTED.findall(goal)]
    return list(dict.fromkeys(s for s in found if s.strip()))


def _mentioned(text: str, goal: str, quoted: list[str]) -> bool:
    text = text.strip()
    if not text:
        return False
    if re.search(rf"(?<!\w){re.escape(text)}(?!\w)", goal, re.IGNORECASE):
        return True
    return any(q.lower() == text.lower() for q in quoted)


def candidate_actions(env: Any, previous: str | None = None) -> list[str]:
    """The policy's actions in the env's current page (module docstring), most relevant first;
    ``previous`` is the canonical text of the action that led here."""
    if env.done:
        return []
    info = env.observation().info
    goal, elements = info.get("goal", ""), info.get("elements", [])
    quoted = quoted_strings(goal)
    fills, named, others = [], [], []
    for e in elements:
        if e["role"] in TEXT_ROLES and not e.get("value"):   # a field with text is left alone
            fills += [f"fill({e['bid']!r}, {s!r})" for s in quoted]
        if e["clickable"] and not e.get("checked"):
            click = f"click({e['bid']!r})"
            (named if _mentioned(e.get("text") or e["name"], goal, quoted) else others).append(click)
    return [a for a in fills + named + others if a != previous]
