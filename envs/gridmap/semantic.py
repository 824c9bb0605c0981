"""The semantic (pasta-cooking) variant, maps custom-201…204, and their symbolic twins (docs/methods/envs.md#grid-map-with-task-dag).

The paper does not publish these maps, so they are reconstructed here: four hand-drawn
10×9 grids with 60–90 passable cells and the four cooking DAGs of docs/methods/envs.md#grid-map-with-task-dag (203 has an OR node).
Each map exists twice with identical geometry, DAG and start: ``semantic`` uses the cooking
names, ``symbolic`` one fixed set of random 4-character tokens per map (the generator's naming rule, drawn from a
stream seeded by the map id). Semantically related items are placed far apart in 201 (sauce vs
cheese), 203 (the two cheeses; pasta vs sauce) and 204 (garlic vs olive oil), to probe the
co-location prior the paper warns about.

Decision: 204's DAG as docs/methods/envs.md#grid-map-with-task-dag lists it has 9 nodes (one more than docs/methods/envs.md#grid-map-with-task-dag's "5–8"); we keep the listed
DAG. In the maps, '#' is a wall, 'S' the start, '.' open, and a letter a task node.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from clew.envs.base import Task
from clew.envs.gridmap.generator import sample_names
from clew.envs.gridmap.instance import Instance, build_instance, parse_ascii

VARIANTS = ("semantic", "symbolic")


@dataclass(frozen=True)
class CookingMap:
    map_id: int
    rows: tuple[str, ...]
    names: dict[str, str]  # map letter -> cooking name
    dag: dict[str, list[list[str]]]  # cooking name -> DNF prerequisites
    goal: str


MAPS: dict[int, CookingMap] = {
    201: CookingMap(
        201,
        ("S...#....c",
         ".#..#.##..",
         ".#..#..#..",
         ".#.##.##.#",
         "...#p.....",
         "#..#..##..",
         "t..#....#.",
         ".#.####.#m",
         ".#......#G"),
        {"p": "Pasta", "t": "Tomato Sauce", "m": "Tomato Pasta", "c": "Cheese",
         "G": "Tomato Pasta with Cheese"},
        {"Pasta": [], "Tomato Sauce": [], "Cheese": [],
         "Tomato Pasta": [["Pasta", "Tomato Sauce"]],
         "Tomato Pasta with Cheese": [["Tomato Pasta", "Cheese"]]},
        "Tomato Pasta with Cheese",
    ),
    202: CookingMap(
        202,
        ("p.....#..w",
         ".##.#.#.##",
         "...b#...#.",
         "#...#.#...",
         "..#...#.#s",
         ".##.#S#.#.",
         "a.#.#...#.",
         ".##.#.#.#.",
         "..c...t..G"),
        {"p": "Pot", "w": "Water", "b": "Boiling Water", "a": "Pasta", "c": "Cooked Pasta",
         "t": "Tomato", "s": "Tomato Sauce", "G": "Tomato Pasta"},
        {"Pot": [], "Water": [], "Pasta": [], "Tomato": [],
         "Boiling Water": [["Pot", "Water"]],
         "Cooked Pasta": [["Boiling Water", "Pasta"]],
         "Tomato Sauce": [["Tomato"]],
         "Tomato Pasta": [["Cooked Pasta", "Tomato Sauce"]]},
        "Tomato Pasta",
    ),
    203: CookingMap(
        203,
        ("r....#...a",
         ".#.#.#.#..",
         "...#...#.#",
         "##.#####.#",
         "..g..S...t",
         ".#.###.#..",
         "...#...#..",
         ".#.#.#.#.#",
         "s#...#..Gz"),
        {"r": "Parmesan", "z": "Mozzarella", "g": "Grated Cheese", "a": "Pasta",
         "s": "Tomato Sauce", "t": "Tomato Pasta", "G": "Cheesy Tomato Pasta"},
        {"Parmesan": [], "Mozzarella": [], "Pasta": [], "Tomato Sauce": [],
         "Grated Cheese": [["Parmesan"], ["Mozzarella"]],
         "Tomato Pasta": [["Pasta", "Tomato Sauce"]],
         "Cheesy Tomato Pasta": [["Tomato Pasta", "Grated Cheese"]]},
        "Cheesy Tomato Pasta",
    ),
    204: CookingMap(
        204,
        ("g..#...b.a",
         ".#.#.#.#..",
         ".#...#...#",
         ".#.##.#..#",
         "...l..S..c",
         "#.##.###.#",
         "t.#...#...",
         "..#.#.#.#.",
         "...s#G..#o"),
        {"g": "Garlic", "o": "Olive Oil", "l": "Garlic Oil", "t": "Tomato",
         "s": "Tomato Sauce", "a": "Pasta", "b": "Boiling Water", "c": "Cooked Pasta",
         "G": "Tomato Pasta"},
        {"Garlic": [], "Olive Oil": [], "Tomato": [], "Pasta": [], "Boiling Water": [],
         "Garlic Oil": [["Garlic", "Olive Oil"]],
         "Tomato Sauce": [["Garlic Oil", "Tomato"]],
         "Cooked Pasta": [["Pasta", "Boiling Water"]],
         "Tomato Pasta": [["Cooked Pasta", "Tomato Sauce"]]},
        "Tomato Pasta",
    ),
}


def symbolic_names(map_id: int) -> dict[str, str]:
    """The fixed cooking-name -> token mapping of one map."""
    cmap = MAPS[map_id]
    tokens = sample_names(random.Random(f"clew/gridmap/semantic/{map_id}"), len(cmap.dag))
    return dict(zip(cmap.dag, tokens))


def cooking_instance(map_id: int, variant: str = "semantic") -> Instance:
    """Map ``map_id`` (201–204) with cooking names or with its symbolic twin's tokens."""
    if map_id not in MAPS:
        raise ValueError(f"gridmap semantic: no map {map_id}; maps: {', '.join(map(str, MAPS))}")
    if variant not in VARIANTS:
        raise ValueError(f"gridmap semantic: variant {variant!r} is not one of "
                         f"{', '.join(VARIANTS)}")
    cmap = MAPS[map_id]
    width, height, cells, marks = parse_ascii(list(cmap.rows))
    rename = symbolic_names(map_id) if variant == "symbolic" else {u: u for u in cmap.dag}
    loc = {rename[name]: marks[letter] for letter, name in cmap.names.items()}
    dag = {rename[u]: [[rename[p] for p in o] for o in opts] for u, opts in cmap.dag.items()}
    return build_instance(width, height, cells, marks["S"], dag, loc, rename[cmap.goal],
                          presets={"map_id": map_id, "variant": variant, "source": "custom"})


def cooking_task(map_id: int, variant: str = "semantic", seed: int = 0,
                 split: str = "test") -> Task:
    """A task of the semantic experiment; ``seed`` does not change the map (docs/methods/envs.md#grid-map-with-task-dag)."""
    inst = cooking_instance(map_id, variant)
    return Task(env="gridmap", params=inst.to_params(), seed=seed,
                id=f"gridmap-custom{map_id}-{variant}-s{seed}", split=split)
