"""The type checker CI runs (scripts/test.sh: mypy over kernels/ and workbench/, pyproject.toml's
[tool.mypy]) holds the window's helpers to the parts they use: a window without the ladder
panel the job runner drives is refused, the real MainWindow is accepted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

A_WINDOW_WITHOUT_ITS_LADDER = """
from PySide6.QtWidgets import QMainWindow

from workbench.gui.job_runner import JobRunner
from workbench.gui.main_window import MainWindow


class HalfAWindow(QMainWindow):
    def show_status(self, text: str) -> None: ...
    def warn(self, title: str, text: str) -> None: ...
    def error(self, title: str, text: str) -> None: ...


def runners(real: MainWindow) -> None:
    JobRunner(real)
    JobRunner(HalfAWindow())
"""


def test_the_type_checker_refuses_a_window_without_the_parts_the_job_runner_uses(
    tmp_path: Path,
) -> None:
    snippet = tmp_path / "half_a_window.py"
    snippet.write_text(A_WINDOW_WITHOUT_ITS_LADDER)
    # From the repo root, so pyproject.toml's [tool.mypy] and its cache (scripts/test.sh has just
    # filled it) apply; the command line's file replaces the configured ones.
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", str(snippet)],
        capture_output=True, text=True, cwd=ROOT, timeout=600, check=False,
    )  # fmt: skip
    assert "No module named mypy" not in done.stderr, "mypy is a test dependency"
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, done.stdout + done.stderr
    assert f"{snippet.name}:16: error:" in errors[0] and '"HalfAWindow"' in errors[0]
    assert '"JobWindow"' in errors[0]
