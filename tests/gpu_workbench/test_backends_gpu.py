"""Every GPU backend on the real device: correct, timed faithfully, isolated from faults."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.schedule import Schedule
from workbench.backends import get_backend
from workbench.backends.isolated import IsolatedBackend
from workbench.config import ConfigError, KernelConfig, Problem, SweepSpec
from workbench.jobs import run_sweep
from workbench.measure.timing import TimingSettings, measure
from workbench.run.engine import Engine, EngineFailure
from workbench.store import Store

QUICK = TimingSettings(warmup=2, min_samples=5, min_time_s=0.0)


def _torch_ok() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("mask", ["none", "causal", "window"])
@pytest.mark.parametrize("name", ["cutile", "torch-flash", "torch-cudnn", "fa4", "naive"])
def test_each_backend_gives_the_float64_answer_on_a_ragged_gqa_problem(name, mask, dtype):
    if name.startswith("torch") and not _torch_ok():
        pytest.skip("torch with CUDA is not installed")
    backend = get_backend(name, isolated=False)
    if not backend.availability().available:
        pytest.skip(backend.availability().reason)
    problem = Problem(
        batch=2, heads=4, kv_heads=2, q_len=300, k_len=317, head_dim=64, dtype=dtype, input_pos=17
    )
    config = KernelConfig(
        tile_m=64,
        tile_n=64,
        mask=mask,
        window=100 if mask == "window" else None,
        fast_math=True,
        k_split=True,
        remap=True,
        # the polynomial exp2 on a quarter of the columns (the peers ignore this knob)
        poly_exp2_cols=16 if dtype == "bfloat16" else 0,
    )
    try:
        backend.check_supported(problem, config)
    except ConfigError as exc:
        # SDPA has no window; its flash backend has no bottom-right causal kernel (q < k).
        no_window = name.startswith("torch") and mask == "window"
        no_bottom_right = name == "torch-flash" and mask == "causal" and "no kernel" in str(exc)
        assert no_window or no_bottom_right, exc
        return
    result = backend.measure_point(problem, config, QUICK, np.random.default_rng())
    assert result.accuracy.passed, result.accuracy
    assert result.timing.count >= QUICK.min_samples
    assert result.timing.median_ms > 0
    expected = Schedule(300, 317, 64, 64, mask, 17, config.window).block_map
    if name == "cutile":
        assert np.array_equal(result.block_map, expected)  # from the instrumented kernel
        assert result.extra["block_map_matches_schedule"]
        # The point keeps the plan its launch ran: one CTA per 64×64 tile, no split.
        assert result.plan is not None
        assert (result.plan["form"], result.plan["tile_m"], result.plan["kv_splits"]) == (
            "tile", 64, 1,
        )  # fmt: skip
    if name == "naive":
        scores = 2 * 4 * 300 * 317 * 4
        assert result.peak_mem_bytes is not None and result.peak_mem_bytes >= scores


@pytest.mark.parametrize("k_len", [512, 576], ids=["8-key-blocks-paired", "9-one-at-a-time"])
def test_cutile_persistent_grid_with_key_pairs_is_correct_and_maps_its_blocks(k_len):
    # The form's "Key blocks / iter" 2: the kernel pairs 8 key blocks of 64 and falls back to
    # one block an iteration for 9; both must give the float64 answer and visit every block once.
    backend = get_backend("cutile", isolated=False)
    problem = Problem(batch=2, heads=4, kv_heads=2, q_len=300, k_len=k_len, head_dim=64)
    config = KernelConfig(
        tile_m=64, tile_n=64, fast_math=True, k_split=True, persistent=True, k_unroll=2
    )
    result = backend.measure_point(problem, config, QUICK, np.random.default_rng())
    assert result.accuracy.passed, result.accuracy
    assert result.extra["launch"]["k_unroll"] == 2
    expected = Schedule(300, k_len, 64, 64, "none", 0, None).block_map
    assert np.array_equal(result.block_map, expected)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(
    ("bnhd", "one_shot", "mask", "knobs"),
    [
        (True, False, "causal", dict(persistent=True)),  # the causal persistent grid
        (True, True, "none", dict(tile_n=128)),
        (False, True, "causal", dict()),
        (True, True, "none", dict(tile_n=128, pack_gqa=True, kv_splits=None)),  # decode form
    ],
    ids=["bnhd-prepared", "bnhd-one-shot", "bhnd-one-shot", "bnhd-one-shot-decode"],
)
def test_cutile_model_inputs_and_one_shot_calls_give_the_float64_answer(
    bnhd, one_shot, mask, knobs, dtype
):
    # The model-inputs ladder's steps: (B, N, H, D) projections read in place, and a fresh
    # attention() call each launch; both must be checked (poisoned output) and timed.
    backend = get_backend("cutile", isolated=False)
    q_len = 1 if knobs.get("pack_gqa") else 512
    problem = Problem(batch=2, heads=8, kv_heads=2, q_len=q_len, k_len=512, head_dim=128,
                      dtype=dtype, input_pos=512 - q_len)  # fmt: skip
    config = KernelConfig(mask=mask, bnhd_inputs=bnhd, one_shot=one_shot, **knobs)
    result = backend.measure_point(problem, config, QUICK, np.random.default_rng())
    assert result.accuracy.passed, result.accuracy
    assert result.timing.count >= QUICK.min_samples and result.timing.median_ms > 0
    assert result.extra["block_map_matches_schedule"]
    if knobs.get("pack_gqa"):
        # The decode point's map is the split kernel's own record, splits included.
        assert result.extra["block_map_source"] == "kernel"
        assert result.extra["split_map_matches_schedule"]
        # The stored plan says what auto resolved to, and the map ran that count (4 key blocks:
        # too few to split).
        assert result.plan is not None and result.plan["form"] == "decode"
        assert result.plan["kv_splits"] == result.extra["kv_splits"] == 1


def test_naive_refuses_scores_that_cannot_fit_instead_of_crashing():
    backend = get_backend("naive", isolated=False)
    huge = Problem(batch=4, heads=32, q_len=65536, k_len=65536, head_dim=128)
    with pytest.raises(ConfigError, match="GiB for the N×N scores"):
        backend.check_supported(huge, KernelConfig())


def test_workbench_median_matches_triton_do_bench_within_3_percent():
    triton_testing = pytest.importorskip("triton.testing")
    import cupy

    backend = get_backend("cutile", isolated=False)
    problem = Problem(batch=4, heads=32, q_len=4096, k_len=4096, head_dim=128)
    config = KernelConfig(mask="causal", fast_math=True, k_split=True, remap=True)
    inputs = backend.make_inputs(problem, np.random.default_rng())
    launch = backend.prepare(problem, config, inputs)
    launch()
    cupy.cuda.Device().synchronize()
    settings = TimingSettings(warmup=10, min_samples=100, min_time_s=1.0)
    ours = measure(backend.sampler(launch, settings), settings).median_ms
    theirs = triton_testing.do_bench(launch, warmup=100, rep=1000, return_mode="median")
    ours_again = measure(backend.sampler(launch, settings), settings).median_ms
    print(f"fidelity: workbench {ours:.4f} ms, again {ours_again:.4f} ms, do_bench {theirs:.4f} ms")
    assert abs(ours - theirs) / theirs < 0.03
    assert abs(ours - ours_again) / ours_again < 0.02


def test_two_back_to_back_sweeps_agree_within_2_percent(tmp_path):
    store = Store(tmp_path / "runs.db")
    backend = get_backend("cutile", isolated=False)
    problem = Problem(batch=4, heads=32, head_dim=128)
    spec = SweepSpec(problem, (2048, 4096), KernelConfig(mask="causal", k_split=True), "cutile")
    settings = TimingSettings(warmup=10, min_samples=50, min_time_s=0.5)
    medians = []
    for _ in range(2):
        events = list(run_sweep(spec, store, backend=backend, timing=settings))
        assert events[-1].status == "complete", events[-1].error
        medians.append([p.latency_ms for p in store.points(events[-1].run_id)])
    print(f"back-to-back medians: {medians}")
    for a, b in zip(*medians):
        assert abs(a - b) / min(a, b) < 0.02


def test_an_illegal_memory_access_fails_the_call_and_the_engine_recovers(tmp_path):
    engine = Engine(timeout_s=300)
    with pytest.raises(EngineFailure) as info:
        engine.call("tests.gpu_workbench.faulty:illegal_access")
    text = str(info.value).lower()
    assert "illegal" in text or "died" in text, text
    # The next run on the same engine works: a fresh child with a fresh CUDA context.
    store = Store(tmp_path / "runs.db")
    backend = IsolatedBackend(get_backend("cutile", isolated=False), engine)
    spec = SweepSpec(Problem(heads=2, head_dim=64), (256,), KernelConfig(mask="causal"), "cutile")
    events = list(run_sweep(spec, store, backend=backend, timing=QUICK))
    assert events[-1].status == "complete", events[-1].error
    assert store.points(events[-1].run_id)[0].rel_err < 1e-2
    engine.close()


@pytest.mark.parametrize("name", ["cutile", "torch-cudnn"])
def test_graph_replay_and_l2_flush_time_the_same_kernel(name):
    if name.startswith("torch") and not _torch_ok():
        pytest.skip("torch with CUDA is not installed")
    backend = get_backend(name, isolated=False)
    problem = Problem(batch=2, heads=16, q_len=2048, k_len=2048, head_dim=128)
    config = KernelConfig(mask="causal")
    events = TimingSettings(warmup=2, min_samples=5, min_time_s=0.0, graph=False)
    plain = backend.measure_point(problem, config, events, np.random.default_rng())
    graphed = backend.measure_point(
        problem,
        config,
        TimingSettings(warmup=2, min_samples=5, min_time_s=0.0, graph=True, flush_l2=True),
        np.random.default_rng(),
    )
    assert graphed.accuracy.passed
    # Each point says which timer took it; both backends' launches can be captured.
    assert (plain.extra["timer"], graphed.extra["timer"]) == ("events", "graph")
    # Same kernel: within a factor that launch overhead and a cold L2 cannot exceed.
    assert 0.5 < graphed.timing.median_ms / plain.timing.median_ms < 1.5


def test_a_group_times_every_backend_on_the_same_inputs_in_the_engine(tmp_path):
    """The window's and the CLI's group: one run per backend, same inputs, graph-timed."""
    from workbench.jobs import GroupStarted, group_specs, plan_group, run_group

    names = ["cutile", "torch-cudnn", "naive"] if _torch_ok() else ["cutile", "naive"]
    problem = Problem(batch=2, heads=8, head_dim=64)
    config = KernelConfig(mask="causal", fast_math=True, k_split=True, remap=True)
    spec = SweepSpec(
        problem, (512, 1024), config, seed=int(np.random.SeedSequence().entropy % 2**31)
    )
    print(f"group seed {spec.seed}")
    with Store(tmp_path / "runs.db") as store:
        plan, backends = plan_group(group_specs(spec, names))
        events = list(run_group(plan, store, backends=backends, timings=[QUICK] * len(names)))
        started = events[0]
        assert isinstance(started, GroupStarted) and started.backends == tuple(names)
        finished = [e for e in events if type(e).__name__ == "RunFinished"]
        assert [e.status for e in finished] == ["complete"] * len(names), finished
        runs = store.group_runs(started.group_id)
        assert sorted(r.backend for r in runs) == sorted(names)
        for run in runs:
            points = store.points(run.id)
            assert [p.seq_len for p in points] == [512, 1024]
            assert all(p.rel_err < 1e-2 for p in points)
            assert {p.extra["timer"] for p in points} <= {"graph", "events"}
        # The same inputs: every backend's output is the same answer, so their errors against
        # float64 are of one size (cuTile and cuDNN within a few times of each other).
        errs = [store.points(r.id)[0].rel_err for r in runs]
        assert max(errs) < 20 * min(errs), errs


def test_fa4_refuses_a_causal_offset_it_would_align_differently():
    backend = get_backend("fa4", isolated=False)
    if not backend.availability().available:
        pytest.skip(backend.availability().reason)
    problem = Problem(heads=2, q_len=256, k_len=512, head_dim=64, input_pos=0)
    with pytest.raises(ConfigError) as info:
        backend.check_supported(problem, KernelConfig(mask="causal"))
    assert info.value.field == "input_pos"
