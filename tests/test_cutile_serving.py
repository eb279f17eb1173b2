"""The cuTile backend's host side on a ragged batch, on the CPU: the backend's own inputs (the
serving layouts the reference gets), its choice of kernel, tiles and split table from the config,
those kernel arguments run by the NumPy stand-in for cuda.tile (tests/tile_emulator.py), and the
workbench's output check on the result; every knob the serving kernels cannot take refused in one
line naming its flag. The torch glue (prepare_varlen / prepare_paged on device tensors) runs in
tests/gpu/test_serving_backends.py, and here where torch is installed. Inputs are fresh random
normals from the session's printed seed."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("cuda.tile")  # the device modules import it (nothing here launches a GPU)

from kernels.cutile import device, device_varlen, serving_launch
from kernels.cutile.plan import plan_words
from kernels.cutile.varlen import VarlenShape, kernel_arguments
from kernels.serving_schedule import varlen_tiles
from tests.test_serving_kernels_emulated import run_paged
from tests.tile_emulator import as_array, emulated, launch_torch_on_cpu, run_grid
from workbench.backends import cutile_serving
from workbench.backends.base import host_inputs
from workbench.backends.cutile import CutileBackend
from workbench.backends.torch_base import upload_serving
from workbench.config import ConfigError, KernelConfig, Problem
from workbench.measure.serving_inputs import check_serving_output

HEADS = {"heads": 4, "kv_heads": 2, "head_dim": 32, "dtype": "float16"}
PAGED = {"q_len": 1, "kv_cache": "paged", "page_size": 16}


def ragged(lengths: list[int], **fields: object) -> Problem:
    return Problem(**{**HEADS, "lengths": tuple(lengths), **fields})  # type: ignore[arg-type]


def run_varlen_emulated(problem: Problem, launch: cutile_serving.RaggedLaunch, inputs):
    """The varlen kernel on the backend's inputs, as prepare_varlen hands them to it."""
    q, k, v, cu_q, cu_k = inputs
    q, k, v = (x.astype(np.float16) for x in (q, k, v))
    cu = (tuple(cu_q.tolist()), tuple(cu_k.tolist()))
    s = VarlenShape(q.shape[0], k.shape[0], problem.heads, problem.kv_heads, problem.head_dim,
                    problem.value_dim, "float16", *cu)  # fmt: skip
    tiles = varlen_tiles(cu_q, cu_k, launch.block_m, launch.block_n, causal=launch.causal,
                         window=launch.window)  # fmt: skip
    values = kernel_arguments(s, causal=launch.causal, window=launch.window,
                              scale=1 / math.sqrt(problem.head_dim), block_m=launch.block_m,
                              block_n=launch.block_n, with_lse=True, poly_cols=launch.step[0],
                              key_latency=launch.step[1], value_latency=launch.step[2])  # fmt: skip
    out = np.full((s.total_q, problem.heads, problem.value_dim), np.nan, dtype=np.float16)
    lse = np.full((problem.heads, s.total_q), np.nan, dtype=np.float32)
    args = (*(as_array(x.transpose(1, 0, 2)[None]) for x in (q, k, v, out)),
            as_array(lse[None]), as_array(tiles), *values.values())  # fmt: skip
    with emulated(device, device_varlen):
        run_grid(device_varlen.fmha_varlen_kernel, (problem.heads, len(tiles), 1), args)
    return out


@pytest.mark.parametrize(
    ("lengths", "fields", "mask", "window", "step"),
    [
        ([37, 0, 130, 1, 70], {"varlen": True}, "causal", None, {}),
        ([37, 0, 130, 1, 70], {"varlen": True}, "window", 20, {}),
        ([200, 3, 0, 65], {"q_len": 2}, "none", None, {}),  # decode on a contiguous cache
        # The polynomial exp2 on the unmasked blocks (130's second q-block sees its first
        # 64 keys whole), with other load latencies.
        ([37, 0, 130, 1, 70], {"varlen": True}, "causal", None,
         {"poly_exp2_cols": 16, "k_latency": 3, "v_latency": 6}),
        ([300, 129], {"varlen": True}, "none", None, {"poly_exp2_cols": 32}),
    ],
    ids=["varlen-causal", "varlen-window", "contiguous-decode", "varlen-poly16", "varlen-poly32"],
)  # fmt: skip
def test_the_backend_runs_a_varlen_batch_through_the_varlen_kernel(
    rng, lengths, fields, mask, window, step
):
    problem = ragged(lengths, **fields)
    config = KernelConfig(mask=mask, window=window, tile_n=128 if window else 64, **step)
    CutileBackend().check_supported(problem, config)
    launch = cutile_serving.ragged_launch(problem, config)
    assert (launch.kernel, launch.block_n, launch.causal) == ("varlen", config.tile_n,
                                                               mask != "none")  # fmt: skip
    assert launch.step == (step.get("poly_exp2_cols", 0), step.get("k_latency", 2),
                           step.get("v_latency", 4))  # fmt: skip
    if step:  # the stored plan says what ran
        words = plan_words(cutile_serving.plan_record(problem, launch, None, None))
        assert f"poly exp2 on {step['poly_exp2_cols']} columns" in words, words
    inputs = host_inputs(problem, rng)
    out = run_varlen_emulated(problem, launch, inputs)
    report = check_serving_output(inputs, out.astype(np.float32), problem, config, rng)
    assert report.passed and report.checked_rows > 0, report
    # A wrong mask on the same launch fails the same check: the check can tell.
    # (Decode's causal differs from none by one key of one row: too close to tell every time.)
    other = KernelConfig(mask="none") if mask != "none" else KernelConfig(mask="window", window=1)
    if problem.varlen or mask == "none":
        assert not check_serving_output(inputs, out.astype(np.float32), problem, other, rng).passed


def test_a_varlen_batch_runs_on_two_cta_clusters_and_its_plan_says_so(rng):
    problem = ragged([37, 0, 130, 1, 70], varlen=True)
    config = KernelConfig(mask="causal", tile_m=128, tile_n=128, num_ctas=2, occupancy=2)
    CutileBackend().check_supported(problem, config)
    launch = cutile_serving.ragged_launch(problem, config)
    assert (launch.cluster_ctas, launch.ctas_per_sm, launch.block_m) == (2, 2, 128)
    record = cutile_serving.plan_record(problem, launch, None, None)
    assert record["num_ctas"] == 2 and "2-CTA clusters" in plan_words(record), record
    plain = cutile_serving.ragged_launch(problem, KernelConfig(mask="causal"))
    assert plain.cluster_ctas is None
    assert "clusters" not in plan_words(cutile_serving.plan_record(problem, plain, None, None))
    inputs = host_inputs(problem, rng)
    out = run_varlen_emulated(problem, launch, inputs)
    report = check_serving_output(inputs, out.astype(np.float32), problem, config, rng)
    assert report.passed and report.checked_rows > 0, report


@pytest.mark.parametrize(
    ("page", "q_len", "kv_splits", "tile_n"),
    [(16, 1, None, 64), (64, 3, 2, 64), (32, 1, 1, 32), (256, 1, None, 128)],
    ids=["p16-auto", "p64-q3-two-splits", "p32-no-split", "p256-auto"],
)
def test_the_backend_runs_a_paged_batch_through_the_paged_kernel(
    rng, page, q_len, kv_splits, tile_n
):
    lengths = [int(rng.integers(2000, 3000)), 130, 0, 1, page + 1]
    problem = ragged(lengths, q_len=q_len, kv_cache="paged", page_size=page, shared_pages=1)
    config = KernelConfig(mask="causal", kv_splits=kv_splits, tile_n=tile_n, pack_gqa=True)
    CutileBackend().check_supported(problem, config)
    launch = cutile_serving.ragged_launch(problem, config)
    # 8 SMs: the long sequence alone would hold a few of them while the rest wait.
    plan = cutile_serving.paged_plan(problem, launch, sm_count=8)
    splits = plan.schedule.splits
    if kv_splits is None:
        assert max(splits) > 1 and min(splits) == 1  # the long sequence split, the short not
    else:
        assert max(splits) == kv_splits
    q, k_cache, v_cache, table, lens = host_inputs(problem, rng)
    f16 = [x.astype(np.float16) for x in (q, k_cache, v_cache)]
    out, _ = run_paged(*f16, table, lens.tolist(), plan, problem.heads, problem.kv_heads)
    inputs = (q, k_cache, v_cache, table, lens)
    report = check_serving_output(inputs, out.astype(np.float32), problem, config, rng)
    assert report.passed and report.checked_rows > 0, report
    record = cutile_serving.plan_record(problem, launch, plan, 8)
    words = plan_words(record)
    assert f"pages of {page}" in words and f"{plan.schedule.slots} units" in words
    assert record["kv_splits"] == max(splits) and record["min_splits"] == min(splits)


@pytest.mark.parametrize(
    ("fields", "config", "said"),
    [
        ({"varlen": True}, {"kv_splits": 4}, "--kv-splits 4: the cuTile varlen kernel does not"),
        ({"varlen": True}, {"pack_gqa": True}, "--pack-gqa: the cuTile varlen kernel runs one"),
        ({"varlen": True}, {"tile_m": 32}, "--tile-m 32: the cuTile varlen kernel takes 64 or 128"),
        ({"varlen": True}, {"k_split": False}, "--no-k-split: does not apply to the cuTile"),
        ({"varlen": True}, {"autotune": True}, "--autotune: does not apply to the cuTile"),
        (PAGED, {"tile_n": 256}, "--tile-n 256: the cuTile paged"),
        (PAGED, {"poly_exp2_cols": 8}, "--poly-exp2-cols 8: the cuTile paged kernel's block"),
        (PAGED, {"v_latency": 6}, "--v-latency 6: the cuTile paged kernel's block"),
        (PAGED, {"num_ctas": 2}, "--cluster-ctas 2: the cuTile paged kernel's block"),
        ({"varlen": True}, {"num_ctas": 4}, "--cluster-ctas 4: the cuTile varlen kernel runs"),
        (PAGED, {"tile_m": 16}, "--tile-m 16: the cuTile paged"),
        (
            PAGED,
            {"kv_splits": 64},
            "--kv-splits 64: the cuTile paged kernel's combine takes at most 32",
        ),
        ({**PAGED, "q_len": 2}, {"mask": "none"}, "--mask none: the cuTile paged"),
        (
            PAGED,
            {"mask": "window", "window": 8},
            "--mask window: the cuTile paged kernel has no window mask",
        ),
    ],
)
def test_a_knob_the_serving_kernels_cannot_take_is_refused_naming_its_flag(fields, config, said):
    problem = ragged([300, 20, 0], **fields)
    with pytest.raises(ConfigError) as refused:
        CutileBackend().check_supported(problem, KernelConfig(**config))
    message = refused.value.cli_message()
    assert message.startswith(said) and "\n" not in message, message


def test_the_backend_prepares_and_checks_a_ragged_point_on_cpu_torch(rng, monkeypatch):
    """prepare (the torch glue) on CPU tensors, its launches run by the emulator: the output
    buffer the poisoned check reads, the tables kept on the host for it."""
    torch = pytest.importorskip("torch")
    from kernels.cutile import device_paged

    monkeypatch.setattr(serving_launch, "launch", launch_torch_on_cpu)
    monkeypatch.setattr(serving_launch, "variant", lambda kernel, *hints: kernel)
    backend = CutileBackend()
    for problem, config in (
        (ragged([90, 0, 33], varlen=True), KernelConfig(mask="causal")),
        (ragged([700, 5, 0], **PAGED), KernelConfig(kv_splits=None)),  # split: the combine runs
    ):
        inputs = upload_serving(host_inputs(problem, rng), problem.dtype, device="cpu")
        with emulated(device, device_varlen, device_paged):
            launch = backend.prepare(problem, config, inputs)
            backend.poison_output()
            out = launch()
        assert isinstance(out, torch.Tensor) and backend._ragged is not None
        views = [backend.host_view(x) for x in inputs]
        report = check_serving_output(views, backend.host_view(out), problem, config, rng)
        assert report.passed, (problem.summary(), report)


def test_the_ran_line_docs_serving_shows_is_the_one_the_backend_stores():
    """docs/serving.md quotes the plan of serving-decode-64 at P16 on 132 SMs: it is what the
    backend's plan record of that batch says."""
    from pathlib import Path

    from workbench.batch import parse_lengths

    lengths = parse_lengths("lognormal:n=64,mean=4k,min=1k,max=32k,seed=1")
    batch = {"lengths": tuple(lengths), "kv_cache": "paged", "page_size": 16, "shared_pages": 1}
    problem = Problem(heads=32, kv_heads=8, head_dim=128, dtype="bfloat16", q_len=1, **batch)
    config = KernelConfig(tile_n=64, pack_gqa=True, kv_splits=None)
    launch = cutile_serving.ragged_launch(problem, config)
    plan = cutile_serving.paged_plan(problem, launch, sm_count=132)
    words = plan_words(cutile_serving.plan_record(problem, launch, plan, 132))
    page = (Path(__file__).resolve().parents[1] / "docs" / "serving.md").read_text("utf-8")
    assert f"    {words}\n" in page, words


def test_a_ragged_cutile_point_asks_no_dense_cubin_for_its_resources(tmp_path):
    """A sweep attaches each cutile point's compiled resources; a ragged point ran the serving
    kernels, so it gets none (not the dense kernel's cubin for its longest sequence)."""
    from workbench.analysis.resources import ResourceService, point_resources

    machine = {"compute_capability": "9.0", "gpu_name": "NVIDIA H100"}
    problem = ragged([300, 20], **PAGED)
    service = ResourceService(tmp_path)
    assert point_resources(service, "cutile", problem, KernelConfig(), {}, machine) is None
