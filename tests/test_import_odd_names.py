"""`import` reads a database whose file name holds URI characters (?, #, %) as the file it is."""

from __future__ import annotations

import shutil
from pathlib import Path

from workbench.cli import main
from workbench.store import Store

SOURCE = Path(__file__).resolve().parents[1] / "bench" / "results" / "h200.db"


def test_a_source_named_with_uri_characters_imports_every_run(tmp_path: Path, capsys) -> None:
    odd = tmp_path / "runs?from=#other%20box.db"
    shutil.copy(SOURCE, odd)
    with Store(SOURCE, read_only=True) as source:
        expected = len(source.runs())
    target = tmp_path / "mine.db"
    assert main(["import", str(odd), "--db", str(target)]) == 0, capsys.readouterr().err
    with Store(target, read_only=True) as store:
        assert len(store.runs()) == expected > 0
