"""Version and commit stamped into every run's config.yaml (docs/architecture.md#data-on-disk)."""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path


def clew_version() -> str:
    try:
        return metadata.version("clew")
    except metadata.PackageNotFoundError:
        return "unknown"


def git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
