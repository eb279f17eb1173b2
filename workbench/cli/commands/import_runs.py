"""``fmha-workbench import``: runs from another machine's database into this one, each once.
(The module is not named ``import``: that is Python's keyword.)"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from workbench.cli.common_flags import add_db, add_json
from workbench.cli.database import db_of, open_db
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.output import emit_json

NAME = "import"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="copy another run database's runs (with their groups, points and block maps) into "
        "this one; runs already here are skipped, each keeps its machine",
    )
    p.add_argument("source", metavar="OTHER.db", help="the run database to copy runs from")
    add_db(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from workbench.store.importer import check_source, import_runs

    source = Path(args.source).expanduser()
    check_source(source)  # refused before this database is made or opened
    with open_db(db_of(args)) as store:
        result = import_runs(store, source)
    if args.json:
        emit_json({"source": str(source), "added": list(result.added), "skipped": result.skipped})
    else:
        print(result.line())
    return EXIT_OK
