"""The cuTile and Triton examples (issue 55, item 5) where no GPU is: each loads, its
declaration is accepted, `knobs` lists its knobs, a sweep on it is refused in the plugin's one
line (exit 2, nothing written), and without its compiler's module it says which one is missing.
The cuTile example's kernel compiles offline for sm_90 in tests/test_plugin_resources.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAST_TIMING_ARGS

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CUTILE = EXAMPLES / "cutile_naive.py"
TRITON = EXAMPLES / "triton_attention.py"
KNOBS = {
    "cutile-naive": (CUTILE, {"tile": (64, [32, 64, 128])}),
    "triton-attention": (
        TRITON,
        {
            "BLOCK_M": (64, [32, 64, 128]),
            "BLOCK_N": (64, [16, 32, 64, 128]),
            "num_warps": (4, [2, 4, 8]),
            "num_stages": (2, [1, 2, 3, 4]),
        },
    ),
}


def usable(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("backend", KNOBS)
def test_each_example_lists_its_knobs_and_refuses_a_sweep_in_one_line_without_a_gpu(
    script: Callable[..., Any], tmp_path: Path, backend: str
) -> None:
    path, expected = KNOBS[backend]
    db = tmp_path / "runs.db"
    listed = script(db, "--plugin", path, "knobs", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["knob"]: r for r in json.loads(listed.stdout)["plugin_knobs"]}
    assert {k: (r["default"], r["values"]) for k, r in rows.items()} == expected
    assert {r["backend"] for r in rows.values()} == {backend}
    assert {r["plugin_path"] for r in rows.values()} == {str(path)}
    table = script(db, "--plugin", path, "knobs")
    listed_rows = [line.split()[:2] for line in table.stdout.splitlines() if line.strip()]
    assert all([backend, name] in listed_rows for name in expected), table.stdout
    # Which of them --autotune chooses: the speed-only ones (Triton keeps num_stages yours).
    tuned = {r["knob"] for r in rows.values() if r["tunable"]}
    assert tuned == set(expected) - {"num_stages"}
    marked = {line.split()[1] for line in table.stdout.splitlines() if line.endswith("tunes it")}
    assert marked == tuned, table.stdout

    statuses = json.loads(script(db, "--plugin", path, "backends", "--json").stdout)
    status = statuses[backend]
    if status["available"]:
        pytest.skip(f"{backend} runs here ({status['reason']}): the GPU test covers it")
    swept = script(
        db, "--plugin", path, "sweep", "--backend", backend, "--head-dim", "64",
        "--seq-lens", "128", *FAST_TIMING_ARGS,
    )  # fmt: skip
    assert swept.returncode == 2, swept.stdout + swept.stderr
    assert swept.stderr.splitlines() == [
        f"error: --backend {backend}: not available: {status['reason']}"
    ]
    assert "Traceback" not in swept.stderr and not db.exists()


MISSING = {
    "cutile-naive": (CUTILE, "cuda.tile", "cuda.tile is not installed"),
    "triton-attention": (TRITON, "triton", "triton is not installed"),
}


@pytest.mark.parametrize("backend", MISSING)
def test_without_its_compiler_an_example_loads_and_names_the_missing_module(
    python_facts: Callable[..., dict[str, Any]], backend: str
) -> None:
    """In a fresh interpreter where the module cannot be imported (even where it is
    installed): the declaration is accepted and the backend says what to install."""
    path, module, words = MISSING[backend]
    facts = python_facts(
        f"""
import json, sys
sys.modules[{module!r}] = None  # as if it were not installed
from workbench.backends.plugins import file_declarations
(declared,) = file_declarations({str(path)!r})
status = declared.probe()
print(json.dumps({{"name": declared.name, "available": status.available,
                   "reason": status.reason, "knobs": [k.name for k in declared.knobs]}}))
"""
    )
    assert facts["name"] == backend and not facts["available"]
    assert facts["reason"].startswith(words) and "pip install" in facts["reason"]
    assert facts["knobs"] == list(KNOBS[backend][1])


def test_the_triton_examples_rule_refuses_a_block_n_above_block_m_under_the_causal_mask() -> None:
    from workbench.backends.declaration import knob_violation
    from workbench.backends.plugins import file_declarations

    (declared,) = file_declarations(str(TRITON))
    refused = knob_violation(declared, {"BLOCK_M": 32, "BLOCK_N": 64}, "causal")
    assert refused is not None and refused.field == "BLOCK_N"
    assert "BLOCK_N <= BLOCK_M (32)" in refused.reason
    assert knob_violation(declared, {"BLOCK_M": 32, "BLOCK_N": 64}, "none") is None
    assert knob_violation(declared, {"BLOCK_M": 128, "BLOCK_N": 64}, "causal") is None
