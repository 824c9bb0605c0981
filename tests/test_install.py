"""Installed as a package, clew works too: a wheel built from the checkout, without a setuptools warning,
installed (not editable) into a clean venv, finds its agent and training presets as package data,
and `clew demo --quick` runs from another directory.

The clean venv gets clew from the wheel only; the third-party packages are the running venv's
(a path line, so no `.pth` of that venv, such as an editable clew, is executed), because
installing torch and friends again would need the network and minutes."""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SKIP = {".git", ".venv", ".venv-vllm", "build", "dist", "runs", "__pycache__", ".pytest_cache",
        ".ruff_cache", "node_modules", "exp"}


def sh(args: list, **kw) -> subprocess.CompletedProcess:
    """Run ``args``; the caller asserts on the exit status (with the output in the message)."""
    return subprocess.run([str(a) for a in args], check=False, capture_output=True, text=True,
                          **kw)


def _copy_source(dest: Path) -> Path:
    """The checkout without venvs, runs or build leftovers (the build writes beside the source)."""
    def ignore(folder, names):
        return [n for n in names if n in SKIP or n.endswith(".egg-info")]

    shutil.copytree(ROOT, dest, ignore=ignore, symlinks=True)
    return dest


def _dependency_paths() -> list[str]:
    """The running interpreter's site-packages folders (where the dependencies live)."""
    paths = [*site.getsitepackages(), sysconfig.get_paths()["purelib"]]
    # folders a .pth added (the worktree venvs reuse the main venv's packages this way)
    paths += [p for p in sys.path if p.endswith("site-packages")]
    return list(dict.fromkeys(p for p in paths if Path(p).is_dir()))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, the wheel's file names) for clew installed from a wheel."""
    tmp = tmp_path_factory.mktemp("install")
    src = _copy_source(tmp / "src")
    dist = tmp / "dist"
    build = sh([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                "--no-index", "-q", "-w", dist, src], cwd=tmp)
    assert build.returncode == 0, build.stderr[-3000:]
    # setuptools says nothing: no deprecated metadata, no data folder taken for a package
    assert not re.search(r"\w+Warning:", build.stderr), build.stderr[-3000:]
    wheel = next(dist.glob("clew-*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = subprocess.run([str(python), "-c", where],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "zz_dependencies.pth").write_text("\n".join(_dependency_paths()) + "\n")
    install = sh([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
                  "--no-index", "-q", wheel], cwd=tmp)
    assert install.returncode == 0, install.stderr[-3000:]
    shutil.rmtree(src)  # nothing may be read from the source tree any more
    import zipfile

    return python, set(zipfile.ZipFile(wheel).namelist())


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HOME=str(tmp),
               TOKENIZERS_PARALLELISM="false")
    return env


@pytest.mark.slow
def test_the_wheel_ships_every_preset_and_template(installed):
    _, names = installed
    for folder in ("agents", "train", "loop"):
        shipped = {Path(n).name for n in names if n.startswith(f"clew/configs/{folder}/")}
        expected = {p.name for p in (ROOT / "configs" / folder).glob("*.yaml")}
        assert expected and shipped == expected, folder
    shipped = {Path(n).name for n in names if n.startswith("clew/reports/templates/")}
    assert shipped == {p.name for p in (ROOT / "reports" / "templates").iterdir()}
    assert not any(n.startswith("clew/configs/") and n.endswith(".py") for n in names)


@pytest.mark.slow
def test_installed_clew_finds_presets_by_name_from_another_directory(installed, tmp_path):
    python, _ = installed
    code = ("import clew.runner.registry as a, clew.runner.config as c, clew.training.config as s\n"
            "print(a.__file__)\n"
            "print(sorted(a.preset_names()))\n"
            "cfg = c.load_config(s.TrainConfig, 'full-tiny', [], presets='train')\n"
            "print(type(cfg).__name__)\n")
    out = sh([python, "-c", code], cwd=tmp_path, env=_env(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    where, names, cfg = out.stdout.splitlines()[:3]
    assert "site-packages" in where and str(python.parents[1]) in where  # the wheel, not ROOT
    assert "rmcts-mad" in names and "mcts-heuristic" in names
    assert cfg == "TrainConfig"
    # --config takes a preset's name, from any directory
    run = sh([python.parent / "clew", "eval", "--config", "mcts-heuristic", "--suite",
              "gridmap-mini:test", "--limit", "1", "--out", "r"], cwd=tmp_path,
             env=_env(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "r" / "episodes.jsonl").read_text().count("\n") == 1


@pytest.mark.slow
def test_installed_clew_runs_the_quick_demo(installed, tmp_path):
    python, _ = installed
    done = sh([python.parent / "clew", "demo", "--quick", "--out", "demo"], cwd=tmp_path,
              env=_env(tmp_path), timeout=1500)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    assert (tmp_path / "demo" / "round-1" / "models" / "el" / "config.json").exists()
    assert "Traceback" not in done.stderr
