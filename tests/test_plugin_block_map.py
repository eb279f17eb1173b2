"""A plugin's block map is its own report (issue 55 item 2): ``declare(..., block_map=...)``
says which blocks it computed; each point stores that report, and ``show``, ``blockmap
--backend``, the CSV say "reported by the plugin"; a plugin without one says its map is the
tile schedule's model; a wrong report is one line naming the file and the field, nothing
stored."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import FAST_TIMING_ARGS, subprocess_env

ROOT = Path(__file__).resolve().parents[1]
NUMPY_EXAMPLE = ROOT / "examples" / "numpy_softcap.py"
SMALL = ["--heads", "2", "--head-dim", "32", *FAST_TIMING_ARGS]


pytestmark = pytest.mark.usefixtures("no_plugins_left")


def workbench(db: Path, *argv: Any) -> subprocess.CompletedProcess[str]:
    """``python -m workbench ARGV`` from this checkout, as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", "workbench", *map(str, argv)],
        capture_output=True, text=True, cwd=ROOT, env=subprocess_env(db), timeout=180,
        check=False,
    )  # fmt: skip


def visible_kinds(
    q_len: int, k_len: int, block: int, mask: str, input_pos: int = 0, window: int | None = None
) -> np.ndarray:
    """The map a plugin that skips wholly hidden blocks must store, from every (row, key) pair
    (no schedule): 0 skipped, 1 computed, 2 computed with pairs the mask hides or with keys
    past k_len (a ragged last key block; a ragged last row block has no padding rows)."""
    from kernels.schedule import visible_block

    seen = visible_block(np.arange(q_len), range(k_len), mask, input_pos, window)
    rows, cols = -(-q_len // block), -(-k_len // block)
    kinds = np.zeros((rows, cols), dtype=np.int8)
    for r in range(rows):
        for c in range(cols):
            cell = seen[r * block : (r + 1) * block, c * block : (c + 1) * block]
            whole = cell.shape[1] == block and cell.all()
            kinds[r, c] = 0 if not cell.any() else (1 if whole else 2)
    return kinds


def test_the_numpy_examples_reported_map_is_stored_shown_drawn_and_exported(
    tmp_path: Path,
) -> None:
    from workbench.store import Store

    db = tmp_path / "runs.db"
    swept = workbench(
        db, "--plugin", NUMPY_EXAMPLE, "sweep", "--backends", "numpy-softcap,reference",
        *SMALL, "--seq-lens", "200,256", "--mask", "causal", "--plugin-knob", "chunk_rows=32",
        "--json",
    )  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    runs = {r["backend"]: r for r in json.loads(swept.stdout)["runs"]}
    plugin, reference = runs["numpy-softcap"], runs["reference"]
    assert plugin["status"] == "complete", plugin
    with Store(db) as store:
        for n in (200, 256):
            # In the plugin's 32-row chunks: the schedule's model at the kernel's 64x64 tiles
            # would be another shape.
            expected = visible_kinds(n, n, 32, "causal")
            assert expected[0, -1] == 0  # the map has skipped blocks to tell apart
            np.testing.assert_array_equal(store.block_map(plugin["id"], n), expected)
    for point in plugin["points"]:
        assert point["extra"]["block_map_source"] == "plugin"
        assert point["extra"]["block_map_tiles"] == [32, 32]
        assert point["rel_err"] < 1e-2  # skipping the hidden blocks left the output right

    shown = workbench(db, "show", plugin["id"])
    assert shown.returncode == 0, shown.stderr
    assert "  blocks   reported by the plugin, blocks of 32×32" in shown.stdout.splitlines()
    # The plugin's run has no % of roofline for the CPU it ran on, named as its own backend.
    assert "the run ran on the CPU (numpy-softcap backend)" in shown.stdout
    # Nor is it handed to Nsight Compute: one line, whether or not ncu is installed.
    profiled = workbench(db, "profile", plugin["id"], "--seq-len", "256")
    assert profiled.returncode == 2 and profiled.stderr.strip() == (
        f"error: cannot profile: run {plugin['id']} ran on the CPU (numpy-softcap backend): "
        "Nsight Compute profiles GPU runs"
    )
    other = workbench(db, "show", reference["id"]).stdout.splitlines()
    assert not [line for line in other if line.startswith("  blocks ")]  # it walks its schedule

    drawn = workbench(
        db, "--plugin", NUMPY_EXAMPLE, "blockmap", "--backend", "numpy-softcap", "--q-len",
        "256", "--mask", "causal", "--plugin-knob", "chunk_rows=64",
    )  # fmt: skip
    assert drawn.returncode == 0, drawn.stderr
    lines = drawn.stdout.splitlines()
    assert (
        lines[0]
        == "numpy-softcap softcap=0.0 chunk_rows=64: reported by the plugin, blocks of 64×64"
    )
    assert lines[1] == "4×4 blocks: 6 computed, 4 masked, 6 skipped (37.5 % skipped)"
    assert lines[2:6] == ["m...", "#m..", "##m.", "###m"]
    as_json = workbench(
        db, "--plugin", NUMPY_EXAMPLE, "blockmap", "--backend", "numpy-softcap", "--q-len",
        "200", "--mask", "causal", "--plugin-knob", "chunk_rows=64", "--json",
    )  # fmt: skip
    data = json.loads(as_json.stdout)
    assert data["source"] == "plugin" and (data["block_rows"], data["block_keys"]) == (64, 64)
    assert data["map"] == visible_kinds(200, 200, 64, "causal").tolist()

    exported = workbench(db, "export", "--csv", "-")
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert {(r["backend"], r["block_map_source"]) for r in rows} == {
        ("numpy-softcap", "plugin"),
        ("reference", ""),
    }


def test_the_numpy_examples_launch_never_reads_the_blocks_it_reports_skipped(
    rng: np.random.Generator,
) -> None:
    """For each chunk of query rows, K and V of the key blocks its report skips are NaN: a
    launch that still multiplied them would write NaN there; the rows stay float64-right."""
    from kernels.reference import masked_softmax_product
    from kernels.schedule import visible_block
    from workbench.backends.plugins import file_declarations
    from workbench.config import KernelConfig, Problem

    (declared,) = file_declarations(str(NUMPY_EXAMPLE))
    plugin = declared.factory
    chunk = int(rng.choice([32, 64]))
    # At least three chunks of rows, each of the first two behind the keys of a later one, so
    # causal skips some key block at every draw (the draws once made a chunked prefill whose
    # chunks all saw every key block: nothing to prove).
    q_len = int(rng.integers(3 * chunk, 4 * chunk))
    input_pos = int(rng.integers(0, chunk))
    k_len = q_len + input_pos
    print(f"chunk {chunk}, q_len {q_len}, input_pos {input_pos}")
    knobs = {"softcap": 0.0, "chunk_rows": chunk}
    for mask, window in (("causal", None), ("window", int(rng.integers(20, 80)))):
        problem = Problem(
            batch=1, heads=2, kv_heads=1, head_dim=32, q_len=q_len, k_len=k_len,
            input_pos=input_pos,
        )  # fmt: skip
        config = KernelConfig(mask=mask, window=window)
        report = plugin.block_map(problem, config, knobs)
        computed = np.asarray(report.computed)
        assert (report.rows, report.keys) == (chunk, chunk)
        expected = visible_kinds(q_len, k_len, chunk, mask, input_pos, window)
        np.testing.assert_array_equal(computed > 0, expected > 0)
        assert (computed == 0).any(), "nothing skipped: the check below would prove nothing"
        q = rng.standard_normal((1, 2, q_len, 32), dtype=np.float32)
        k, v = (rng.standard_normal((1, 1, k_len, 32), dtype=np.float32) for _ in range(2))
        for q_block in range(computed.shape[0]):
            rows = np.arange(q_block * chunk, min((q_block + 1) * chunk, q_len))
            poisoned_k, poisoned_v = k.copy(), v.copy()
            for k_block in np.flatnonzero(computed[q_block] == 0):
                keys = slice(k_block * chunk, (k_block + 1) * chunk)
                poisoned_k[..., keys, :] = np.nan
                poisoned_v[..., keys, :] = np.nan
            launch = plugin.prepare(
                q, poisoned_k, poisoned_v, problem=problem, config=config, knobs=knobs
            )
            out, _ = launch()
            seen = visible_block(rows, range(k_len), mask, input_pos, window)
            for head in range(2):
                scores = (q[0, head, rows].astype(np.float64) @ k[0, 0].T) / np.sqrt(32)
                want = masked_softmax_product(scores, seen, v[0, 0].astype(np.float64))
                np.testing.assert_allclose(out[0, head, rows], want, atol=2e-4, rtol=1e-3)


def test_a_plugin_without_a_report_says_its_map_is_the_schedules_model(tmp_path: Path) -> None:
    unreported = tmp_path / "unreported.py"
    text = NUMPY_EXAMPLE.read_text()
    assert "        block_map=block_map,\n" in text
    unreported.write_text(
        text.replace("        block_map=block_map,\n", "").replace('"numpy-softcap"', '"plain"')
    )
    db = tmp_path / "runs.db"
    swept = workbench(
        db, "--plugin", unreported, "sweep", "--backend", "plain", *SMALL, "--seq-lens", "128",
        "--mask", "causal", "--json",
    )  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    (run,) = json.loads(swept.stdout)["runs"]
    assert run["points"][0]["extra"]["block_map_source"] == "schedule"
    shown = workbench(db, "show", run["id"]).stdout.splitlines()
    assert "  blocks   the tile schedule's model (the plugin reports none)" in shown
    drawn = workbench(
        db, "--plugin", unreported, "blockmap", "--backend", "plain", "--q-len", "128",
        "--mask", "causal",
    )  # fmt: skip
    assert drawn.returncode == 0, drawn.stderr
    assert drawn.stdout.splitlines()[0] == (
        "plain reports no block map (declare block_map= for one): this is the tile "
        "schedule's model, not what the plugin computed"
    )


GRID = "np.ones((-(-p.q_len // 64), -(-p.k_len // 64)), dtype=np.int32)"
BAD_REPORTS = {
    "not a BlockReport": (f"lambda p, c, k: {GRID}", "returned a ndarray; expected"),
    "not callable": ("3", "int is not callable"),
    "a block size of 0": (f"lambda p, c, k: BlockReport(0, 64, {GRID})", "rows=0: expected"),
    "the wrong shape": (
        "lambda p, c, k: BlockReport(64, 64, np.ones((1, 1), dtype=np.int32))",
        "computed: 1×1 blocks for q_len 256, k_len 256 at 64×64; expected 4×4",
    ),
    "a negative count": (
        f"lambda p, c, k: BlockReport(64, 64, -{GRID})",
        "computed: a negative count (-1) at q-block 0, k-block 0",
    ),
    "fractional counts": (
        f"lambda p, c, k: BlockReport(64, 64, {GRID} * 0.5)",
        "computed: float64 values; expected counts (integers) or booleans",
    ),
    "one that raises": (
        "lambda p, c, k: 1 / 0",
        "raised ZeroDivisionError: division by zero on a trial problem",
    ),
    # Right on the trial problems, wrong at a length of the sweep: refused before it starts.
    "wrong at one length": (
        f"lambda p, c, k: BlockReport(64, 64, {GRID}[: 3 if p.q_len == 1024 else None])",
        "computed: 3×16 blocks for q_len 1024, k_len 1024 at 64×64; expected 16×16",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_REPORTS))
def test_a_wrong_block_map_is_one_line_naming_the_file_and_the_field_and_nothing_is_stored(
    case: str, run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    call, reason = BAD_REPORTS[case]
    path = tmp_path / "bad_blocks.py"
    path.write_text(
        textwrap.dedent(
            f"""
            import numpy as np
            from workbench.backends import BlockReport, declare

            def attention(q, k, v, *, problem, config, knobs):
                return q

            BACKENDS = (declare("mine", "mine", attention, block_map={call}),)
            """
        )
    )
    db = tmp_path / "runs.db"
    result = run_cli(
        "--plugin", path, "sweep", "--db", db, "--backend", "mine", *SMALL,
        "--seq-lens", "64,1024",
    )  # fmt: skip
    assert result.code == 2, result.err
    (line,) = result.err_lines
    assert line.startswith(f"error: {path}: block_map: "), line
    assert reason in line, line
    assert not db.exists()  # nothing written


def test_a_report_of_booleans_or_counts_is_stored_as_the_three_kinds() -> None:
    """A kernel that computes every block under a causal mask: the blocks above the diagonal
    are stored masked (computed, then thrown away), never skipped; a count above 1 is kept as
    how many blocks were computed more than once."""
    from workbench.backends import BlockReport
    from workbench.backends.plugin_blocks import reported_map
    from workbench.config import KernelConfig, Problem

    problem = Problem(heads=1, head_dim=32, q_len=100, k_len=100)
    config = KernelConfig(mask="causal")
    every = np.ones((4, 4), dtype=bool)
    found = reported_map(lambda p, c, k: BlockReport(32, 32, every), problem, config, {}, "f.py")
    # 100 keys in blocks of 32: the last key block is ragged, so masked wherever computed.
    expected = np.array([[2, 2, 2, 2], [1, 2, 2, 2], [1, 1, 2, 2], [1, 1, 1, 2]], dtype=np.int8)
    np.testing.assert_array_equal(found.grid, expected)
    assert found.extra == {"block_map_source": "plugin", "block_map_tiles": [32, 32]}
    twice = np.tril(np.ones((4, 4), dtype=np.int64)) * 2
    again = reported_map(lambda p, c, k: BlockReport(32, 32, twice), problem, config, {}, "f.py")
    np.testing.assert_array_equal(again.grid, np.where(twice > 0, expected, 0))
    assert again.extra["block_map_repeated"] == 10
