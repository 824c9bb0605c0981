"""Search trees to Exploratory Learning (EL) and Imitation Learning (IL) chats (docs/methods/exploratory-learning.md).

The pipeline for one recorded episode (docs/methods/exploratory-learning.md#teacher-forcing):

1. :func:`select_traversals` keeps each step's logged traversals up to the first one that reaches
   the executed action, without consecutive duplicates (docs/methods/exploratory-learning.md#traversals-kept);
2. :func:`flatten_step` replays them as a walk through the tree: observations, actions, and a
   ``Back`` item wherever the next traversal leaves the current branch (docs/methods/exploratory-learning.md#flattening-a-step);
3. :func:`flatten_episode` joins the steps, keeping one copy of each boundary state, and drops the
   final observation (docs/methods/exploratory-learning.md#merging-steps); it checks the trees against the executed trajectory;
4. :func:`el_turns` renders one assistant turn per action: the assessment of the state the turn
   is issued from, then the action's completion (docs/methods/exploratory-learning.md#turn-text); :func:`il_turns` takes the executed
   completions only (docs/methods/exploratory-learning.md#imitation-learning);
5. :func:`teacher_force` replays the turns in a fresh env with the distilled agent's own format
   and decisions (:mod:`clew.agents.distilled`), producing the user turns exactly as at
   inference and the validity of every target (docs/methods/exploratory-learning.md#samples-and-loss-weights, docs/methods/exploratory-learning.md#teacher-forcing);
6. :func:`make_samples` cuts the chat into training samples with per-turn weights (docs/methods/exploratory-learning.md#samples-and-loss-weights).

Decisions (spec [D] items and our own):

* Traversal order is the one logged at search time; the target is found by edge identity (docs/methods/exploratory-learning.md#traversals-kept).
* State ids follow the runner (runner/episodes.py, ``episode.path``): every valid forward step gets
  the next id, a backtrack returns to the id on the current path. This equals docs/methods/exploratory-learning.md#merging-steps's "order of
  first appearance" whenever no node is entered twice by a forward move; when the search walks
  down an earlier branch again, the state gets a new id, as it would at inference.
* ``assessment_pick="closest"``, ``assessment_value="both"``: rationale text plus the value
  on the unit scale with two decimals; a signed value v is shown as (v + 1) / 2. A state with no
  written rationale (heuristic value functions) gets the number only.
* An edge whose raw completion does not state its action (no answer phrase, no fence: heuristic
  policies record the bare action) gets the answer line alone, ``Next action: ```a````; the same
  holds for IL steps.
* For envs whose ``flags.supports_backtrack`` is False no Back items are made: the new actions of
  each kept traversal follow each other as real actions (docs/methods/exploratory-learning.md#distilled-agent), and an action already issued in
  the episode (a query) is not issued again.
* Replay mismatches (a replayed observation differing from the logged one) are counted, not
  fatal, because observations render clocks from the replayed step count; ``strict`` makes them fatal.
* The env's own step budget is *not* lifted during the replay (the method asks to): there is no generic
  switch for it, and a trajectory longer than the budget could not be run by the distilled agent
  either. Such episodes are skipped and counted. A replay that reaches a finished state before
  its last turn (the search walked into the goal and went on searching) ends there when the
  grade is at least the episode's: a shorter successful trajectory.
* A backtrack to the state the replay is already in (the branch held only invalid actions,
  which create no state at inference) is left out.
* A simulated action after which the env ended the episode (a terminal ``env_done`` node) is
  left out of the walk when the walk goes on, like a STOP: at inference the runner ends the
  episode there and no backtrack can follow (web tasks end on a wrong click).
* Targets that mention reflections are dropped and counted (no rephrasing).
* Charged simulation (query-budget tasks): every query a search simulated was asked for real, so
  the executed steps, look-ahead queries included, are the trajectory of EL and IL alike;
  :func:`charged_turns` gives EL its assessments from the trees (docs/methods/exploratory-learning.md#charged-simulation).
* ``el_subsample`` (the code's subsampling to 30 trajectories) is not implemented: off by default.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from clew.agents.distilled import (
    BACKTRACK_TURN,
    Trail,
    answer,
    completion_text,
    decide,
    first_user,
    forward_user,
    invalid_user,
    returned_user,
    system_prompt,
    with_trail,
)
from clew.agents.window import ChatWindow
from clew.envs.base import Env, Task
from clew.search.tree import Edge, Node, Tree
from clew.training.hindsight import Hindsight, hindsight

UNIT_LETTERS = {"A": 1.0, "B": 0.9, "C": 0.5, "D": 0.2, "E": 0.0}
SIGNED_LETTERS = {"A": 1.0, "B": 0.7, "C": 0.5, "D": -0.2, "E": -1.0}


class FlattenError(ValueError):
    """An episode that cannot be turned into EL data; the message says why (and is counted)."""


# --- items of a flattened trajectory ------------------------------------------------------------
@dataclass(eq=False)
class Obs:
    """A state: ``node`` of the tree of step ``step`` (the previous tree's node at a boundary)."""

    node: Node
    step: int
    returned: bool = False
    scale: str = "unit"


@dataclass(eq=False)
class Act:
    edge: Edge
    step: int


@dataclass(eq=False)
class Back:
    target: Node
    n: int
    step: int


Item = Obs | Act | Back


def _ends(edge: Edge) -> bool:
    """A STOP or NONE edge leaves no state behind: it is never backed out of (docs/methods/exploratory-learning.md#flattening-a-step)."""
    return edge.is_stop or edge.is_none


def _finishes(edge: Edge) -> bool:
    """An action after which the env ended the episode: nothing follows it at inference (the
    runner stops), so a walk that goes on afterwards leaves it out (a MiniWoB++ task ends on a
    wrong click, docs/web.md)."""
    return edge.child is not None and edge.child.terminal_reason == "env_done"


def select_traversals(tree: Tree, keep: str = "all", margin: float = 0.1) -> list[list[int]]:
    """Traversals up to and including the first that reaches the executed action (docs/methods/exploratory-learning.md#traversals-kept).

    With one decision edge e* (a root edge) that is the first traversal ending in e*; with a
    committed path (docs/methods/mcts.md#value-one-paths) the first traversal equal to the path. Consecutive duplicates go.
    ``keep="dead_ends"`` keeps, of the traversals before that one, only those that met a dead
    end: their last state is valued at least ``margin`` below the state where they left the
    executed path (docs/methods/exploratory-learning.md#dead-ends).
    """
    target = list(tree.decision_edges)
    if not target:
        raise FlattenError("the tree records no executed edge (decision.edges is empty)")
    kept: list[list[int]] = []
    for trav in tree.traversals:
        kept.append(list(trav))
        reached = trav[-1:] == target if len(target) == 1 else list(trav) == target
        if reached:
            break
    else:
        raise FlattenError(f"no logged traversal reaches the executed edge(s) {target}")
    if keep == "dead_ends":
        kept = [t for t in kept[:-1] if _dead_end(tree, t, kept[-1], margin)] + kept[-1:]
    out: list[list[int]] = []
    for trav in kept:
        if trav and (not out or trav != out[-1]):
            out.append(trav)
    return out


def _dead_end(tree: Tree, trav: list[int], target: list[int], margin: float) -> bool:
    """Whether ``trav`` ends valued ``margin`` below the state where it leaves ``target``'s
    path (the root when it leaves at once; a root without a value is compared with the
    executed child, the state the search went on to)."""
    j = 0
    while j < min(len(trav), len(target)) and trav[j] == target[j]:
        j += 1
    if j == len(trav):
        return False                       # a prefix of the executed path: no branch left
    leaf = tree.edge(trav[-1]).child
    start = tree.edge(trav[j - 1]).child if j else tree.root
    ref = start.value if start is not None and start.value is not None else None
    if ref is None:
        first = tree.edge(target[0]).child
        ref = first.value if first is not None else None
    if leaf is None or leaf.value is None or ref is None:
        return False
    return leaf.value <= ref - margin


def flatten_step(tree: Tree, travs: list[list[int]], *, step: int = 0, backtrack: bool = True,
                 root: Node | None = None, scale: str = "unit",
                 issued: set[str] | None = None) -> list[Item]:
    """Walk the kept traversals of one tree (docs/methods/exploratory-learning.md#flattening-a-step). ``root`` stands for the tree's root node
    (the previous step's final state at a step boundary). Without backtrack, an action whose
    key is in ``issued`` (shared across the steps of an episode) is not issued again."""
    root_as = root if root is not None else tree.root

    def state(node: Node) -> Node:
        return root_as if node is tree.root else node

    seq: list[Item] = [Obs(root_as, step, scale=scale)]
    cur: list[Edge] = []
    done_keys = issued if issued is not None else set()   # without backtrack: issued actions
    for ids in travs:
        trav = [tree.edge(i) for i in ids]
        if cur and (_ends(cur[-1]) or _finishes(cur[-1])):
            if _finishes(cur[-1]) and isinstance(seq[-1], Obs) and seq[-1].node is cur[-1].child:
                seq.pop()  # the state the episode ended in
            if isinstance(seq[-1], Act) and seq[-1].edge is cur[-1]:
                seq.pop()  # the Act(stop/none/finishing) item
            cur = cur[:-1]
        j = 0
        while j < min(len(cur), len(trav) - 1) and cur[j] is trav[j]:
            j += 1
        undo = len(cur) - j
        if undo > 0 and backtrack:
            target = state(cur[j - 1].child) if j else root_as
            seq += [Back(target, undo, step), Obs(target, step, returned=True, scale=scale)]
            cur = cur[:j]
        elif undo > 0:  # no backtrack in this env: the new actions simply follow (docs/methods/exploratory-learning.md#distilled-agent)
            cur = cur[:j]
        for edge in trav[j:]:
            cur.append(edge)
            if not backtrack:
                if edge.key in done_keys:   # already issued: a query is not repeated
                    continue
                done_keys.add(edge.key)
            seq.append(Act(edge, step))
            if not _ends(edge):
                seq.append(Obs(edge.child, step, scale=scale))
    return seq


def flatten_episode(record: dict[str, Any], trees: dict[int, Tree], *,
                    backtrack: bool = True, keep: str = "all",
                    margin: float = 0.1) -> list[Item]:
    """Merge the flattened steps of one episode (docs/methods/exploratory-learning.md#merging-steps) and check them against the record.

    ``trees`` maps the real step index t to the tree searched at step t; a committed path of k
    actions covers steps t..t+k-1. Every executed step must be covered, each tree's executed
    actions must be the recorded ones, and each simulated state that became real must show the
    recorded observation.
    """
    actions = list(record.get("actions") or [])
    steps = list(record.get("steps") or [])
    if not actions:
        raise FlattenError("the episode has no executed action")
    merged: list[Item] = []
    t = 0
    prev_final: Node | None = None
    issued: set[str] = set()
    while t < len(actions):
        tree = trees.get(t)
        if tree is None:
            raise FlattenError(f"step {t} has no search tree")
        path = [tree.edge(i) for i in tree.decision_edges]
        if not path:
            raise FlattenError(f"step {t}: the tree records no executed edge")
        for i, edge in enumerate(path):
            if t + i >= len(actions):
                raise FlattenError(f"step {t}: the tree's path is longer than the episode")
            if not edge.is_none and edge.action != actions[t + i]:
                raise FlattenError(f"step {t + i}: executed {actions[t + i]!r} but the tree's "
                                   f"edge is {edge.action!r}")
            if (edge.child is not None and edge.child.obs is not None and t + i < len(steps)
                    and not _ends(edge) and steps[t + i].get("valid", True)
                    and edge.child.obs != steps[t + i].get("obs")):
                raise FlattenError(f"step {t + i}: the simulated observation differs from the "
                                   f"real one (nondeterministic env?)")
        scale = str(tree.meta.get("value_scale", "unit"))
        seq = flatten_step(tree, select_traversals(tree, keep, margin), step=t,
                           backtrack=backtrack,
                           root=prev_final, scale=scale, issued=issued)
        merged = seq if not merged else merged + seq[1:]
        last = path[-1]
        prev_final = last.child
        t += len(path)
        if _ends(last) and t < len(actions):
            raise FlattenError(f"step {t - 1}: a STOP/NONE was executed before the episode end")
    if isinstance(merged[-1], Obs):
        merged.pop()
    return merged


def count_actions(items: list[Item]) -> int:
    """Assistant turns of a flattened trajectory: forward and backtrack actions (docs/methods/exploratory-learning.md#imitation-learning)."""
    return sum(isinstance(x, (Act, Back)) for x in items)


def state_ids(items: list[Item]) -> list[int | None]:
    """Runner-style state id of each Obs item (None for the others), assuming every forward
    action is valid: the ids a replay gives in a deterministic env (see the module docstring)."""
    out: list[int | None] = []
    path: list[tuple[Node, int]] = []
    next_id = 0
    for item in items:
        if isinstance(item, Obs):
            if item.returned:
                sid = _sid_on_path(path, item.node)
                del path[[s for _, s in path].index(sid) + 1:]
            else:
                sid, next_id = next_id, next_id + 1
                path.append((item.node, sid))
            out.append(sid)
        else:
            out.append(None)
    return out


def _sid_on_path(path: list[tuple[Node, int]], node: Node) -> int:
    for n, sid in reversed(path):
        if n is node:
            return sid
    raise FlattenError("a backtrack target is not on the current path")


# --- turn text (docs/methods/exploratory-learning.md#turn-text) ---------------------------------------------------------------------------
def _rationale(text: str) -> str:
    """The judge's "Thoughts:" text (up to its STATUS CODE line) on one line; without that
    label, the text minus its STATUS CODE line."""
    m = re.search(r"Thoughts?:\s*(.*?)(?:\n\s*STATUS CODE:|$)", text, re.DOTALL | re.IGNORECASE)
    if m:
        body = m.group(1)
    else:
        body = "\n".join(ln for ln in text.splitlines()
                         if not ln.strip().upper().startswith("STATUS CODE"))
    return " ".join(body.split())


def _samples(record: dict[str, Any] | None) -> list[tuple[str | None, str]]:
    out = []
    for s in (record or {}).get("samples") or []:
        if isinstance(s, dict):
            out.append((s.get("letter"), str(s.get("text", ""))))
        elif isinstance(s, (list, tuple)) and len(s) == 2:
            out.append((s[0], str(s[1] or "")))
    return out


def pick_rationale(node: Node, scale: str = "unit") -> str:
    """``assessment_pick="closest"``: the rationale whose letter value is nearest the node's
    value, first on ties; "" when the record holds none."""
    letters = SIGNED_LETTERS if scale == "signed" else UNIT_LETTERS
    best, best_gap = "", None
    for letter, text in _samples(node.value_record):
        if letter not in letters or node.value is None:
            continue
        gap = abs(letters[letter] - node.value)
        if best_gap is None or gap < best_gap:
            why = _rationale(text)
            if why:
                best, best_gap = why, gap
    return best


def assessment(obs: Obs, mode: str = "both") -> str | None:
    """The "Assessment:" line for the state ``obs`` (None when it has no evaluation)."""
    node = obs.node
    if node.value is None:
        return None
    v = (node.value + 1) / 2 if obs.scale == "signed" else node.value
    why = pick_rationale(node, obs.scale) if mode in ("both", "text") else ""
    number = f"(progress estimate: {v:.2f})"
    if mode == "text":
        return f"Assessment: {why}" if why else f"Assessment: {number}"
    if mode == "number" or not why:
        return f"Assessment: {number}"
    return f"Assessment: {why} {number}"


@dataclass
class Turn:
    """One assistant turn to replay. ``back`` turns get their target id at replay time."""

    kind: Literal["act", "back"]
    prefix: str | None = None          # the assessment line
    body: str = ""                     # the completion (act) or the backtrack sentence (back)
    edge: Edge | None = None           # act: the edge taken
    target: object | None = None       # back: the state returned to (a tree node or a mark)
    text: str = ""                     # final text (filled for act turns and by teacher_force)
    mark: object | None = None         # act: names the state it reaches, for later backtracks

    def render(self, target_sid: int | None = None) -> str:
        """The turn's text; a ``back`` turn without ``target_sid`` is the bare ``backtrack``."""
        if self.kind == "back":
            to = "backtrack" if target_sid is None else f"backtrack S{target_sid}"
            body = f"{self.body}\n\n{answer(to)}"
        else:
            body = self.body
        return f"{self.prefix}\n\n{body}" if self.prefix else body


def el_turns(items: list[Item], assessment_value: str = "both") -> list[Turn]:
    """One turn per Act/Back item, issued from the state of the preceding Obs (docs/methods/exploratory-learning.md#turn-text)."""
    turns: list[Turn] = []
    current: Obs | None = None
    for item in items:
        if isinstance(item, Obs):
            current = item
            continue
        prefix = assessment(current, assessment_value) if current is not None else None
        if isinstance(item, Act):
            turn = Turn("act", prefix, completion_text(item.edge.raw, item.edge.action),
                        edge=item.edge)
            turn.text = turn.render()
        else:
            turn = Turn("back", prefix, BACKTRACK_TURN, target=item.target)
        turns.append(turn)
    return turns


def il_turns(record: dict[str, Any]) -> list[Turn]:
    """The executed completions, in order, as sampled (docs/methods/exploratory-learning.md#imitation-learning)."""
    turns = []
    for step in record.get("steps") or []:
        turn = Turn("act", None, completion_text(step.get("raw"), step.get("action")))
        turn.text = turn.render()
        turns.append(turn)
    return turns


def hindsight_turns(found: Hindsight, detours: bool) -> tuple[list[Turn], object]:
    """IL turns along a hindsight shortcut, or with ``detours`` EL turns: at each state of the
    shortcut, every detour walked from it and a backtrack out of it, then the shortcut's move
    (docs/methods/exploratory-learning.md#hindsight-paths). Also the mark of the first state,
    the ``root`` of :func:`teacher_force`."""
    def act(action: str, mark: object | None = None) -> Turn:
        return Turn("act", None, answer(action), text=answer(action), mark=mark)

    marks = [object() for _ in range(len(found.path) + 1)]
    turns = []
    for p, action in enumerate(found.path):
        for branch in found.detours.get(p, []) if detours else []:
            turns += [act(a) for a in branch]
            turns.append(Turn("back", None, BACKTRACK_TURN, target=marks[p]))
        turns.append(act(action, marks[p + 1]))
    return turns, marks[0]


def charged_turns(record: dict[str, Any], trees: dict[int, Tree], canonical: Callable[[str], str],
                  assessment_value: str = "both") -> list[Turn]:
    """The EL turns of an episode with charged simulation (docs/methods/exploratory-learning.md#charged-simulation).

    Every query a search simulated was asked for real and is an executed step, so the real
    query sequence, look-ahead queries included, is the trajectory. One turn per executed step,
    in order: a query charged during the search of tree k (the first tree recorded after it:
    a tree is keyed by the step count when its search ended) is matched to the first edge, in
    traversal order, with its ``canonical`` key, and carries the assessment of that edge's parent
    node (the search's estimate of the state it extended); a query the search decided and had
    not paid for carries its tree root's assessment. A step matching no edge is a
    :class:`FlattenError`.
    """
    steps = list(record.get("steps") or [])
    if not steps:
        raise FlattenError("the episode has no executed action")
    ends = sorted(trees)
    first_edge: dict[int, dict[str, Edge]] = {}    # tree key -> canonical key -> first edge
    turns = []
    for t, step in enumerate(steps):
        info = step.get("info") or {}
        search, charged = info.get("search"), info.get("charged_simulation")
        if search is not None:
            k = search.get("tree_step")
            if k not in trees:
                raise FlattenError(f"step {t}: its search tree (step {k}) is missing")
            tree = trees[k]
            node = tree.root
        elif charged:
            k = next((k for k in ends if k > t), None)
            if k is None:
                raise FlattenError(f"step {t}: a charged query after the last search tree")
            tree = trees[k]
            if k not in first_edge:
                first_edge[k] = {}
                for trav in tree.traversals:
                    for i in trav:
                        first_edge[k].setdefault(tree.edge(i).key, tree.edge(i))
            edge = first_edge[k].get(canonical(str(step.get("action"))))
            if edge is None:
                raise FlattenError(f"step {t}: the charged query {step.get('action')!r} is on "
                                   f"no traversal of the tree of step {k}")
            node = edge.parent
        else:
            raise FlattenError(f"step {t}: neither a search's decision nor a charged query")
        scale = str(tree.meta.get("value_scale", "unit"))
        turn = Turn("act", assessment(Obs(node, t, scale=scale), assessment_value),
                    completion_text(step.get("raw"), step.get("action")))
        turn.text = turn.render()
        turns.append(turn)
    return turns


# --- teacher forcing (docs/methods/exploratory-learning.md#teacher-forcing) ---------------------------------------------------------------------
class ReplayError(FlattenError):
    """The turns cannot be replayed in the env (the env ended early, a bad backtrack, ...)."""


@dataclass
class Chat:
    """A replayed chat: messages (system, user, assistant, ...) and per-assistant-turn facts."""

    messages: list[dict[str, Any]]
    valid: list[bool] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    state_ids: list[int] = field(default_factory=list)   # state each turn is issued from
    undone: list[bool] = field(default_factory=list)     # a later backtrack undid the move
    mismatches: int = 0
    first_mismatch: str | None = None
    skipped: int = 0                      # no-op backtracks left out
    truncated: bool = False               # ended early at a finished (successful) state
    cut_at_budget: bool = False           # ended where the env's step budget ran out


def teacher_force(env: Env, task: Task, turns: list[Turn], fmt: str = "el", *,
                  root: object | None = None, strict: bool = False,
                  min_grade: float | None = None, open_end: bool = False,
                  trail: bool = False, over_budget: str = "skip",
                  back_one: str = "id") -> Chat:
    """Replay ``turns`` in ``env`` as the runner would run the distilled agent (docs/methods/exploratory-learning.md#teacher-forcing, docs/methods/exploratory-learning.md#distilled-agent).

    Each assistant text goes through :func:`clew.agents.distilled.decide`, exactly as the agent's
    completions do; forward actions are stepped, backtracks restore the snapshot of the target
    state with ``keep_clock=True`` and cost one step. The chat ends with the last assistant turn.
    ``root`` is the tree node of the initial state (state S0), the target of backtracks to it;
    a turn's ``mark`` names the state it reaches like its edge's child does.

    Decisions: a backtrack to the state the replay is already in (the branch below it held only
    invalid actions, which create no state) is a no-op and is left out (``chat.skipped``). If
    the env ends the episode before the last turn (the search walked into a finished state and
    went on searching) the chat ends there when the grade reached is at least ``min_grade`` (a
    successful, shorter trajectory; ``chat.truncated``); otherwise it is a :class:`ReplayError`,
    unless ``over_budget`` is ``cut``: then the chat ends there too (``chat.cut_at_budget``), so
    its turns are the decisions the agent could take within its budget.
    ``back_one`` ``bare`` writes a backtrack to the state just before as the bare ``backtrack``
    (the agent reads it so): a one-turn prompt shows the current state's id, not that one's.
    ``open_end`` ends the chat with the user turn that follows the last turn instead: the prompt
    of the next decision (preference pairs, :mod:`clew.training.preferences`). ``trail`` ends
    every user turn with the :class:`~clew.agents.distilled.Trail` line, updated as the agent
    updates it.
    """
    first = env.reset(task)
    track = Trail() if trail else None
    chat = Chat([{"role": "system", "content": system_prompt(env, fmt)},
                 {"role": "user", "content": with_trail(first_user(env, 0, first.text), track)}])
    path = [0]
    snaps = {0: env.snapshot()} if env.flags.supports_backtrack else {}
    sid_of: dict[int, int] = {} if root is None else {id(root): 0}  # id(node) -> state id
    made_by: dict[int, int] = {}          # state id -> the assistant turn whose move made it
    next_id = 1
    pending: str | None = None           # the user turn after the last replayed action
    for i, turn in enumerate(turns):
        if turn.kind == "back":
            k = sid_of.get(id(turn.target))
            if k is None:
                raise ReplayError(f"turn {i}: the backtrack target was never reached")
            if k == path[-1]:
                chat.skipped += 1
                continue
            bare = back_one == "bare" and len(path) > 1 and k == path[-2]
            turn.text = turn.render(None if bare else k)
        if pending is not None:
            chat.messages.append({"role": "user", "content": pending})
        chat.state_ids.append(path[-1])
        chat.messages.append({"role": "assistant", "content": turn.text})
        chat.kinds.append(turn.kind)
        chat.undone.append(False)
        if track is not None:
            track.assess(path[-1], turn.text)
        decision = decide(turn.text, path)
        if "backtrack" in decision.info:
            k = decision.info["backtrack"]
            if not env.flags.supports_backtrack or k is None or k not in path[:-1]:
                raise ReplayError(f"turn {i}: cannot backtrack to S{k} from path "
                                  f"{[f'S{s}' for s in path]}")
            env.restore(snaps[k], keep_clock=True)
            env.set_clock(env.clock() + 1)
            for sid in path[path.index(k) + 1:]:
                chat.undone[made_by[sid]] = True
            del path[path.index(k) + 1:]
            chat.valid.append(True)
            if track is not None:
                track.back(k)
            pending = with_trail(returned_user(env, k, env.observation().text), track)
            continue
        ok = env.parse_action(decision.action) is not None
        step = env.step(decision.action)
        chat.valid.append(ok and step.valid)
        if step.valid:
            sid, next_id = next_id, next_id + 1
            path.append(sid)
            made_by[sid] = len(chat.kinds) - 1
            if env.flags.supports_backtrack:
                snaps[sid] = env.snapshot()
            if track is not None:
                track.forward(sid, env.canonical(decision.action))
            pending = with_trail(forward_user(env, sid, step.obs.text,
                                              env.canonical(decision.action)), track)
        else:
            pending = with_trail(invalid_user(env, path[-1], step.obs.text, decision.action),
                                 track)
        if turn.mark is not None:
            sid_of[id(turn.mark)] = path[-1]
        if turn.edge is not None and turn.edge.child is not None:
            sid_of[id(turn.edge.child)] = path[-1]
            expected = turn.edge.child.obs
            if expected is not None and not _ends(turn.edge) and expected != step.obs.text:
                chat.mismatches += 1
                if chat.first_mismatch is None:
                    chat.first_mismatch = (f"turn {i}: replayed {step.obs.text!r}, "
                                           f"logged {expected!r}")
                if strict:
                    raise ReplayError(f"replay differs from the log: {chat.first_mismatch}")
        if env.done and i < len(turns) - 1:
            grade = float(env.grade())
            if min_grade is not None and grade >= min_grade:
                chat.truncated = True
                break
            if over_budget == "cut":
                chat.cut_at_budget = True
                break
            raise ReplayError(f"the env ended the episode after turn {i} of {len(turns)} with "
                              f"grade {grade:g}: the trajectory, backtracks included, is longer "
                              f"than the env's own step budget")
    if open_end and pending is not None:
        chat.messages.append({"role": "user", "content": pending})
    return chat


# --- samples (docs/methods/exploratory-learning.md#samples-and-loss-weights) -----------------------------------------------------------------------------
def mentions_reflections(text: str) -> bool:
    return "reflection" in text.lower()


@dataclass
class Sample:
    messages: list[dict[str, Any]]
    turn_index: int
    n_backtracks: int


def make_samples(chat: Chat, mode: str = "prefix_last", window: ChatWindow | None = None,
                 drop_reflection_mentions: bool = True,
                 drop_undone: bool = False) -> tuple[list[Sample], dict[str, int]]:
    """Training samples of one chat, and counts of dropped targets (docs/methods/exploratory-learning.md#samples-and-loss-weights).
    ``drop_undone``: the moves a later backtrack undid are context, not targets.

    ``prefix_last``: one sample per valid assistant turn, the prefix ending there, weight 1 on
    that turn only, cut to ``window`` (:class:`~clew.agents.window.ChatWindow`; default 2 + 6
    pairs with the system turn).
    ``full``: one sample, weight 1 on every valid turn, no elision.
    """
    dropped = {"invalid_target": 0, "mentions_reflections": 0}
    if drop_undone:
        dropped["undone"] = 0
    assistant_at = [i for i, m in enumerate(chat.messages) if m["role"] == "assistant"]
    usable = []
    for k, at in enumerate(assistant_at):
        if not chat.valid[k]:
            dropped["invalid_target"] += 1
        elif drop_undone and chat.undone[k]:
            dropped["undone"] += 1
        elif drop_reflection_mentions and mentions_reflections(chat.messages[at]["content"]):
            dropped["mentions_reflections"] += 1
        else:
            usable.append(k)
    samples = []
    window = window or ChatWindow()
    if mode == "full":
        if usable:
            msgs = [dict(m) for m in chat.messages]
            for k, at in enumerate(assistant_at):
                msgs[at]["weight"] = 1 if k in usable else 0
            samples.append(Sample(msgs, len(assistant_at) - 1, chat.kinds.count("back")))
        return samples, dropped
    if mode != "prefix_last":
        raise ValueError(f"sample_mode must be 'prefix_last' or 'full', got {mode!r}")
    for k in usable:
        msgs = [dict(m) for m in chat.messages[:assistant_at[k] + 1]]
        for j, at in enumerate(assistant_at[:k + 1]):
            msgs[at]["weight"] = 1 if j == k else 0
        samples.append(Sample(window.apply(msgs), k,
                              chat.kinds[:k + 1].count("back")))
    return samples, dropped


# --- one episode (docs/methods/exploratory-learning.md#teacher-forcing) -------------------------------------------------------------------------
@dataclass
class ExportOptions:
    """The ``el`` block of docs/methods/exploratory-learning.md that concerns one episode."""

    el_max_actions: int | None = 20
    assessment_value: Literal["both", "text", "number"] = "both"
    sample_mode: Literal["prefix_last", "full"] = "prefix_last"
    window: ChatWindow = field(default_factory=ChatWindow)
    strict_replay: bool = False
    el_traversals: Literal["all", "dead_ends", "detours"] = "all"
    dead_end_margin: float = 0.1
    el_over_budget: Literal["skip", "cut"] = "skip"
    il_path: Literal["executed", "shortcut"] = "executed"
    el_dead_ends: bool = False
    el_back_one: Literal["id", "bare"] = "id"
    el_undone: Literal["train", "skip"] = "train"


@dataclass
class EpisodeExport:
    el: list[Sample] = field(default_factory=list)
    il: list[Sample] = field(default_factory=list)
    el_actions: int | None = None        # assistant turns of the flattened EL trajectory
    el_skipped: str | None = None        # why there is no EL data for this episode
    il_skipped: str | None = None
    counts: dict[str, int] = field(default_factory=dict)


def _add(counts: dict[str, int], more: dict[str, int], prefix: str) -> None:
    for k, v in more.items():
        counts[f"{prefix}_{k}"] = counts.get(f"{prefix}_{k}", 0) + v


def export_episode(record: dict[str, Any], trees: dict[int, Tree], make_env, *,
                   options: ExportOptions | None = None) -> EpisodeExport:
    """EL and IL samples of one (already selected) episode. ``make_env()`` gives a fresh env of
    the episode's family; the task comes from ``record["task"]``."""
    opt = options or ExportOptions()
    task = Task.from_dict(record["task"])
    out = EpisodeExport()
    cut = {"mode": opt.sample_mode, "window": opt.window}
    env = make_env()
    # Charged simulation (docs/methods/mcts.md#free-and-charged-simulation): the search's
    # look-ahead queries were asked for real, so the executed steps are the trajectory
    charged = bool((record.get("outcome") or {}).get("charged_simulation"))
    actions = [str(a) for a in record.get("actions") or []]
    found = None
    if not charged and (opt.il_path == "shortcut" or opt.el_traversals == "detours"):
        found = hindsight(make_env(), task, actions, dead_ends=opt.el_dead_ends)
        out.counts["hindsight_shortcuts"] = int(found is not None)
        out.counts["hindsight_dead_ends"] = found.dead_ends if found else 0
        out.counts["hindsight_saved_actions"] = len(actions) - len(found.path) if found else 0
    if not trees and opt.el_traversals != "detours":   # detours come from the episode itself
        out.el_skipped = "no search trees"
    else:
        try:
            grade = float((record.get("outcome") or {}).get("grade") or 0.0)
            if charged:
                env.reset(task)     # canonical keys need the task (a MaxSat query's length)
                turns = charged_turns(record, trees, env.canonical, opt.assessment_value)
                chat = teacher_force(env, task, turns, "el", strict=opt.strict_replay,
                                     min_grade=grade, trail=opt.window.trail,
                                     over_budget=opt.el_over_budget, back_one=opt.el_back_one)
            elif opt.el_traversals == "detours":
                # without a shortcut the executed path stands in, without detours
                turns, root = hindsight_turns(found or Hindsight(actions), detours=True)
                chat = teacher_force(env, task, turns, "el", root=root, min_grade=grade,
                                     trail=opt.window.trail, over_budget=opt.el_over_budget,
                                     back_one=opt.el_back_one)
            else:
                items = flatten_episode(record, trees, backtrack=env.flags.supports_backtrack,
                                        keep=opt.el_traversals, margin=opt.dead_end_margin)
                chat = teacher_force(env, task, el_turns(items, opt.assessment_value), "el",
                                     root=items[0].node, strict=opt.strict_replay,
                                     min_grade=grade, trail=opt.window.trail,
                                     over_budget=opt.el_over_budget, back_one=opt.el_back_one)
            out.el_actions = len(chat.kinds)    # forward and backtrack turns (docs/methods/exploratory-learning.md#imitation-learning)
            out.counts.update(el_replay_mismatches=chat.mismatches,
                              el_noop_backtracks=chat.skipped,
                              el_truncated_at_done=int(chat.truncated),
                              el_cut_at_budget=int(chat.cut_at_budget))
            if opt.el_max_actions is not None and out.el_actions > opt.el_max_actions:
                out.el_skipped = (f"too long ({out.el_actions} actions > el_max_actions "
                                  f"{opt.el_max_actions})")
            else:
                out.el, dropped = make_samples(chat, **cut,
                                               drop_undone=opt.el_undone == "skip")
                _add(out.counts, dropped, "el")
        except FlattenError as exc:
            out.el_skipped = str(exc)
    try:
        turns = hindsight_turns(found, detours=False)[0] if opt.il_path == "shortcut" and \
            found is not None else il_turns(record)
        chat = teacher_force(make_env(), task, turns, "il", strict=opt.strict_replay,
                             trail=opt.window.trail)
        out.il, dropped = make_samples(chat, **cut)
        _add(out.counts, dropped, "il")
    except FlattenError as exc:
        out.il_skipped = str(exc)
    return out
