"""Issue #51 item 13: input that was accepted and ignored is refused in one line, exit 2,
with nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAST_TIMING_ARGS


@pytest.mark.parametrize("window", ["-1", "5"])
def test_a_ladder_window_without_mask_window_is_refused(
    run_cli: Any, tmp_path: Path, window: str
) -> None:
    db = tmp_path / "ladder.db"
    result = run_cli("ladder", "--db", db, "--backend", "reference", "--window", window)
    assert result.code == 2 and not result.out
    assert result.err.strip() == (
        f"error: --window {window}: a window size needs --mask window; give that mask or no size"
    )
    assert not db.exists()


def test_a_ladder_window_with_mask_window_is_checked_as_a_window(
    run_cli: Any, tmp_path: Path
) -> None:
    db = tmp_path / "ladder.db"
    argv = ["ladder", "--db", db, "--backend", "reference", "--mask", "window"]
    result = run_cli(*argv, "--window", "-1")
    assert result.code == 2 and "--window -1: expected at least 1" in result.err
    assert len(result.err.splitlines()) == 1 and not db.exists()


def test_a_report_subject_a_ladder_does_not_have_is_refused(run_cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "ladder.db"
    ladder = ["ladder", "--db", db, "--backend", "reference", "--seq-lens", "16"]
    made = run_cli(*ladder, "--heads", "1", "--head-dim", "32", *FAST_TIMING_ARGS, "--json")
    assert made.code in (0, 1), made.err
    before = db.read_bytes()
    result = run_cli("report", "--db", db, "--group", "1", "--subject", "bogus")
    assert result.code == 2 and not result.out
    line = result.err.strip()
    assert line.startswith("error: --subject bogus: group 1 is a ladder of reference"), line
    assert len(result.err.splitlines()) == 1
    assert db.read_bytes() == before
    # The ladder's own backend is no bad input: the report is shown as before.
    assert run_cli("report", "--db", db, "--group", "1", "--subject", "reference").code == 0


def test_a_sweep_into_a_missing_folder_is_refused_and_makes_no_folder(
    run_cli: Any, tmp_path: Path
) -> None:
    target = tmp_path / "missing" / "dir" / "x.db"
    result = run_cli("sweep", "--db", target, "--seq-lens", "16", *FAST_TIMING_ARGS)
    assert result.code == 2 and not result.out
    assert result.err.strip() == (
        f"error: --db {target}: the folder {target.parent} does not exist; create it first "
        f"(mkdir -p {target.parent}) or give another path"
    )
    assert not (tmp_path / "missing").exists()
