"""Toy env and trees for the training tests: the tiny tree of docs/methods/exploratory-learning.md#worked-example

``TreeEnv`` is a world whose state is the string of actions taken; the task names the observation
of every reachable state, so any hand-made search tree can be replayed in it exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from clew.envs.base import Env, EnvFlags, Observation, Step, Task
from clew.search.tree import Tree


@dataclass
class PathState:
    path: str = ""
    steps: int = 0
    done: bool = False


class TreeEnv(Env):
    """Actions are single letters; ``params["obs"]`` maps each reachable path to its text."""

    name = "toy-tree"
    flags = EnvFlags(supports_backtrack=True)

    def reset(self, task: Task) -> Observation:
        self.task = task
        self.obs_map = dict(task.params["obs"])
        self.goal = task.params.get("goal")
        self.state = PathState()
        return self.observation()

    def observation(self) -> Observation:
        return Observation(self.obs_map[self.state.path], {"path": self.state.path})

    def legal_actions(self) -> list[str]:
        return sorted({p[len(self.state.path)] for p in self.obs_map
                       if len(p) == len(self.state.path) + 1 and p.startswith(self.state.path)})

    def parse_action(self, text: str) -> str | None:
        text = text.strip()
        return text if text in self.legal_actions() else None

    def canonical(self, action: str) -> str:
        return f"<canonical {action.strip()}>"

    def is_stop(self, action: str) -> bool:
        return action.strip() == "STOP"

    def step(self, action: str) -> Step:
        s = self.state
        s.steps += 1
        if self.is_stop(action):
            s.done = True
            return Step(self.observation(), 0.0, True, True)
        a = self.parse_action(action)
        if a is None:
            return Step(Observation(f"invalid action {action!r}", {}), 0.0, s.done, False)
        s.path += a
        s.done = s.path == self.goal
        return Step(self.observation(), float(s.done), s.done, True)

    def instructions(self, variant: str = "default") -> str:
        return self.task.params.get("instructions", "<g>")

    def grade(self) -> float:
        return 1.0 if self.state.path == self.goal else 0.0


class NoBacktrackTreeEnv(TreeEnv):
    name = "toy-tree-nobt"
    flags = EnvFlags(supports_backtrack=False, outcome_mode="graded_at_end",
                     simulation_mode="charged")


def raw(action: str) -> str:
    return f"<raw completion that proposed {action}>\nNext action: ```{action}```"


def worked_example() -> tuple[Tree, dict, Task]:
    """docs/methods/exploratory-learning.md#worked-example: b = 2, 4 simulations, values s1 .2, s3 .1, s2 .6, s4 .9; execute B."""
    tree = Tree.with_root("<o0>")
    root = tree.root
    a = tree.new_edge(root, "A", "A", raw=raw("A"), count=12, prior=0.6)
    b = tree.new_edge(root, "B", "B", raw=raw("B"), count=8, prior=0.4)
    s1 = tree.new_node(root, a, obs="<s1>")
    s1.value = 0.2
    s1.value_record = {"samples": [["D", "Thoughts: <judge rationale on s1>\nSTATUS CODE: D"]]}
    c = tree.new_edge(s1, "C", "C", raw=raw("C"), count=14, prior=0.7)
    tree.new_edge(s1, "D", "D", raw=raw("D"), count=6, prior=0.3)
    s3 = tree.new_node(s1, c, obs="<s3>")
    s3.value = 0.1
    # D (0.2) and E (0.0) are equally close to 0.1: the first one wins
    s3.value_record = {"samples": [["D", "Thoughts: <judge rationale on s3>\nSTATUS CODE: D"],
                                   ["E", "Thoughts: <another rationale>\nSTATUS CODE: E"],
                                   [None, "garbage"]]}
    s2 = tree.new_node(root, b, obs="<s2>")
    s2.value = 0.6
    s2.value_record = {"samples": [["C", "Thoughts: <judge rationale on s2>\nSTATUS CODE: C"]]}
    g = tree.new_edge(s2, "G", "G", raw=raw("G"), count=16, prior=0.8)
    tree.new_edge(s2, "H", "H", raw=raw("H"), count=4, prior=0.2)
    s4 = tree.new_node(s2, g, obs="<s4>")
    s4.value = 0.9
    a.n, a.q, c.n, c.q = 2, 0.15, 1, 0.1
    b.n, b.q, g.n, g.q = 2, 0.75, 1, 0.9
    root.ns, s1.ns, s2.ns = 4, 1, 1
    tree.traversals = [[a.edge_id], [a.edge_id, c.edge_id], [b.edge_id], [b.edge_id, g.edge_id]]
    tree.decision_kind, tree.decision_edges = "single", [b.edge_id]
    task = Task("toy-tree", {"obs": {"": "<o0>", "A": "<s1>", "AC": "<s3>", "AD": "<s5>",
                                     "B": "<s2>", "BG": "<s4>", "BH": "<s6>"},
                             "goal": "B"}, id="ex")
    record = {"key": "ex#0", "task": task.to_dict(), "actions": ["B"],
              "steps": [{"t": 0, "action": "B", "valid": True, "reward": 1.0, "done": True,
                         "obs": "<s2>", "raw": raw("B"), "info": {}}],
              "outcome": {"success": True, "grade": 1.0}}
    return tree, record, task


def variant(i: int) -> tuple[Tree, dict, Task]:
    """The worked example with task-specific observation texts (task ``ex-i``)."""
    tree, record, task = worked_example()
    names = {"<o0>": f"room {i} entrance", "<s1>": f"room {i} corridor",
             "<s3>": f"room {i} dead end", "<s2>": f"room {i} hall", "<s4>": f"room {i} key",
             "<s5>": f"room {i} wall", "<s6>": f"room {i} door"}
    for node in tree.nodes:
        node.obs = names.get(node.obs, node.obs)
    obs = {p: names[o] for p, o in task.params["obs"].items()}
    task = Task("toy-tree", {**task.params, "obs": obs,
                             "instructions": f"find the hall of room {i}"}, id=f"ex-{i}")
    record = {**record, "key": f"ex-{i}#0", "task": task.to_dict(),
              "steps": [{**record["steps"][0], "obs": names["<s2>"]}]}
    return tree, record, task


def write_run(path, n_tasks: int = 3, failed: bool = True, without_trees: bool = True):
    """A run directory as the runner writes it: episodes.jsonl and trees/<key>/<t>.json.gz.

    Tasks ex-0..ex-(n-1) succeed with trees; optionally ex-fail fails, ex-notree has no trees."""
    import json
    from pathlib import Path

    from clew.search.tree import save_tree

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n_tasks):
        tree, record, _ = variant(i)
        save_tree(path / "trees" / record["key"] / "0.json.gz", tree)
        lines.append(record)
    if failed:
        tree, record, _ = variant(90)
        record = {**record, "key": "ex-fail#0", "outcome": {"success": False, "grade": 0.0}}
        save_tree(path / "trees" / record["key"] / "0.json.gz", tree)
        lines.append(record)
    if without_trees:
        _, record, _ = variant(91)
        lines.append({**record, "key": "ex-notree#0"})
    (path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


@dataclass
class PlaceState:
    at: str
    steps: int = 0
    done: bool = False


class GraphEnv(Env):
    """Places joined by named moves (``params["moves"]``: place -> action -> place); the episode
    succeeds at ``params["goal"]``. Its state key is the place, so hindsight paths apply."""

    name = "toy-graph"
    flags = EnvFlags(supports_backtrack=True)
    keyed = True

    def reset(self, task: Task) -> Observation:
        self.task = task
        self.moves = task.params["moves"]
        self.state = PlaceState(task.params["start"])
        return self.observation()

    def observation(self) -> Observation:
        return Observation(f"You are at {self.state.at}.", {})

    def legal_actions(self) -> list[str]:
        return sorted(self.moves.get(self.state.at, {}))

    def step(self, action: str) -> Step:
        s = self.state
        s.steps += 1
        to = self.moves.get(s.at, {}).get(action.strip())
        if to is None:
            return Step(Observation(f"invalid action {action!r}", {}), 0.0, s.done, False)
        s.at = to
        s.done = to == self.task.params["goal"]
        return Step(self.observation(), float(s.done), s.done, True)

    def state_key(self):
        return self.state.at if self.keyed else None

    def instructions(self, variant: str = "default") -> str:
        return "Reach the goal."

    def grade(self) -> float:
        return 1.0 if self.state.at == self.task.params["goal"] else 0.0


def graph_task(moves: dict[str, dict[str, str]], start: str = "A", goal: str = "C") -> Task:
    return Task("toy-graph", {"moves": moves, "start": start, "goal": goal})
