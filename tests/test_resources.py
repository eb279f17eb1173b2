"""Compiled resources of a config: the cached service, what a cuTile point stores, the CLI.

The service's logic (cache, key, errors, CTAs per SM) is tested with a stand-in compiler that
returns what cuobjdump would read; one real offline compile for sm_90 drives the CLI (skipped
outside CI without cuda.tile, tileiras or cuobjdump, as tests/test_arch_tables_offline.py).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kernels.cubin_resources import ARCH_LIMITS, Resources
from workbench.analysis.resources import (
    CompiledResources,
    ResourceService,
    arch_of_machine,
    ctas_per_sm,
    missing_tools,
)
from workbench.backends.reference import ReferenceBackend
from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.jobs.sweep import run_sweep
from workbench.store import Store

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
VERSIONS = {"cuda_tile": "1.7.0", "tileiras": "13.4.92", "kernel": "abc"}


class CountingCompiler:
    """Stands in for tileiras + cuobjdump: 168 registers for 128-row tiles, 255 and a 5.5 KB
    stack for 256-row ones (what sm_90 makes of them), a compile error for tile_n 16."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, arch: str, args: dict[str, Any]) -> Resources:
        self.calls.append((arch, args))
        if args["tile_n"] == 16:
            raise RuntimeError("tileiras failed:\n  error: tile too small\n  (line 3)")
        if args["tile_m"] == 256:
            return Resources(registers=255, stack=5632, local=0, shared=165_000, threads=128)
        return Resources(registers=168, stack=0, local=0, shared=165_000, threads=384)


@pytest.fixture
def compiler() -> CountingCompiler:
    return CountingCompiler()


@pytest.fixture
def service(tmp_path: Path, compiler: CountingCompiler) -> ResourceService:
    return ResourceService(tmp_path / "cache", compiler=compiler, versions=VERSIONS)


PROBLEM = Problem(batch=4, heads=32, head_dim=128, q_len=4096, k_len=4096)


def test_a_config_compiles_once_then_comes_from_the_disk_cache(
    service: ResourceService, compiler: CountingCompiler, tmp_path: Path
) -> None:
    config = KernelConfig(mask="causal", tile_m=128, tile_n=128, num_worker_warps=8)
    first = service.for_config(PROBLEM, config, "sm_90")
    assert first is not None and first.registers == 168 and not first.spills
    assert first.ctas_per_sm == 1  # 168 -> 168 regs x 384 threads; 161 KB of 228 KB shared
    # Another length of the same class, and a fresh service on the same folder: no compile.
    again = ResourceService(tmp_path / "cache", compiler=compiler, versions=VERSIONS)
    other_n = Problem(batch=4, heads=32, head_dim=128, q_len=8192, k_len=8192)
    assert again.for_config(other_n, config, "sm_90") == first
    assert len(compiler.calls) == 1
    # Another architecture, another mask, new tool versions: each compiles anew.
    service.for_config(PROBLEM, config, "sm_100")
    service.for_config(PROBLEM, KernelConfig(mask="none", tile_m=128, tile_n=128), "sm_90")
    ResourceService(
        tmp_path / "cache", compiler=compiler, versions={**VERSIONS, "tileiras": "13.5"}
    ).for_config(PROBLEM, config, "sm_90")
    assert [arch for arch, _ in compiler.calls] == ["sm_90", "sm_100", "sm_90", "sm_90"]
    # The compile saw one KV head and its GQA group, the problem's dtype, head dim and mask.
    _, args = compiler.calls[0]
    assert (args["batch"], args["kv_heads"], args["head_dim"], args["mask"]) == (
        1, 1, 128, "causal",
    )  # fmt: skip


def test_a_spilling_config_is_marked_and_a_compile_error_is_text_not_an_exception(
    service: ResourceService,
) -> None:
    spilling = service.for_config(PROBLEM, KernelConfig(tile_m=256, tile_n=128), "sm_90")
    assert spilling is not None and spilling.spills
    assert "SPILLS 5632 B/thread" in spilling.summary()
    assert spilling.short() == "255r spill 5.5KB"
    broken = service.for_config(PROBLEM, KernelConfig(tile_m=64, tile_n=16), "sm_90")
    assert broken is not None and broken.registers is None
    assert broken.error == "tileiras failed: error: tile too small (line 3)"  # one line
    assert "does not compile" in broken.summary()
    # An autotuned config has no one kernel: nothing compiled, nothing claimed.
    assert service.for_config(PROBLEM, KernelConfig(autotune=True), "sm_90") is None


def test_ctas_per_sm_is_the_least_of_registers_shared_memory_and_threads() -> None:
    hopper, consumer = ARCH_LIMITS["sm_90"], ARCH_LIMITS["sm_120"]
    small = Resources(registers=100, stack=0, local=0, shared=40_000, threads=128)
    # registers: 104 x 128 = 13,312 of 65,536 -> 4; shared: 41,024 of 233,472 -> 5; threads 16
    assert ctas_per_sm(small, hopper) == 4
    # sm_120's 100 KB of shared memory holds two such CTAs
    assert ctas_per_sm(small, consumer) == 2
    too_big = Resources(registers=255, stack=0, local=0, shared=120_000, threads=384)
    assert ctas_per_sm(too_big, consumer) == 0
    assert arch_of_machine({"compute_capability": "12.0"}) == "sm_120"
    assert arch_of_machine({}) is None


class FakeCutile(ReferenceBackend):
    """The reference kernel under cuTile's name on an 'H200': what the sweep stores for a
    compiled backend, without a GPU."""

    name = "cutile"

    def machine_info(self) -> dict[str, Any]:
        return {"gpu_name": "NVIDIA H200", "compute_capability": "9.0"}


def test_a_cutile_run_stores_each_points_resources_and_the_csv_shows_them(
    service: ResourceService,
    db_path: Path,
    run_cli: Any,
    rng: np.random.Generator,
    fast_args: list[str],
) -> None:
    from tests.conftest import fast_timing

    spec = SweepSpec(
        Problem(batch=1, heads=1, head_dim=64, q_len=1, k_len=1),
        (128, 256),
        KernelConfig(mask="causal", tile_m=64, tile_n=64),
        backend="cutile",
        seed=int(rng.integers(1 << 30)),
    )
    with Store(db_path) as store:
        events = list(
            run_sweep(spec, store, backend=FakeCutile(), timing=fast_timing(), resources=service)
        )
        run_id = events[0].run_id
        points = store.points(run_id)
    assert [p.extra["resources"]["registers"] for p in points] == [168, 168]
    result = run_cli("export", "--csv", "-", "--db", db_path)
    assert result.code == 0, result.err
    rows = list(csv.DictReader(io.StringIO(result.out)))
    shown = [(r["compiled_arch"], r["compiled_registers"], r["compiled_spill_bytes"]) for r in rows]
    assert shown == [("sm_90", "168", "0"), ("sm_90", "168", "0")]
    shown = run_cli("show", run_id, "--db", db_path).out.splitlines()
    assert "compiled" in next(line for line in shown if line.startswith("N "))
    assert [line.split()[-1] for line in shown[-3:-1]] == ["168r", "168r"]
    # A reference run compiles nothing and leaves the columns empty.
    ref = run_cli("sweep", "--seq-lens", "64", "--db", db_path, *fast_args)
    assert ref.code == 0, ref.err
    rows = list(csv.DictReader(io.StringIO(run_cli("export", "--csv", "-", "--db", db_path).out)))
    assert rows[-1]["backend"] == "reference" and rows[-1]["compiled_registers"] == ""
    assert len(list(service.cache_dir.glob("*.json"))) == 1  # one class, one compile


def test_the_resources_command_refuses_bad_input_in_one_line(run_cli: Any) -> None:
    bad = run_cli("resources", "--arch", "sm_42")
    assert bad.code == 2 and len(bad.err_lines) == 1 and "sm_42" in bad.err
    dim = run_cli("resources", "--head-dim", "36")
    assert dim.code == 2 and len(dim.err_lines) == 1 and "--head-dim 36:" in dim.err
    tuned = run_cli("resources", "--autotune")
    assert tuned.code == 2 and "tuner picks the tiles" in tuned.err
    tile = run_cli("resources", "--tile-m", "48")
    assert tile.code == 2 and tile.err_lines == [
        "error: --tile-m 48: expected one of 16, 32, 64, 128, 256"
    ]
    for argv, why in (
        (["--q-len", "16"], "--q-len and --k-len go together"),
        (["--q-len", "16", "--k-len", "8", "--mask", "causal"], "--k-len 8 is below --q-len 16"),
        (["--q-len", "1", "--k-len", "4096", "--input-pos", "5"], "--input-pos is k_len - q_len"),
    ):
        refused = run_cli("resources", *argv)
        assert refused.code == 2 and len(refused.err_lines) == 1 and why in refused.err


def _require_compilers() -> None:
    why = missing_tools()
    if why is None:
        return
    if IN_CI:
        pytest.fail(f"{why}: under CI=true the offline compile must run, not skip")
    pytest.skip(why)


def test_the_resources_command_compiles_a_hopper_config_offline_and_caches_it(
    run_cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _require_compilers()
    monkeypatch.setenv("FMHA_WORKBENCH_RESOURCE_CACHE", str(tmp_path / "cache"))
    argv = ["resources", "--arch", "sm_90", "--mask", "causal", "--tile-m", "128",
            "--tile-n", "128", "--worker-warps", "8", "--json"]  # fmt: skip
    result = run_cli(*argv)
    assert result.code == 0, result.err
    found = CompiledResources.from_dict(json.loads(result.out)["sm_90"])
    # The lead's measurement at 8ce300c: 168 registers, no stack, 384 threads (8 + 4 warps).
    assert found.registers == 168 and found.spill_bytes == 0 and found.ctas_per_sm == 1
    assert list((tmp_path / "cache").glob("*.json"))
    text = run_cli(*argv[:-1])
    assert text.out.splitlines()[1] == found.summary()


def test_a_ladder_cell_says_what_its_step_compiled_to(
    service: ResourceService, db_path: Path, rng: np.random.Generator
) -> None:
    from tests.conftest import fast_timing
    from workbench.jobs.ladder_steps import format_ladder_table, ladder_table

    problem = Problem(batch=1, heads=1, head_dim=64, q_len=1, k_len=1)
    with Store(db_path) as store:
        group = store.create_group("ladder", "fits?")
        for step, tiles in (("baseline", (128, 64)), ("big tiles", (256, 128))):
            config = KernelConfig(mask="causal", tile_m=tiles[0], tile_n=tiles[1])
            spec = SweepSpec(problem, (128,), config, "cutile", seed=int(rng.integers(1 << 30)))
            list(
                run_sweep(
                    spec, store, backend=FakeCutile(), timing=fast_timing(), resources=service,
                    group_id=group, step=step,
                )
            )  # fmt: skip
        rows = format_ladder_table(ladder_table(store, group))
    assert rows[1][1].endswith("[168r]")
    assert rows[2][1].endswith("[255r spill 5.5KB]")  # the spilling step says so in its cell


def test_a_child_process_answers_from_the_same_cache_and_can_be_ended(tmp_path: Path) -> None:
    _require_compilers()
    from workbench.analysis.resources import launch_knobs_of, read_child

    service = ResourceService(tmp_path / "cache")
    config = KernelConfig(mask="causal", tile_m=128, tile_n=128, num_worker_warps=8)
    launch = launch_knobs_of(config)
    assert launch is not None
    child = service.start_child(PROBLEM, "causal", launch, "sm_90")
    answer = read_child(child, "sm_90")
    assert answer is not None and answer.registers == 168 and not answer.spills
    assert service.cached(PROBLEM, "causal", launch, "sm_90") == answer  # kept for the window
    # A compile the window no longer needs is ended, and says nothing.
    other = {**launch, "tile_n": 64}
    ended = service.start_child(PROBLEM, "causal", other, "sm_90")
    ended.kill()
    assert read_child(ended, "sm_90") is None
    assert service.cached(PROBLEM, "causal", other, "sm_90") is None


def test_stored_runs_without_resources_get_them_from_the_cli(
    run_cli: Any,
    db_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    rng: np.random.Generator,
) -> None:
    from tests.conftest import fast_timing

    problem = Problem(batch=1, heads=1, head_dim=64, q_len=1, k_len=1)
    spec = SweepSpec(problem, (128,), KernelConfig(mask="causal"), "cutile", seed=1)
    with Store(db_path) as store:
        # Stored as before points kept their resources: a cuTile run on an H200, and a peer.
        old = store.create_run(spec, {"gpu_name": "NVIDIA H200", "compute_capability": "9.0"})
        store.add_point(old, ReferenceBackend().measure_point(
            spec.problems()[0], spec.config, fast_timing(), rng
        ))  # fmt: skip
        peer = store.create_run(dataclasses.replace(spec, backend="torch-cudnn"), {})
    missing = run_cli("resources", "--runs", f"{old},99", "--db", db_path)
    assert missing.code == 2 and "run 99 does not exist" in missing.err
    _require_compilers()
    monkeypatch.setenv("FMHA_WORKBENCH_RESOURCE_CACHE", str(tmp_path / "cache"))
    result = run_cli("resources", "--runs", f"{old},{peer}", "--db", db_path)
    assert result.code == 0, result.err
    assert result.out.strip() == "stored the compiled resources of 1 point(s)"
    with Store(db_path) as store:
        found = CompiledResources.from_dict(store.points(old)[0].extra["resources"])
    assert found.arch == "sm_90" and found.registers and not found.error
    again = run_cli("resources", "--runs", str(old), "--db", db_path)
    assert again.out.strip() == "stored the compiled resources of 0 point(s)"  # kept, not redone


def test_the_resources_command_says_when_a_key_loop_cannot_keep_the_tensor_cores_busy(
    run_cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the SASS: D 64's tuned 128x256 tile without the polynomial spends more MUFU
    (exp2) cycles on a key block than tensor-core cycles; D 128's 128x128 with the polynomial on
    16 columns about half."""
    _require_compilers()
    from kernels.sass_costs import nvdisasm_path

    if nvdisasm_path() is None:
        if IN_CI:
            pytest.fail("nvdisasm missing: under CI=true the SASS must be read, not skipped")
        pytest.skip("nvdisasm is not installed (nvidia-cuda-nvdisasm)")
    monkeypatch.setenv("FMHA_WORKBENCH_RESOURCE_CACHE", str(tmp_path / "cache"))
    common = ["resources", "--arch", "sm_90", "--mask", "none", "--tile-m", "128",
              "--worker-warps", "8", "--k-split"]  # fmt: skip
    d64 = run_cli(*common, "--head-dim", "64", "--tile-n", "256", "--json")
    assert d64.code == 0, d64.err
    wide = CompiledResources.from_dict(json.loads(d64.out)["sm_90"])
    assert wide.mufu_share is not None and wide.mufu_share >= 1.0
    assert wide.issue_share is not None and wide.issue_share < 1.0
    text = run_cli(*common, "--head-dim", "64", "--tile-n", "256").out.splitlines()
    assert text[2] == f"  {wide.key_block()}" and text[2].endswith("(MUFU-bound)")
    d128 = run_cli(*common, "--tile-n", "128", "--poly-exp2-cols", "16", "--json")
    square = CompiledResources.from_dict(json.loads(d128.out)["sm_90"])
    assert square.mufu_share is not None and 0.3 < square.mufu_share < 0.6
    assert "bound" not in square.key_block()
    assert square.kv_share is None and "K+V" not in square.key_block()
    # The decode form reads each key block from device memory once: at q_len 1 the issue share
    # passes the tensor cycles of a 16-row tile, but the read takes several times longer still,
    # and that is what the line must name.
    decode = ["resources", "--arch", "sm_90", "--q-len", "1", "--k-len", "32768", "--heads",
              "32", "--kv-heads", "8", "--dtype", "bfloat16", "--pack-gqa", "--kv-splits", "16",
              "--tile-n", "128"]  # fmt: skip
    shown = run_cli(*decode)
    assert shown.code == 0, shown.err
    assert "q_len=1 k_len=32768" in shown.out.splitlines()[0]
    split = CompiledResources.from_dict(json.loads(run_cli(*decode, "--json").out)["sm_90"])
    assert split.kv_share is not None and split.issue_share is not None
    assert split.kv_share > 4 * split.issue_share > 4
    assert shown.out.splitlines()[2].endswith("(K+V read-bound)")


def test_sass_loop_reads_another_kernels_cubin_as_it_reads_ours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench/sass_loop.py --cubin (FA4's, kept on the GPU host) costs a key block the same way
    as a config it compiles itself: our own cubin given both ways reads the same."""
    _require_compilers()
    from kernels.sass_costs import nvdisasm_path

    if nvdisasm_path() is None:
        if IN_CI:
            pytest.fail("nvdisasm missing: under CI=true the SASS must be read, not skipped")
        pytest.skip("nvdisasm is not installed (nvidia-cuda-nvdisasm)")
    from bench.sass_loop import main
    from kernels.cutile.compile import compile_cubin

    knobs = {"tile_m": 128, "tile_n": 128, "num_worker_warps": 8, "poly_exp2_cols": 16}
    assert main(["--config", json.dumps(knobs), "--json"]) == 0
    ours = json.loads(capsys.readouterr().out)
    cubin = tmp_path / "kernel.cubin"
    cubin.write_bytes(compile_cubin(
        arch="sm_90", dtype="float16", head_dim=128, q_len=8192, heads=32, batch=4, mask="none",
        fast_math=True, k_split=True, remap=True, **knobs,
    ))  # fmt: skip
    assert main(["--cubin", str(cubin), "--tile", "128,128,128", "--json"]) == 0
    theirs = json.loads(capsys.readouterr().out)
    assert theirs["counts"] == ours["counts"] and theirs["counts"]["HGMMA"] > 0
    for share in ("issue_cycles", "mufu_cycles", "tensor_cycles"):
        assert theirs[share] == ours[share]
    with pytest.raises(SystemExit) as refused:
        main(["--cubin", str(cubin)])  # no tile: nothing to weigh the cycles against
    assert refused.value.code == 2


def test_the_wgmma_wait_reproduction_finds_every_wait_a_full_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """bench/repro_wgmma_wait.py, what docs/experiments.md cites for tileiras 13.4: a loop with
    two independent products a block compiles to waits that each drain every product issued;
    should a tileiras leave one in flight, this fails and the limit in the README is stale."""
    _require_compilers()
    from kernels.sass_costs import nvdisasm_path

    if nvdisasm_path() is None:
        if IN_CI:
            pytest.fail("nvdisasm missing: under CI=true the SASS must be read, not skipped")
        pytest.skip("nvdisasm is not installed (nvidia-cuda-nvdisasm)")
    from bench.repro_wgmma_wait import main

    assert main([]) == 0
    out = capsys.readouterr().out.splitlines()
    loop = out[0].split(" | ")
    assert sum(step.startswith("HGMMA") for step in loop) >= 2  # both products in the loop
    assert "MUFU…" in loop
    waits = int(out[1].split()[0])
    assert waits >= 2 and out[1].endswith(", 0 leave a product in flight")


def test_the_pdl_trigger_reproduction_finds_the_shared_memory_grow() -> None:
    """bench/repro_pdl_trigger.py, what docs/experiments.md cites for tileiras 13.4: asking for
    the dependent grid's early launch grows the key loop's shared memory; should a tileiras stop
    doing so, this fails and the decode note in the README is stale."""
    _require_compilers()
    from bench.repro_pdl_trigger import PLACES, compile_loop
    from kernels.cubin_resources import read_resources

    found = {place: read_resources(compile_loop(place)) for place in PLACES}
    plain = found["none"]
    assert plain.stack == 0 and plain.shared > 64 * 1024  # a pipelined loop, no spill
    for place in ("first", "after-loop"):
        assert found[place].shared - plain.shared >= 32 * 1024, (place, found[place], plain)


def test_without_cuda_tile_the_readout_says_it_compiles_here_without_a_gpu(monkeypatch) -> None:
    """A CPU machine set up without the test extra: the line under the knobs sends the user to
    the extra that brings the compiler, and says no GPU is needed (not the gpu extra)."""
    import sys

    from workbench.analysis.resources import missing_tools

    monkeypatch.setitem(sys.modules, "cuda.tile", None)  # import cuda.tile now fails
    assert missing_tools() == (
        "cuda-tile is not installed (it compiles here without a GPU: "
        "pip install 'fmha-workbench[test]')"
    )
