"""The log-sum-exp a plugin returns is checked against float64 at every point (issue 55 item 1,
"optionally the log-sum-exp"): the NumPy example's matches under every mask with its soft cap
on; one in the wrong base, or of the wrong shape, ends the run failed with a one-line reason
naming the file, though its output is right."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAST_TIMING_ARGS

pytestmark = pytest.mark.usefixtures("no_plugins_left")

ROOT = Path(__file__).resolve().parents[1]
NUMPY_EXAMPLE = ROOT / "examples" / "numpy_softcap.py"
SMALL = ["--heads", "2", "--kv-heads", "1", "--head-dim", "32", *FAST_TIMING_ARGS]

PLUGIN = """
import numpy as np

from workbench.backends import declare


def attention(q, k, v, *, problem, config, knobs):
    scores = (q @ np.repeat(k, q.shape[1] // k.shape[1], axis=1).swapaxes(-1, -2))
    scores = scores / np.sqrt(q.shape[-1])
    top = scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores - top)
    total = weights.sum(axis=-1, keepdims=True)
    out = (weights / total) @ np.repeat(v, q.shape[1] // v.shape[1], axis=1)
    lse = (top + np.log(total))[..., 0]
    return out, {lse}


BACKENDS = (declare("lse", "returns its log-sum-exp", attention),)
"""


@pytest.mark.parametrize("mask", ["none", "causal", "window"])
def test_the_numpy_examples_log_sum_exp_matches_float64_under_each_mask(
    run_cli: Callable[..., Any], tmp_path: Path, mask: str
) -> None:
    db = tmp_path / "runs.db"
    window = ["--window", "50"] if mask == "window" else []
    swept = run_cli(
        "--plugin", NUMPY_EXAMPLE, "sweep", "--db", db, "--backend", "numpy-softcap", *SMALL,
        "--seq-lens", "100,257", "--mask", mask, *window, "--plugin-knob", "softcap=20",
    )  # fmt: skip
    assert swept.code == 0, swept.err
    points = json.loads(run_cli("show", "1", "--db", db, "--json").out)["points"]
    assert [p["extra"]["returned_lse"] for p in points] == [True, True]
    assert all(p["extra"]["lse_max_abs_err"] < 1e-3 for p in points), points


@pytest.mark.parametrize(
    ("lse", "said"),
    [
        ("lse / np.log(2.0)", "the log-sum-exp it returned is off by"),  # log2, not ln
        ("lse[:, :, :-1]", "the log-sum-exp it returned has shape (1, 2, 63), not (1, 2, 64)"),
    ],
    ids=["wrong-base", "wrong-shape"],
)
def test_a_wrong_log_sum_exp_fails_the_run_in_one_line_naming_the_file(
    run_cli: Callable[..., Any], tmp_path: Path, lse: str, said: str
) -> None:
    path = tmp_path / "lse_plugin.py"
    path.write_text(textwrap.dedent(PLUGIN.format(lse=lse)))
    db = tmp_path / "runs.db"
    swept = run_cli(
        "--plugin", path, "sweep", "--db", db, "--backend", "lse", *SMALL, "--seq-lens", "64",
        "--mask", "none",
    )  # fmt: skip
    assert swept.code == 1, swept.err
    (run,) = json.loads(run_cli("runs", "--db", db, "--json").out)
    assert run["status"] == "failed"
    assert run["error"].startswith(f"PluginError: {path}: {said}"), run["error"]
    assert "\n" not in run["error"]
