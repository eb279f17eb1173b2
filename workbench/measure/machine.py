"""Where a run happened: host, software versions and the project's git commit."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def git_commit() -> str | None:
    """``$FMHA_WORKBENCH_COMMIT`` when set (a copied tree, such as a GPU host's, whose .git may
    be an older one), else the commit of the checkout this package runs from, else None (an
    installed wheel)."""
    named = os.environ.get("FMHA_WORKBENCH_COMMIT")
    if named:
        return named
    root = Path(__file__).resolve().parents[2]  # the checkout: workbench/measure/ is two down
    if not (root / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    if not commit:
        return None
    dirty = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        timeout=5,
        check=False,
    ).stdout.strip()
    return commit + ("-dirty" if dirty else "")


def host_info() -> dict[str, Any]:
    import numpy

    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "fmha_workbench": package_version("fmha-workbench") or "source",
        "git_commit": git_commit(),
    }


def cuda_home_problem() -> str | None:
    """The CUDA_HOME trap: tileiras 13.4 run with CUDA_HOME at an older toolkit fails every
    compile with return code 5. Returns what to do, or None when CUDA_HOME is harmless."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if not home:
        return None
    version_file = os.path.join(home, "version.json")
    version = ""
    try:
        import json

        with open(version_file, encoding="utf-8") as handle:
            version = json.load(handle).get("cuda", {}).get("version", "")
    except (OSError, ValueError):
        pass
    if version and tuple(int(p) for p in version.split(".")[:2]) >= (13, 4):
        return None
    shown = f" (CUDA {version})" if version else ""
    return (
        f"CUDA_HOME={home}{shown} makes tileiras 13.4 fail with return code 5; "
        "unset CUDA_HOME and CUDA_PATH (the workbench's GPU engine does this for its own process)"
    )
