"""The end of every run lists skips by reason and the wall time; under CI a skip for a tool the
project installs fails the run (tests/skip_summary.py), in a real second pytest process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SKIPPING_TESTS = """
import pytest

def test_reads_sass():
    pytest.skip("nvdisasm is not installed (nvidia-cuda-nvdisasm)")

def test_needs_torch():
    pytest.skip("torch with CUDA is not installed")

def test_also_needs_torch():
    pytest.skip("torch with CUDA is not installed")

@pytest.mark.gpu
def test_on_the_gpu():
    pytest.skip("cuda.tile is not importable: no GPU")

def test_runs():
    assert 1 + 1 == 2
"""


def _pytest(folder: Path, ci: str | None, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(ROOT)
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.skip_summary", "-p", "no:cacheprovider",
         "--rootdir", str(folder), "-q", *argv, str(folder)],
        capture_output=True, text=True, env=env, cwd=folder, timeout=120, check=False,
    )  # fmt: skip


def test_every_run_ends_with_its_skips_by_reason_and_its_wall_time(tmp_path: Path) -> None:
    (tmp_path / "test_some.py").write_text(SKIPPING_TESTS)
    done = _pytest(tmp_path, None, "-m", "gpu or not gpu")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.split("skips by reason: 4", 1)[1]
    assert "   2  torch with CUDA is not installed" in summary
    assert "   1  nvdisasm is not installed (nvidia-cuda-nvdisasm)" in summary
    assert "suite wall time: " in summary and "FAILED under CI" not in summary


def test_under_ci_a_missing_project_tool_fails_the_run_but_a_missing_gpu_does_not(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_some.py").write_text(SKIPPING_TESTS)
    done = _pytest(tmp_path, "true")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED under CI: 1 skipped for a tool the project installs" in done.stdout
    assert "test_some.py::test_reads_sass: nvdisasm is not installed" in done.stdout
    assert "test_on_the_gpu:" not in done.stdout.split("FAILED under CI", 1)[1]
    # Without the tool skip, the same run under CI passes: torch and the GPU are not installed.
    (tmp_path / "test_some.py").write_text(
        SKIPPING_TESTS.replace("nvdisasm is not installed (nvidia-cuda-nvdisasm)", "no ncu")
    )
    assert _pytest(tmp_path, "true").returncode == 0


def test_under_ci_a_module_skipped_at_import_for_a_project_tool_fails_the_run(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_compiles.py").write_text(
        "import pytest\n"
        "pytest.importorskip('cuda.tile_absent_module', reason='cuda-tile is not installed')\n"
        "def test_compiles():\n    pass\n"
    )
    done = _pytest(tmp_path, "true")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_compiles.py: cuda-tile is not installed" in done.stdout
    assert _pytest(tmp_path, None).returncode == 5  # outside CI: skipped, nothing ran
