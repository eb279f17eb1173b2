"""``import`` through a symlink reads what a writer holding the real file has committed: the
-wal lies beside the real file, not beside the link, so the importer must look there before
it decides the source has no writer (and would read it immutable, stale)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.wal_writer import writer_holding
from workbench.store import Store


def test_import_through_a_symlink_copies_what_a_writer_with_the_real_file_open_committed(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    real = tmp_path / "real" / "theirs.db"
    real.parent.mkdir()
    Store(real).close()
    link = tmp_path / "theirs-link.db"
    link.symlink_to(real)
    ours = tmp_path / "ours.db"
    with writer_holding(real):
        done = run_cli("import", link, "--db", ours, "--json")
    assert done.code == 0, done.err
    with Store(real, read_only=True) as theirs:
        committed = sorted((r.label, r.created_at, r.backend) for r in theirs.runs())
    assert len(committed) == 16
    assert len(json.loads(done.out)["added"]) == 16
    with Store(ours, read_only=True) as store:
        assert sorted((r.label, r.created_at, r.backend) for r in store.runs()) == committed
    # Reading the source through its link leaves the link a link, with nothing beside it.
    assert link.is_symlink()
    assert not Path(f"{link}-wal").exists() and not Path(f"{link}-shm").exists()
