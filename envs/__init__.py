"""clew.envs: environments, instance generators and suites (docs/architecture.md#layers).

This package imports nothing else of clew.
"""

from clew.envs.base import Env, EnvFlags, Observation, Step, Task
from clew.envs.family import Suite
from clew.envs.registry import generate, make, make_for, register
from clew.envs.suites import get_suite, resolve

__all__ = [
    "Env",
    "EnvFlags",
    "Observation",
    "Step",
    "Suite",
    "Task",
    "generate",
    "get_suite",
    "make",
    "make_for",
    "register",
    "resolve",
]
