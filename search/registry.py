"""Search algorithms by name (``search.algorithm`` in the agent options).

Entries are import paths ``"module:Class"``; the class has a typed ``Config`` (a
:class:`~clew.search.algorithm.SearchConfig` subclass) and is built as ``Class(config)``. Adding
an algorithm is one module and one line here (or one :func:`register_algorithm` call from
outside the package).
"""

from __future__ import annotations

from typing import Any

from clew.envs.registry import load_object
from clew.search.algorithm import SearchAlgorithm, SearchConfig

ALGORITHMS: dict[str, str] = {
    "mcts": "clew.search.mcts:MCTS",
    "bfs": "clew.search.frontier:BFS",
    "dfs": "clew.search.frontier:DFS",
    "best-first": "clew.search.frontier:BestFirst",
    "best-of-n": "clew.search.best_of_n:BestOfN",
    "ab-mcts": "clew.search.ab_mcts:ABMCTS",
}
DEFAULT_ALGORITHM = "mcts"


def register_algorithm(name: str, path: str) -> None:
    """Add an algorithm by import path ``"module:Class"``."""
    ALGORITHMS[name] = path


def algorithm_class(name: str) -> type[SearchAlgorithm]:
    try:
        path = ALGORITHMS[name]
    except KeyError:
        raise KeyError(f"unknown search algorithm {name!r}; known: "
                       f"{', '.join(sorted(ALGORITHMS))}") from None
    return load_object(path)


def search_config(data: dict[str, Any] | SearchConfig | None) -> SearchConfig:
    """The typed config of the algorithm ``data`` names (``algorithm``, default ``mcts``)."""
    if isinstance(data, SearchConfig):
        return data
    data = dict(data or {})
    data.setdefault("algorithm", DEFAULT_ALGORITHM)
    return algorithm_class(data["algorithm"]).Config.model_validate(data)


def make_algorithm(config: dict[str, Any] | SearchConfig | None) -> SearchAlgorithm:
    """The algorithm a config names, built with it."""
    cfg = search_config(config)
    return algorithm_class(cfg.algorithm)(cfg)
