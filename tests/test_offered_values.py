"""Every knob value the workbench offers for a backend is one that backend runs (item 3 of
issue 25: the window offered worker warps 1, 2, 16, 32, the cuTile kernel refused them after the
run was written). Each offered value goes through the backend's own check, and for the cuTile
backend also through the kernel's own LaunchConfig; what the backend refuses is refused at
preflight, before anything is stored."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from workbench.config import (
    CLUSTER_CTAS,
    K_UNROLLS,
    TILE_SIZES,
    WORKER_WARPS,
    ConfigError,
    KernelConfig,
    Problem,
    poly_exp2_choices,
)

fmha = pytest.importorskip("kernels.cutile_fmha", reason="cuda-tile is not installed")
from workbench.backends.cutile import launch_knobs  # noqa: E402  (after the skip)


def offered_configs() -> Iterator[KernelConfig]:
    """One knob at a time over every value the CLI's config and the window's form offer, on a
    base the knob needs (the polynomial needs the K-loop split, pairs the persistent grid)."""
    base = KernelConfig(tile_m=64, tile_n=64)
    for tile_m in TILE_SIZES:
        for tile_n in TILE_SIZES:
            yield dataclasses.replace(base, tile_m=tile_m, tile_n=tile_n)
    for warps in WORKER_WARPS:
        yield dataclasses.replace(base, num_worker_warps=warps)
    for occupancy in range(1, 33):
        yield dataclasses.replace(base, occupancy=occupancy)
    for ctas in CLUSTER_CTAS:
        yield dataclasses.replace(base, num_ctas=ctas)
    for tile_n in TILE_SIZES:
        for cols in poly_exp2_choices(tile_n):
            yield KernelConfig(tile_n=tile_n, k_split=True, poly_exp2_cols=cols)
    for unroll in K_UNROLLS:
        yield KernelConfig(persistent=True, k_unroll=unroll)
    yield KernelConfig(persistent=True, mask="causal")


def launch_config_of(config: KernelConfig) -> Any:
    """The kernel's own LaunchConfig for a workbench config (what cutile.prepare launches)."""
    launch = fmha.LaunchConfig.of(launch_knobs(config))
    launch.check_mask(config.mask)
    return launch


def test_the_offered_worker_warps_are_what_the_kernel_takes() -> None:
    assert WORKER_WARPS == fmha.WORKER_WARPS


def test_every_offered_value_the_cutile_backend_accepts_the_kernel_runs() -> None:
    from workbench.backends.cutile import CutileBackend

    backend = CutileBackend()
    problem = Problem(heads=1, head_dim=64, q_len=1024, k_len=1024)
    accepted = refused = 0
    for config in offered_configs():
        try:
            backend.check_supported(problem, config)
        except ConfigError:
            refused += 1  # refused at preflight, before a run is written
            continue
        launch_config_of(config)  # raises ValueError where the kernel would refuse it late
        accepted += 1
    assert accepted > 40 and refused > 0  # the walk covered both sides


def test_the_reference_backend_runs_its_wider_tile_range(
    measure: Callable[..., Any],
) -> None:
    from workbench.backends.reference import ReferenceBackend

    problem = Problem(heads=1, head_dim=32, q_len=40, k_len=40)
    for config in offered_configs():
        ReferenceBackend().check_supported(problem, config)
    for tile in TILE_SIZES:
        point = measure(problem, KernelConfig(tile_m=tile, tile_n=tile))
        assert point.accuracy.passed


def test_a_stored_run_with_a_value_no_longer_offered_still_loads(
    db_path: Path, run_cli: Callable[..., Any]
) -> None:
    """Runs stored before the value set was narrowed (worker warps 16, stored failed) stay
    readable in the history, `runs`, `show` and the CSV."""
    import json

    from workbench.config import SweepSpec
    from workbench.store import Store

    spec = SweepSpec(Problem(heads=1, head_dim=32), (16,), KernelConfig(), backend="cutile")
    with Store(db_path) as store:
        run_id = store.create_run(spec, {"hostname": "h"})
        old = {**KernelConfig().to_dict(), "num_worker_warps": 16}
        store.db.execute("UPDATE runs SET config = ? WHERE id = ?", [json.dumps(old), run_id])
        store.db.conn.commit()
        store.finish_run(run_id, "failed", "ValueError: num_worker_warps must be ...")
    with Store(db_path) as store:
        assert store.run(run_id).config.num_worker_warps == 16
    shown = run_cli("show", str(run_id))
    assert shown.code == 0 and "16 warps" in shown.out
    assert run_cli("runs").code == 0
    assert run_cli("export", "--csv", "-").code == 0
