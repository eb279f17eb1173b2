"""A second process that imports h200.db's runs into a database and keeps it open, its commits
still in the -wal (no checkpoint), so a test can read what an open writer has committed."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

H200_DB = Path(__file__).resolve().parents[1] / "bench" / "results" / "h200.db"

WRITER = textwrap.dedent(
    """
    import sys
    from workbench.store.importer import import_runs
    from workbench.store import Store

    store = Store(sys.argv[1])
    store.db.conn.execute("PRAGMA wal_autocheckpoint = 0")
    import_runs(store, sys.argv[2])
    print("ready", flush=True)
    sys.stdin.readline()
    store.close()
    """
)


@contextlib.contextmanager
def writer_holding(real: Path) -> Iterator[None]:
    """While the block runs, another process holds ``real`` open with h200.db's 16 runs
    committed to its -wal only."""
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
        yield
    finally:
        writer.communicate("go\n", timeout=30)
