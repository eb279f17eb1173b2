"""What a run database is, one rule for every reader: the store opening a file, ``import``
reading another one, ``export`` refusing to overwrite one.

An SQLite file is a run database when it has a schema version (``PRAGMA user_version`` 1 or
more: every workbench has set one) and the ``runs`` and ``points`` tables with the columns the
first schema gave them; an SQLite file with no tables and version 0 is empty, which a writer
may start its schema in. Anything else is another application's file, refused untouched.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

# The columns every run database has had since its first schema (store._migration_1's).
REQUIRED_COLUMNS: Mapping[str, frozenset[str]] = {
    "runs": frozenset({"id", "status", "backend", "problem", "config", "seq_lens", "created_at"}),
    "points": frozenset({"id", "run_id", "seq_len"}),
}


def foreign_reason(
    tables: set[str] | Mapping[str, set[str]], version: int, *, columns_known: bool = False
) -> str | None:
    """Why a file of these ``tables`` (names, or names with their columns where
    ``columns_known``) at schema ``version`` is not a run database; None when it is one, or is
    an empty SQLite file."""
    names = set(tables)
    if not names and version == 0:
        return None
    shown = ", ".join(sorted(names)[:5]) or "none"
    other = f"an SQLite database of another application (its tables: {shown})"
    if version == 0 or not set(REQUIRED_COLUMNS) <= names:
        return other
    if columns_known and isinstance(tables, Mapping):
        for table, needed in REQUIRED_COLUMNS.items():
            missing = sorted(needed - set(tables[table]))
            if missing:
                return f"{other}: its {table} table has no {', '.join(missing)} column"
    return None


def tables_and_columns(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Each of the file's own tables with its column names."""
    names = [
        row[0]
        for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if not row[0].startswith("sqlite_")
    ]
    return {
        name: {row[0] for row in conn.execute("SELECT name FROM pragma_table_info(?)", (name,))}
        for name in names
    }
