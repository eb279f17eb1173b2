"""Every knob value the workbench offers for a backend is one that backend runs (item 3 of
issue 25: the window offered worker warps 1, 2, 16, 32, the cuTile kernel refused them after the
run was written), on every GPU architecture (issue 27, part 3). What the CLI and the window
offer is the registry's :func:`kernels.knobs.offered`; each offered value goes through the
backend's own check, for the cuTile backend also through the kernel's own LaunchConfig, and the
CLI accepts it; each value the registry does not offer there, the CLI refuses before anything
is written."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kernels import knobs
from workbench.config import ConfigError, KernelConfig, Problem

fmha = pytest.importorskip("kernels.cutile_fmha", reason="cuda-tile is not installed")
from workbench.backends.cutile import CutileBackend, launch_knobs  # noqa: E402  (after the skip)
from workbench.cli.parser import build_parser  # noqa: E402
from workbench.cli.problem_flags import spec_from_args  # noqa: E402

ARCHS = [None, "sm_80", "sm_90", "sm_100", "sm_103", "sm_120", "sm_121"]
# The settings a knob's value may need to be set at all: the polynomial the K-loop split (and a
# key tile its column count divides), key blocks in pairs the persistent grid without a mask.
BASES: list[tuple[str, dict[str, Any]]] = [
    (mask, {**extra, "tile_n": tile_n})
    for mask in ("none", "causal", "window")
    for extra in ({}, {"persistent": True})
    for tile_n in (64, 128, 256, 32, 16)
]


def offered_configs(capability: str | None, arch: str | None) -> Iterator[tuple[str, Any, Any]]:
    """(knob, value, config) for every value of every knob the registry offers ``capability``
    on ``arch``, each on the first base that the value runs with; a value that runs with none
    fails the test (it is offered, so it must run somewhere)."""
    for knob in knobs.EXPOSED:
        for value in knobs.offered(knob.name, capability=capability, arch=arch):
            for mask, base in BASES:
                values = {**base, knob.name: value}
                if not knobs.violations(values, mask, capability=capability, arch=arch):
                    window = 64 if mask == "window" else None
                    yield knob.name, value, KernelConfig(mask=mask, window=window, **values)
                    break
            else:
                pytest.fail(f"{knob.name}={value!r} is offered on {arch} but runs on no base")


def test_the_registry_has_the_kernels_values_and_defaults() -> None:
    """The kernel's own sets and LaunchConfig's defaults are the registry's (one default per
    knob: fast math, the K-loop split and remap on in the kernel and the workbench alike)."""
    assert knobs.KNOBS["num_worker_warps"].values[1:] == fmha.WORKER_WARPS
    assert knobs.KNOBS["tile_m"].values_for(knobs.CUTILE) == fmha.TILE_SIZES
    launch = fmha.LaunchConfig()
    assert {name: getattr(launch, name) for name in fmha.LAUNCH_KNOBS} == knobs.LAUNCH
    assert {k: v for k, v in KernelConfig().to_dict().items() if k in knobs.LAUNCH} == (
        knobs.LAUNCH
    )


@pytest.mark.parametrize("arch", ARCHS)
def test_every_value_offered_for_cutile_passes_its_check_and_the_kernels(arch: str | None) -> None:
    backend = CutileBackend()
    problem = Problem(heads=1, head_dim=64, q_len=1024, k_len=1024)
    seen = 0
    for name, value, config in offered_configs(knobs.CUTILE, arch):
        backend.check_supported(problem, config)  # raises ConfigError where it refuses
        launch = fmha.LaunchConfig.of(launch_knobs(config))  # raises where the kernel refuses
        launch.check_mask(config.mask)
        assert getattr(config, name) == value
        seen += 1
    offered = [knobs.offered(k.name, capability=knobs.CUTILE, arch=arch) for k in knobs.EXPOSED]
    assert seen == sum(map(len, offered)) > 40  # every value of every knob


def _cli_spec(argv: list[str]) -> Any:
    parser = build_parser()
    args = parser.parse_args(["sweep", "--seq-lens", "64", "--head-dim", "64", *argv])
    return spec_from_args(args, "cutile")


def _flags(config: KernelConfig) -> list[str]:
    """The sweep flags that give ``config``."""
    argv = ["--mask", config.mask] + (["--window", str(config.window)] if config.window else [])
    for knob in knobs.EXPOSED:
        value = getattr(config, knob.name)
        if knob.kind is bool:
            argv.append(knob.flag if value else "--no-" + knob.flag[2:])
        elif value is not None or knob.default is not None:  # "auto" unless it is the default
            argv += [knob.flag, knob.names[None] if value is None else str(value)]
    return argv


@pytest.mark.parametrize("arch", ["sm_90", "sm_120"])
def test_the_cli_takes_what_is_offered_and_refuses_the_rest(arch: str) -> None:
    for _, _, config in offered_configs(knobs.CUTILE, arch):
        spec = _cli_spec(["--backend", "cutile", "--arch", arch, *_flags(config)])
        assert spec.config == config
    refused = 0
    for knob in knobs.EXPOSED:
        offered = knobs.offered(knob.name, capability=knobs.CUTILE, arch=arch)
        for value in knob.values:
            if value in offered:
                continue
            argv = ["--backend", "cutile", "--arch", arch, knob.flag, str(value)]
            with pytest.raises(ConfigError) as error:
                _cli_spec(argv)
            assert error.value.field == knob.name
            expected = knobs.refusal(knob.name, value, {}, capability=knobs.CUTILE, arch=arch)
            assert expected is not None and error.value.allowed == expected.reason
            refused += 1
    assert refused >= (4 if arch == "sm_90" else 36)  # tiles 16, 32; on sm_120 256, occ 2-32


def test_the_local_gpu_is_the_cli_default_and_any_offers_everything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import workbench.jobs.ladder_steps

    monkeypatch.setattr(workbench.jobs.ladder_steps, "local_gpu_arch", lambda: "sm_120")
    with pytest.raises(ConfigError, match="not on sm_120"):
        _cli_spec(["--backend", "cutile", "--tile-m", "256"])
    assert _cli_spec(["--backend", "cutile", "--tile-m", "256", "--arch", "any"]).config.tile_m
    # The reference runs on the CPU: no architecture narrows it.
    assert _cli_spec(["--backend", "reference", "--tile-m", "256"]).config.tile_m == 256


def test_the_reference_backend_runs_its_wider_tile_range(
    measure: Callable[..., Any],
) -> None:
    from workbench.backends.reference import ReferenceBackend

    problem = Problem(heads=1, head_dim=32, q_len=40, k_len=40)
    for _, _, config in offered_configs(None, None):
        ReferenceBackend().check_supported(problem, config)
    for tile in knobs.offered("tile_m"):
        point = measure(problem, KernelConfig(tile_m=tile, tile_n=tile))
        assert point.accuracy.passed


def test_the_registry_refuses_what_the_kernels_launch_config_refuses() -> None:
    """LaunchConfig (and its mask check) and the registry agree on every combination of a
    grid of launch values, refused or not: the kernel checks through the registry, not by
    rules of its own."""
    import itertools

    grid = {
        "tile_n": (32, 64, 128),
        "poly_exp2_cols": (0, 8, 64),
        "persistent": (False, True),
        "k_unroll": (1, 2),
        "num_ctas": (None, 2),
        "pipeline": (False, True),
        "occupancy": (None, 33),
    }
    for combo in itertools.product(*grid.values()):
        values = dict(zip(grid, combo))
        for mask in ("none", "causal", "window"):
            try:
                fmha.LaunchConfig.of(values).check_mask(mask)
                kernel_refuses = False
            except ValueError:
                kernel_refuses = True
            assert bool(knobs.launch_violations(values, mask)) == kernel_refuses, (values, mask)


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


@pytest.mark.parametrize(("major", "minor"), [(9, 0), (10, 0), (12, 0), (12, 1)])
def test_the_architecture_offered_for_is_the_cutile_probes(
    monkeypatch: pytest.MonkeyPatch, major: int, minor: int
) -> None:
    """The window reads the architecture from the cuTile backend's probe line (what
    `backends` prints); CuPy and the GPU are stood in for (this runs on a CPU)."""
    import sys
    import types

    import workbench.backends.cutile as cutile
    import workbench.backends.gpu as gpu
    from workbench.backends import gpu_arch
    from workbench.backends.base import Availability

    runtime = types.SimpleNamespace(getDeviceProperties=lambda i: {"major": major, "minor": minor})
    cuda = types.SimpleNamespace(runtime=runtime)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    name = f"NVIDIA GPU (sm_{major}{minor})"
    monkeypatch.setattr(cutile, "cupy_device", lambda: Availability(True, name))
    monkeypatch.setattr(cutile, "cuda_home_problem", lambda: None)
    monkeypatch.setattr(gpu, "tileiras_version", lambda: "tileiras 13.4.92")
    statuses = {"reference": Availability(True, "cpu"), "cutile": CutileBackend().availability()}
    assert gpu_arch(statuses) == f"sm_{major}{minor}"
    assert gpu_arch({"cutile": Availability(False, "no NVIDIA GPU found")}) is None
    assert gpu_arch({"reference": Availability(True, "cpu")}) is None
