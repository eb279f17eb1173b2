"""``import`` through a symlink reads what a writer holding the real file has committed: the
-wal lies beside the real file, not beside the link, so the importer must look there before
it decides the source has no writer (and would read it immutable, stale)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.store import Store

H200_DB = Path(__file__).resolve().parents[1] / "bench" / "results" / "h200.db"

# A second process imports the runs of h200.db into the real file and keeps it open, its
# commits still in the -wal (no checkpoint), until told to go.
WRITER = textwrap.dedent(
    """
    import sys
    from workbench.importer import import_runs
    from workbench.store import Store

    store = Store(sys.argv[1])
    store.db.conn.execute("PRAGMA wal_autocheckpoint = 0")
    import_runs(store, sys.argv[2])
    print("ready", flush=True)
    sys.stdin.readline()
    store.close()
    """
)


def test_import_through_a_symlink_copies_what_a_writer_with_the_real_file_open_committed(
    run_cli: Callable[..., Any], tmp_path: Path
) -> None:
    real = tmp_path / "real" / "theirs.db"
    real.parent.mkdir()
    Store(real).close()
    link = tmp_path / "theirs-link.db"
    link.symlink_to(real)
    ours = tmp_path / "ours.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(real), str(H200_DB)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        assert Path(f"{real}-wal").stat().st_size > 0  # the runs are in the -wal only
        done = run_cli("import", link, "--db", ours, "--json")
    finally:
        writer.communicate("go\n", timeout=30)
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
