"""What the user is told about a damaged run database: one line with SQLite's first finding
(its whole report goes to a file beside the copy set aside), how many runs were set aside
with it, and how to get them back."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from urllib.parse import quote

_HEADER = "*** in database main ***"


def findings(text: str) -> list[str]:
    """The problems in a ``quick_check`` report (or an SQLite error), one a line."""
    text = text.removeprefix("quick_check:").strip()
    return [line.strip() for line in text.splitlines() if line.strip() and line.strip() != _HEADER]


def one_line(text: str) -> str:
    """``text`` (a multi-line ``quick_check`` report) as one line: the first problem and how
    many more there are."""
    found = findings(text)
    if not found:
        return text.strip()
    if len(found) == 1:
        return found[0]
    return f"SQLite's check found {len(found)} problems; the first: {found[0]}"


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{quote(str(path.absolute()))}?mode=ro&immutable=1", uri=True)


def count_runs(path: Path) -> tuple[int, bool] | None:
    """How many runs the damaged file at ``path`` still lists, and whether that is all of
    them (``count(*)`` read through) or those its ids still find (a damaged page hides some);
    None where it cannot say."""
    try:
        conn = _read_only(path)
        try:
            try:
                return int(conn.execute("SELECT count(*) FROM runs").fetchone()[0]), True
            except sqlite3.DatabaseError:
                last = conn.execute("SELECT max(id) FROM runs").fetchone()[0] or 0
            found = 0
            for run_id in range(1, last + 1):
                with contextlib.suppress(sqlite3.DatabaseError):
                    found += (
                        conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone()
                        is not None
                    )
            return found, False
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return None


def write_report(path: Path, report: Path, fallback: str) -> Path | None:
    """SQLite's whole check of the file at ``path`` in ``report``; None where it cannot be
    written (the one line still says the first problem)."""
    try:
        conn = _read_only(path)
        try:
            rows = [row[0] for row in conn.execute("PRAGMA quick_check(1000)")]
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        rows = [fallback]
    try:
        report.write_text("\n".join(rows) + "\n", encoding="utf-8")
    except OSError:
        return None
    return report


def refusal(path: Path, problem: str) -> str:
    """One line for a reader that may not set the damaged file at ``path`` aside."""
    return (
        f"{path} is a damaged run database ({problem}; all of it: sqlite3 {path} "
        "'PRAGMA quick_check'); nothing was changed: `fmha-workbench sweep` or the window "
        "moves it aside and starts a fresh one"
    )


def set_aside_notice(original: Path, moved: Path, problem: str) -> str:
    """One line: the damage, the runs set aside and where, and how to get them back."""
    counted = count_runs(moved)
    if counted is None:
        runs = "its runs"
    else:
        count, whole = counted
        plural = "s" if count != 1 else ""
        runs = (
            f"its {count:,} run{plural}"
            if whole
            else f"the {count:,} run{plural} it can still read"
        )
    # Not named like the copy (runs.db.damaged-*), which tools and people look for by name.
    stamp = moved.name.rpartition(".damaged-")[2]
    report = write_report(moved, moved.with_name(f"{original.name}.check-{stamp}.txt"), problem)
    details = f" (SQLite's whole report: {report})" if report else ""
    return (
        f"The database {original} was damaged ({one_line(problem)}); it was moved to {moved} "
        f"with {runs}{details} and a fresh database was started. To get back every run it can "
        f"still read: fmha-workbench import {moved} --db {original} (sqlite3's .recover may "
        "save more)"
    )
