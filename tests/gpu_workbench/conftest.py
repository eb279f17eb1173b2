"""GPU tests of the workbench's backends and engine: skipped without CuPy and a CUDA device.

They import no Qt, so they run on a headless GPU host (scripts/gpu_workbench.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest


def _skip_reason() -> str | None:
    from workbench.backends.gpu import cupy_device

    status = cupy_device()
    return None if status.available else status.reason


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    reason = None
    for item in items:
        if here in Path(str(item.fspath)).parents:
            reason = reason or _skip_reason() or ""
            item.add_marker(pytest.mark.gpu)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
