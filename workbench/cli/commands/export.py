"""``fmha-workbench export``: points as CSV, one row a point, to a file or stdout."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from workbench.cli.common_flags import add_db
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.values import UsageError, run_id, run_ids

NAME = "export"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(NAME, help="write points as CSV, one row per point")
    p.add_argument("--csv", required=True, metavar="FILE", help="output file ('-' for stdout)")
    p.add_argument("--runs", type=run_ids, help="comma-separated run ids (default: all)")
    p.add_argument("--group", type=run_id, help="every run of a group")
    add_db(p)


def run(args: argparse.Namespace) -> int:
    from workbench.cli.database import db_of, open_db
    from workbench.store import csv_text

    if not args.csv.strip():
        raise UsageError("--csv: expected a file name (or - for stdout), got an empty one")
    with open_db(db_of(args), create=False) as store:
        chosen = list(args.runs or [])
        if args.group is not None:
            chosen += [r.id for r in store.group_runs(args.group)]
            if not chosen:
                raise UsageError(f"group {args.group} has no runs")
        for chosen_id in chosen:
            store.run(chosen_id)  # a missing id is refused before the file is touched
        if args.csv == "-":
            sys.stdout.write(csv_text(list(store.export_rows(chosen or None))))
            return EXIT_OK
        count = store.export_csv(args.csv, chosen or None)
        print(f"wrote {count} row(s) to {args.csv}", file=sys.stderr)
    return EXIT_OK
