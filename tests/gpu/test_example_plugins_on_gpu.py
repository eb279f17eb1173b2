"""The cuTile and Triton example plugins on the GPU (issue 55, item 5): each runs as a user
runs it, `--plugin examples/X.py sweep --backends X,reference`, on a small ragged GQA problem
at several of its knob values, and every point's max error against float64 attention is within
the dtype's tolerance, as the reference's is. Fresh random inputs from the printed seed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAST_TIMING_ARGS
from workbench.measure.accuracy import TOLERANCE

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CASES = [
    ("cutile_naive.py", "cutile-naive", "cupy", "causal", ["tile=64"]),
    ("cutile_naive.py", "cutile-naive", "cupy", "window", ["tile=32"]),
    ("cutile_naive.py", "cutile-naive", "cupy", "none", ["tile=128"]),
    ("triton_attention.py", "triton-attention", "triton", "causal", ["BLOCK_M=128", "BLOCK_N=64"]),
    ("triton_attention.py", "triton-attention", "triton", "none", ["BLOCK_M=64", "BLOCK_N=128"]),
]


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
    settings = [word for knob in knobs for word in ("--plugin-knob", knob)]
    swept = script(
        db, "--plugin", EXAMPLES / file, "sweep", "--backends", f"{backend},reference",
        "--batch", "2", "--heads", "4", "--kv-heads", "2", "--head-dim", "64",
        "--seq-lens", "256,1000", "--mask", mask, *window, "--seed", str(seed),
        *settings, *FAST_TIMING_ARGS, "--json",
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
        assert mine["machine"]["plugin_knobs"][name] == int(value)
