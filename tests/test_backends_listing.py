"""`backends` lists every backend in one aligned table, a plugin's longer name included."""

from __future__ import annotations

from pathlib import Path

from workbench.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "numpy_softcap.py"


def test_a_plugins_long_name_keeps_the_availability_column_aligned(capsys) -> None:
    assert main(["--plugin", str(EXAMPLE), "backends"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")]
    assert any(row.startswith("numpy-softcap ") for row in rows), rows
    columns = {row.index(" yes " if " yes " in row else " no ") for row in rows}
    assert len(columns) == 1, rows  # every yes/no starts in the same column
