"""One BLAS threading policy for the reference backend, in the CLI as in the window, recorded
with each run (issue 39, item 5): the CLI with a thread per core read 8× the window's time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workbench.measure.blas import BLAS_THREAD_VARIABLES
from workbench.store import Store

FAST = ["--batch", "1", "--heads", "1", "--head-dim", "32", "--warmup", "0", "--samples", "1"]


@pytest.mark.parametrize(("asked", "recorded"), [(None, 1), ("2", 2)])
def test_a_cli_reference_sweep_runs_and_records_the_policys_blas_threads(
    script: Callable[..., Any],
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    asked: str | None,
    recorded: int,
) -> None:
    for name in BLAS_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    if asked is not None:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", asked)  # the user's own choice is kept
    done = script(db_path, "sweep", *FAST, "--seq-lens", "16,32")
    assert done.returncode == 0, done.stderr
    with Store(db_path) as store:
        run = store.run(int(done.stdout.strip()))
    assert run.machine["blas_threads"] == recorded
