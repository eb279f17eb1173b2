"""The GPU example plugins on the GPU (issue 55). Each runs as a user runs it, through the
command line in a real subprocess:

- ``--backends X,reference`` on a small ragged GQA problem at several of its knob values: every
  point's max error against float64 attention is within the dtype's tolerance, as the
  reference's is;
- ``--backends cutile,X`` as one group on a tiny problem: each example declares
  ``inputs="cuda"``, so its points are timed by the GPU sampler our kernel's are (the stored
  timer is ``graph`` or ``events``, never ``cpu``), and its stored median is below what copying
  its inputs to the GPU and its output back takes alone, which a time that includes those
  copies (a host-array plugin timed by the wall clock) cannot be; the cuTile example's points
  also store what its kernel compiled to on this GPU (its ``compile_cubin``).

Fresh random inputs from the printed seed."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAST_TIMING_ARGS
from workbench.analysis.resources import missing_tools
from workbench.measure.accuracy import TOLERANCE

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CASES = [
    ("cutile_naive.py", "cutile-naive", "cupy", "causal", ["tile=64"]),
    ("cutile_naive.py", "cutile-naive", "cupy", "window", ["tile=32"]),
    ("cutile_naive.py", "cutile-naive", "cupy", "none", ["tile=128"]),
    ("triton_attention.py", "triton-attention", "triton", "causal", ["BLOCK_M=128", "BLOCK_N=64"]),
    ("triton_attention.py", "triton-attention", "triton", "none", ["BLOCK_M=64", "BLOCK_N=128"]),
    ("torch_softcap.py", "torch-softcap", "torch", "window", ["softcap=30"]),
    ("torch_softcap.py", "torch-softcap", "torch", "causal", ["softcap=0"]),
]


def knob_flags(knobs: list[str]) -> list[str]:
    return [word for knob in knobs for word in ("--plugin-knob", knob)]


@pytest.mark.parametrize(
    ("file", "backend", "needs", "mask", "knobs"),
    CASES,
    ids=[f"{c[1]}-{c[3]}-{'-'.join(c[4])}" for c in CASES],
)
def test_each_example_runs_beside_the_reference_within_tolerance(
    script: Callable[..., Any],
    tmp_path: Path,
    seed: int,
    file: str,
    backend: str,
    needs: str,
    mask: str,
    knobs: list[str],
) -> None:
    pytest.importorskip(needs)
    print(f"seed {seed}")
    db = tmp_path / "runs.db"
    window = ["--window", "100"] if mask == "window" else []
    swept = script(
        db, "--plugin", EXAMPLES / file, "sweep", "--backends", f"{backend},reference",
        "--batch", "2", "--heads", "4", "--kv-heads", "2", "--head-dim", "64",
        "--seq-lens", "256,1000", "--mask", mask, *window, "--seed", str(seed),
        *knob_flags(knobs), *FAST_TIMING_ARGS, "--json",
        timeout=600,
    )  # fmt: skip
    assert swept.returncode == 0, swept.stdout + swept.stderr
    runs = {run["backend"]: run for run in json.loads(swept.stdout)["runs"]}
    assert set(runs) == {backend, "reference"}
    for name, run in runs.items():
        assert run["status"] == "complete", (name, run.get("error"))
        assert [p["seq_len"] for p in run["points"]] == [256, 1000]
        for point in run["points"]:
            assert point["max_abs_err"] <= TOLERANCE["float16"], (name, point)
            assert point["rel_err"] < 1e-2, (name, point)
    mine = runs[backend]
    assert mine["machine"]["plugin_path"] == str(EXAMPLES / file)
    for knob in knobs:
        name, value = knob.split("=")
        stored = mine["machine"]["plugin_knobs"][name]
        assert stored == type(stored)(value), (name, stored)


TINY = ["--batch", "1", "--heads", "2", "--head-dim", "64", "--seq-lens", "128,256"]
GROUPED = [
    ("cutile_naive.py", "cutile-naive", "cupy", ["tile=64"]),
    ("triton_attention.py", "triton-attention", "triton", ["BLOCK_M=64", "BLOCK_N=64"]),
    ("torch_softcap.py", "torch-softcap", "torch", ["softcap=0"]),  # one SDPA call
]


def host_round_trip_ms(seq_len: int) -> float:
    """Median milliseconds of copying the tiny problem's q, k and v from host memory to the GPU
    and the output back, nothing computed: what a plugin given host arrays would pay."""
    import torch

    shape = (1, 2, seq_len, 64)
    host = [torch.randn(shape).half() for _ in range(3)]
    took = []
    for _ in range(30):
        torch.cuda.synchronize()
        started = time.perf_counter()
        on_device = [x.to("cuda") for x in host]
        on_device[0].cpu()
        torch.cuda.synchronize()
        took.append((time.perf_counter() - started) * 1e3)
    return statistics.median(took)


@pytest.mark.parametrize(
    ("file", "backend", "needs", "knobs"), GROUPED, ids=[c[1] for c in GROUPED]
)
def test_each_example_in_a_group_beside_cutile_is_timed_on_the_device_without_the_copies(
    script: Callable[..., Any],
    tmp_path: Path,
    seed: int,
    file: str,
    backend: str,
    needs: str,
    knobs: list[str],
) -> None:
    pytest.importorskip(needs)
    print(f"seed {seed}")
    db = tmp_path / "runs.db"
    swept = script(
        db, "--plugin", EXAMPLES / file, "sweep", "--backends", f"cutile,{backend}", *TINY,
        "--mask", "causal", "--seed", str(seed), *knob_flags(knobs), *FAST_TIMING_ARGS,
        "--json",
        timeout=600,
    )  # fmt: skip
    assert swept.returncode == 0, swept.stdout + swept.stderr
    done = json.loads(swept.stdout)
    assert done["group_id"] is not None
    runs = {run["backend"]: run for run in done["runs"]}
    assert set(runs) == {"cutile", backend}
    for name, run in runs.items():
        assert run["status"] == "complete", (name, run.get("error"))
        for point in run["points"]:
            assert point["max_abs_err"] <= TOLERANCE["float16"], (name, point)
            print(name, point["seq_len"], point["extra"].get("timer"), point["latency_ms"])
    mine = runs[backend]
    assert mine["machine"]["gpu_name"], mine["machine"]
    for point in mine["points"]:
        assert point["extra"]["timer"] in ("graph", "events"), point["extra"]
    if file == "cutile_naive.py" and missing_tools() is None:  # compile_cubin: stored per point
        for point in mine["points"]:
            compiled = point["extra"]["resources"]
            assert compiled["error"] == "" and compiled["registers"] > 0, compiled
    smallest = mine["points"][0]
    round_trip = host_round_trip_ms(smallest["seq_len"])
    print(f"{backend} N={smallest['seq_len']}: {smallest['latency_ms']:.4f} ms stored, "
          f"{round_trip:.4f} ms for the copies alone")  # fmt: skip
    assert smallest["latency_ms"] < round_trip, (smallest["latency_ms"], round_trip)


TUNED = [
    # file, backend, needs, combinations the rules leave under the causal mask
    ("cutile_naive.py", "cutile-naive", "cupy", 3),  # tile 32, 64, 128
    ("triton_attention.py", "triton-attention", "triton", 27),  # BLOCK_N <= BLOCK_M, 3 warps
]


@pytest.mark.parametrize(("file", "backend", "needs", "tried"), TUNED, ids=[c[1] for c in TUNED])
def test_autotune_searches_an_examples_declared_knobs_on_the_device(
    script: Callable[..., Any],
    tmp_path: Path,
    seed: int,
    file: str,
    backend: str,
    needs: str,
    tried: int,
) -> None:
    """``--autotune`` on a GPU example: each point times every combination of its tunable
    knobs that its rules allow and runs one of them, still within the dtype's tolerance."""
    pytest.importorskip(needs)
    print(f"seed {seed}")
    db = tmp_path / "runs.db"
    swept = script(
        db, "--plugin", EXAMPLES / file, "sweep", "--backend", backend, *TINY,
        "--mask", "causal", "--seed", str(seed), "--autotune", *FAST_TIMING_ARGS, "--json",
        timeout=600,
    )  # fmt: skip
    assert swept.returncode == 0, swept.stdout + swept.stderr
    ((run,),) = [json.loads(swept.stdout)["runs"]]
    assert run["status"] == "complete", run.get("error")
    for point in run["points"]:
        record = point["extra"]["plugin_tuning"]
        assert record["tried"] == tried == len(record["times_ms"]), record
        assert all(ms > 0 for _, ms in record["times_ms"]), record
        assert record["chosen"].items() <= point["extra"]["plugin_knobs"].items()
        assert point["max_abs_err"] <= TOLERANCE["float16"], point
