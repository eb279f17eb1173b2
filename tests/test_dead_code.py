"""No dead code: vulture finds nothing unused in the production code beyond the reviewed
allow-list (tests/vulture_allow.py, each entry with its reason)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_vulture_finds_no_dead_code() -> None:
    done = subprocess.run(
        [
            sys.executable, "-m", "vulture", "kernels", "workbench", "bench", "scripts",
            "tests/vulture_allow.py", "--min-confidence", "60",
        ],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert "No module named vulture" not in done.stderr, "vulture is a test dependency"
    assert done.returncode == 0, "unused code:\n" + done.stdout + done.stderr
