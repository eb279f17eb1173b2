"""The command's run database: the one ``--db`` of the command line (before or after the
command), checked and opened, with what the user must know about it said on stderr."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.cli.values import UsageError

if TYPE_CHECKING:  # the store (and sqlite-utils) is imported when a command opens it
    from workbench.store import Store


def db_of(args: argparse.Namespace) -> str | None:
    """The one database path of the command line: ``--db`` before or after the command (the
    same path twice is fine, two different ones are refused), else None (the store's default,
    which honours ``FMHA_WORKBENCH_DB``)."""
    before, after = getattr(args, "db", None), getattr(args, "command_db", None)
    for given in (before, after):
        if given is not None and not given.strip():
            raise UsageError("--db: expected a database path, got an empty one")
        if given is not None and "\x00" in given:
            raise UsageError("--db: the path contains a NUL character")
    if before and after and Path(before).expanduser() != Path(after).expanduser():
        raise UsageError(f"--db given twice with different paths ({before!r} and {after!r})")
    return after or before


def open_db(db: str | None, *, create: bool = True) -> Store:
    """The store, with anything the user must know about opening it (a damaged file set aside,
    a newer schema opened read-only) said on stderr. A command that only reads passes
    ``create=False``: a mistyped path is refused rather than made into an empty database."""
    # The catalog tells the config how each backend takes the knobs: what a stored run's
    # config summary and CSV cells say depends on it.
    import workbench.backends.catalog  # noqa: F401
    from workbench.cli.checks import check_db_folder, open_store
    from workbench.store import default_db_path

    path = Path(db).expanduser() if db else default_db_path()
    if not create and not path.exists() and not path.is_symlink():
        raise UsageError(
            f"no run database at {path}; check the path, or start one with "
            f"`fmha-workbench sweep --db {path}`"
        )
    if create:
        check_db_folder(db)
    store = open_store(path, read_only=not create)
    if store.notice:
        print(f"note: {store.notice}", file=sys.stderr)
    return store


def db_path(args: argparse.Namespace) -> Path:
    from workbench.store import default_db_path

    db = db_of(args)
    return Path(db).expanduser() if db else default_db_path()
