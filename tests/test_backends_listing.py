"""`backends` lists every backend in one aligned table, a plugin's longer name included."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import _console_script, subprocess_env

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "numpy_softcap.py"


def test_a_plugins_long_name_keeps_the_availability_column_aligned(tmp_path: Path) -> None:
    # A process of its own: a plugin loaded stays registered in the process that loaded it.
    done = subprocess.run(
        [_console_script(), "--plugin", str(EXAMPLE), "backends"],
        capture_output=True,
        text=True,
        env=subprocess_env(tmp_path / "r.db"),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if not line.startswith(" ")]
    assert any(row.startswith("numpy-softcap ") for row in rows), rows
    columns = {row.index(" yes " if " yes " in row else " no ") for row in rows}
    assert len(columns) == 1, rows  # every yes/no starts in the same column
