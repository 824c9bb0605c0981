"""The folder layout keeps DESIGN §1's dependency direction (an arrow means "may import")."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {
    "envs": set(),
    "agents": {"envs"},
    "search": {"agents", "envs"},
    "training": {"search", "agents", "envs"},
    "eval": {"search", "agents", "envs", "training"},
    "scripts": {"eval", "search", "agents", "envs", "training"},
}


def clew_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    parts = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            bits = name.split(".")
            if bits[0] == "clew" and len(bits) > 1:
                parts.add(bits[1])
    return parts


def test_imports_follow_the_dependency_direction():
    bad = []
    for part, allowed in ALLOWED.items():
        for file in (ROOT / part).rglob("*.py"):
            for dep in clew_imports(file) - allowed - {part}:
                bad.append(f"{file.relative_to(ROOT)} imports clew.{dep}")
    assert not bad, "\n".join(bad)


def test_importing_clew_does_not_import_vllm():
    import subprocess
    import sys

    code = ("import sys, clew.envs, clew.agents, clew.agents.lm, clew.search, clew.eval.runner,"
            " clew.scripts.cli; print('vllm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
