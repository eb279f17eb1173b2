"""``fmha-workbench gui`` (and no command at all): open the desktop workbench."""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli.common_flags import add_db
from workbench.cli.values import UsageError

NAME = "gui"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(NAME, help="open the desktop workbench (the default)")
    add_db(p)


def run(args: argparse.Namespace) -> int:
    from workbench.cli.database import db_of

    try:
        from workbench.gui.app import main as gui_main
    except ImportError as exc:
        raise UsageError(
            f"the desktop workbench cannot start ({exc}); install it with "
            "`pip install fmha-workbench` or use a subcommand (see --help)"
        ) from exc
    return gui_main(db_of(args))
