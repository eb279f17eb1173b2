"""Runs of peer backends (torch-cudnn, torch-flash, naive) show only what applies to them: the
mask, and "—" for the project kernel's tiles and knobs (issue 25, item 7)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.store import Store


def stored_run(db: Path, backend: str, measure: Callable[..., Any]) -> int:
    """A run stored as ``backend`` with the form's leftover cuTile knobs in its config."""
    config = KernelConfig(tile_m=64, tile_n=64, mask="causal", autotune=True, occupancy=2)
    problem = Problem(heads=1, head_dim=32)
    with Store(db) as store:
        run_id = store.create_run(
            SweepSpec(problem, (32,), config, backend=backend), {"hostname": "h"}
        )
        store.add_point(run_id, measure(problem.with_seq_len(32), config))
        store.finish_run(run_id, "complete")
    return run_id


@pytest.mark.parametrize("backend", ["torch-cudnn", "torch-flash", "fa4", "naive"])
def test_peer_runs_show_the_mask_and_no_kernel_knobs(
    backend: str, db_path: Path, measure: Callable[..., Any], run_cli: Callable[..., Any]
) -> None:
    run_id = stored_run(db_path, backend, measure)
    listed = run_cli("runs")
    assert listed.code == 0
    row = next(line for line in listed.out.splitlines() if line.startswith(str(run_id)))
    assert "causal · kernel knobs —" in row
    assert "64×64" not in row and "autotune" not in row and "occ" not in row
    shown = run_cli("show", str(run_id))
    assert "config   causal · kernel knobs —" in shown.out and "64×64" not in shown.out
    exported = run_cli("export", "--csv", "-")
    (record,) = csv.DictReader(io.StringIO(exported.out))
    assert record["config_mask"] == "causal"
    assert record["config_tile_m"] == record["config_autotune"] == record["config_occupancy"] == ""


def test_the_project_kernels_runs_keep_their_full_config(
    db_path: Path, measure: Callable[..., Any], run_cli: Callable[..., Any]
) -> None:
    run_id = stored_run(db_path, "reference", measure)
    row = next(line for line in run_cli("runs").out.splitlines() if line.startswith(str(run_id)))
    assert "64×64 causal fast-math k-split remap autotune occ 2" in row
    (record,) = csv.DictReader(io.StringIO(run_cli("export", "--csv", "-").out))
    assert record["config_tile_m"] == "64" and record["config_autotune"] == "True"


def test_every_peer_backend_is_shown_without_the_kernels_knobs() -> None:
    """Only the project kernel (and the reference, which walks its schedule) declare the
    kernel's tiles and knobs; every other backend, a peer added later too, shows the mask."""
    from workbench.backends import BACKEND_NAMES
    from workbench.config import KernelConfig

    config = KernelConfig(tile_m=128, tile_n=64, mask="causal", fast_math=False)
    shown = {name: config.summary_for(name) for name in BACKEND_NAMES}
    assert shown.pop("cutile") == shown.pop("reference") == config.summary()
    assert "128×64" in config.summary()
    assert set(shown.values()) == {"causal · kernel knobs —"}, shown
