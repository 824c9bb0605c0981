"""The one seed function of every role and agent (``docs/methods/rmcts.md``).

A request's seed is derived from the agent's seed and whatever makes the request unique (the
episode key, the step, the tree node, the role, the attempt), so a seeded backend replays an
episode exactly and no two requests share a seed by accident. CRC32 of the joined parts, kept to
31 bits so every backend accepts it; no salt, so it is stable across processes. The baselines'
own generators (:func:`keyed_rng`) take the whole 32 bits, as they always have, so their episodes
stay what they were.
"""

from __future__ import annotations

import random
import zlib
from typing import Any


def key_hash(*parts: Any) -> int:
    """CRC32 of ``parts`` joined by ``:``."""
    return zlib.crc32(":".join(str(p) for p in parts).encode())


def derive_seed(base: int | None, *parts: Any) -> int | None:
    """The seed of one request from ``base`` and its ``parts``; ``None`` stays unseeded."""
    if base is None:
        return None
    return key_hash(base, *parts) & 0x7FFFFFFF


def derive_rng(base: int, *parts: Any) -> random.Random:
    """A random generator seeded like a request (heuristic roles and baselines)."""
    return random.Random(derive_seed(base, *parts))


def keyed_rng(*parts: Any) -> random.Random:
    """A baseline agent's random generator for one episode, seeded by :func:`key_hash` of
    ``parts`` (e.g. the agent's seed, the task's seed and the episode key)."""
    return random.Random(key_hash(*parts))
