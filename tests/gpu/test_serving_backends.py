"""The workbench's backends on ragged batches on the GPU, through measure_point as a sweep runs
them: the cuTile serving kernels (varlen prefill, contiguous ragged decode, paged decode at
P 16-256 with auto, fixed and no splits, chunked prefill over pages), torch SDPA on the padded
batch, and FA4's varlen and paged paths, each checked against float64 attention of sampled
sequences, with the FLOPs of the real lengths and (cuTile) the stored launch plan; then one
paged sweep from the CLI, shown with its "ran" line. Inputs: fresh random normals from the
session's printed seed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pytest.importorskip("cuda.tile")

from kernels.cutile.plan import plan_words  # noqa: E402
from workbench.analysis.serving_blocks import serving_flops  # noqa: E402
from workbench.backends import get_backend  # noqa: E402
from workbench.config import ConfigError, KernelConfig, Problem  # noqa: E402
from workbench.errors import BackendError  # noqa: E402
from workbench.measure.timing import TimingSettings  # noqa: E402

QUICK = TimingSettings(warmup=1, min_samples=3, min_time_s=0.0)
DECODE_LENS = (5000, 17, 0, 1, 900, 64)  # one long, an empty one, one token, a full page
PREFILL_LENS = (1, 0, 77, 300, 1000)
PAGED = {"q_len": 1, "kv_cache": "paged", "shared_pages": 1}
CASES = {
    "varlen-causal": ({"lengths": PREFILL_LENS, "varlen": True}, {"mask": "causal"}),
    "varlen-window": (
        {"lengths": PREFILL_LENS, "varlen": True},
        {"mask": "window", "window": 64, "tile_n": 128},
    ),
    "varlen-none": ({"lengths": PREFILL_LENS, "varlen": True}, {"mask": "none"}),
    "contiguous-decode": ({"lengths": DECODE_LENS, "q_len": 1}, {}),
    "paged-p16-auto": ({"lengths": DECODE_LENS, **PAGED, "page_size": 16}, {"kv_splits": None}),
    "paged-p64-split4": ({"lengths": DECODE_LENS, **PAGED, "page_size": 64}, {"kv_splits": 4}),
    "paged-p256-unsplit": ({"lengths": DECODE_LENS, **PAGED, "page_size": 256}, {"tile_n": 128}),
    "paged-chunk-q40": (
        {"lengths": (3000, 200, 64), "q_len": 40, "kv_cache": "paged", "page_size": 32},
        {"mask": "causal", "kv_splits": None},
    ),
}


# Every backend in bf16 (the serving presets' dtype); our kernel in fp16 too.
RUNS = [(n, "bfloat16") for n in ("cutile", "torch-cudnn", "torch-flash", "fa4")]
RUNS.append(("cutile", "float16"))


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize(("name", "dtype"), RUNS)
def test_each_backend_gives_the_float64_answer_on_a_ragged_batch(name, dtype, case, rng):
    backend = get_backend(name, isolated=False)
    status = backend.availability()
    if not status.available:
        pytest.skip(status.reason)
    fields, knobs = CASES[case]
    problem = Problem(heads=8, kv_heads=2, head_dim=128, dtype=dtype, **fields)
    config = KernelConfig(**knobs)
    try:
        backend.check_supported(problem, config)
    except ConfigError as exc:
        message = exc.cli_message()
        # By design only SDPA's flash backend refuses here: it takes no mask of padded keys.
        assert name == "torch-flash" and case != "varlen-causal", message
        assert message.startswith("--backend torch-flash: pads") and "\n" not in message
        return
    try:
        result = backend.measure_point(problem, config, QUICK, rng)
    except BackendError as exc:  # FA4 asserting a path, or cuDNN a mask, it does not take here
        assert name in ("fa4", "torch-cudnn") and "\n" not in str(exc), exc
        pytest.skip(str(exc))
    assert result.accuracy.passed, (name, case, dtype, result.accuracy)
    assert result.flops == serving_flops(problem, config)
    assert result.timing.median_ms > 0
    if name == "cutile":
        assert result.plan is not None
        words = plan_words(result.plan)
        kernel = "fmha_paged_kernel" if problem.page_size else "fmha_varlen_kernel"
        assert words.startswith(("paged" if problem.page_size else "varlen") + f" · {kernel}")
        if case == "paged-p64-split4":
            assert result.plan["kv_splits"] == 4 and "combine grid" in words


def test_a_paged_sweep_from_the_cli_is_stored_with_what_it_ran(
    run_cli: Callable, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    result = run_cli(
        "sweep", "--backend", "cutile", "--lengths", "300,5000,0,17,2k", "--q-len", "1",
        "--page-size", "16", "--shared-pages", "1", "--kv-splits", "auto", "--heads", "8",
        "--kv-heads", "2", "--head-dim", "128", "--dtype", "bfloat16", "--db", str(db),
        "--samples", "3", "--min-time", "0", "--json",
    )  # fmt: skip
    assert result.code == 0, result.err
    (run,) = json.loads(result.out)["runs"]
    assert run["status"] == "complete", run
    shown = run_cli("show", "1", "--db", str(db))
    assert shown.code == 0, shown.err
    ran = [line for line in shown.out.splitlines() if line.strip().startswith("ran")]
    assert ran and "paged · fmha_paged_kernel" in ran[0] and "pages of 16" in ran[0], shown.out
    assert np.isfinite(run["points"][0]["latency_ms"])
