"""The folder layout keeps the dependency direction of docs/architecture.md.

What counts as an import of ``clew.PART``: an ``import`` or ``from ... import`` statement anywhere
in a file (module level or inside a function: the AST walk sees both), a relative import that
resolves into PART, and a string that is a whole import path, ``"clew.PART.module"`` or
``"clew.PART.module:attr"`` (the lazy entries of the registries and ``importlib`` calls).
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {
    "envs": set(),
    "records": {"envs"},
    "agents": {"envs", "records"},
    "search": {"agents", "envs", "records"},
    "training": {"search", "agents", "envs", "records"},
    "metrics": {"agents", "envs", "records"},
    "runner": {"metrics", "search", "agents", "envs", "records"},
    "reports": {"runner", "metrics", "search", "agents", "envs", "records"},
    "loop": {"reports", "runner", "metrics", "training", "search", "agents", "envs", "records"},
    "cli": {"loop", "reports", "runner", "metrics", "training", "search", "agents", "envs",
            "records"},
}
#: package data, not code: any layer may name it (presets shipped as ``clew.configs``)
DATA = {"configs"}
IMPORT_PATH = re.compile(r"clew(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?")


def _part(name: str) -> str | None:
    bits = name.split(".")
    return bits[1] if bits[0] == "clew" and len(bits) > 1 else None


def clew_imports(path: Path, package: str | None = None) -> set[str]:
    """The parts of clew that ``path`` imports (see the module docstring); ``package`` is the
    file's dotted package (default: from its place in the repository)."""
    tree = ast.parse(path.read_text())
    package = package.split(".") if package else ["clew", *path.parent.relative_to(ROOT).parts]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                names.append(node.module or "")
            else:  # from ..x import y, resolved against the file's own package
                base = package[: len(package) - node.level + 1]
                names.append(".".join(base + ([node.module] if node.module else [])))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and IMPORT_PATH.fullmatch(node.value)):
            names.append(node.value.partition(":")[0])
    return {p for p in map(_part, names) if p}


def test_imports_follow_the_dependency_direction():
    bad = []
    for part, allowed in ALLOWED.items():
        for file in (ROOT / part).rglob("*.py"):
            for dep in clew_imports(file) - allowed - DATA - {part}:
                bad.append(f"{file.relative_to(ROOT)} imports clew.{dep}")
    assert not bad, "\n".join(bad)


def test_the_check_sees_function_imports_registry_strings_and_relative_imports(tmp_path):
    probe = tmp_path / "probe.py"  # read as a module of clew.envs.gridmap, never imported
    probe.write_text(
        "def f():\n"
        "    from clew.metrics import METRICS\n"
        "TABLE = {'x': 'clew.agents.heuristics.search_roles:HeuristicValue'}\n"
        "from ...search import tree\n"
        "from . import env\n"
        "DOC = 'see clew.training.flatten for the details'\n")
    assert clew_imports(probe, "clew.envs.gridmap") == {"metrics", "agents", "search", "envs"}


def test_the_allowed_directions_have_no_cycle():
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(part: str) -> None:
        assert seen.get(part) != 1, f"cycle through clew.{part}"
        if seen.get(part) == 2:
            return
        seen[part] = 1
        for dep in ALLOWED[part]:
            visit(dep)
        seen[part] = 2

    for part in ALLOWED:
        visit(part)


def test_importing_clew_does_not_import_vllm():
    import subprocess
    import sys

    code = ("import sys, clew.envs, clew.agents, clew.agents.lm, clew.search, clew.runner.episodes,"
            " clew.cli.main; print('vllm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
