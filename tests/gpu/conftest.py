"""GPU tests: skipped cleanly unless torch sees a CUDA device and cuda.tile imports.

Nothing here imports Qt or the workbench GUI, so these run on a headless GPU host.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `pytest` (not `python -m pytest`) from anywhere


def _gpu_skip_reason() -> str | None:
    try:
        import cuda.tile  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install
        return f"cuda.tile is not importable: {exc}"
    try:
        import torch
    except ImportError:
        return "torch is not installed (the GPU tests use it for inputs and references)"
    try:
        if not torch.cuda.is_available():
            return "torch sees no CUDA device"
        if torch.cuda.get_device_capability(0) < (8, 0):
            return "cuTile needs sm_80 or newer"
    except Exception as exc:
        return f"CUDA is not usable: {exc}"
    return None


_REASON = _gpu_skip_reason()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.gpu)
            if _REASON is not None:
                item.add_marker(pytest.mark.skip(reason=_REASON))


@pytest.fixture
def seed(rng) -> int:
    """A fresh seed for torch's generator from the session's printed one (tests/conftest.py)."""
    return int(rng.integers(2**31))


@pytest.fixture
def script() -> Callable[..., subprocess.CompletedProcess[str]]:
    """The root conftest's ``script`` (the CLI in a real subprocess), as ``python -m workbench``
    from the repository where the console script is not installed: the GPU host runs a copy of
    the tree with the project on its path, not an installed package."""
    from tests.conftest import subprocess_env  # after ROOT is on the path

    found = shutil.which("fmha-workbench")
    command = [found] if found else [sys.executable, "-m", "workbench"]
    root = Path(__file__).resolve().parents[2]

    def run(db: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*command, *map(str, argv)],
            capture_output=True,
            text=True,
            env=subprocess_env(db),
            cwd=root,
            timeout=timeout,
            check=False,
        )

    return run
