"""Issue #51 item 8 for groups: a group on a disk that fills up stops every run failed, with
the reason kept, on a real small file system (tmpfs), as a sweep does."""

from __future__ import annotations

from pathlib import Path

from tests import cpu_peers
from tests.conftest import FAST_TIMING_ARGS
from tests.small_disk import fill, small_filesystem
from workbench.cli import main
from workbench.store import Store

MANY_LENGTHS = ",".join(str(16 * i) for i in range(1, 60))


def test_a_group_that_fills_the_disk_stops_each_run_failed_with_the_reason(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    cpu_peers.register(monkeypatch)
    backends = ["--backends", f"reference,{cpu_peers.NAME}", "--heads", "1", "--head-dim", "32"]
    with small_filesystem(tmp_path / "small", 512) as small:
        db = str(small / "t.db")
        assert main(["sweep", "--db", db, "--seq-lens", "16", *backends, *FAST_TIMING_ARGS]) == 0
        filler = fill(small, leave_bytes=200 * 1024)
        code = main(["sweep", "--db", db, "--seq-lens", MANY_LENGTHS, *backends, *FAST_TIMING_ARGS])
        filler.unlink()
        err = capsys.readouterr().err
        assert code == 1, err  # failed runs, not bad input
        assert "Traceback" not in err
        with Store(db) as store:  # a writer's open: it would mark a dead process's runs
            last_group = max(r.group_id or 0 for r in store.runs())
            runs = [r for r in store.runs() if r.group_id == last_group]
            assert len(runs) == 2
            for run in runs:
                assert run.status == "failed", (run.id, run.status, run.error)
                assert "is full" in (run.error or ""), run.error
                assert len(store.points(run.id)) < len(MANY_LENGTHS.split(","))
