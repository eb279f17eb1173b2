"""``fmha-workbench report``: the performance table of stored groups (what the README
publishes), as text, markdown, JSON, or in place in a README."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from workbench.cli.common_flags import add_db, add_json
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.output import emit_json
from workbench.cli.values import run_id

NAME = "report"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="performance table of stored groups: TFLOP/s and one backend's speed-up over the "
        "others (what the README publishes)",
    )
    p.add_argument(
        "--group", type=run_id, action="append", required=True, help="a group id (repeatable)"
    )
    p.add_argument(
        "--subject", help="the backend whose speed-up is shown (default: cutile, if present)"
    )
    p.add_argument("--markdown", action="store_true", help="a markdown table with its method")
    p.add_argument(
        "--readme",
        metavar="FILE",
        help="replace the generated table between the markers in FILE (e.g. README.md)",
    )
    add_db(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from workbench.cli.checks import check_report_subject
    from workbench.cli.database import db_of, open_db
    from workbench.cli.report_text import print_ladder_report, print_peer_report, update_readme
    from workbench.reports.report import build_report, markdown

    with open_db(db_of(args), create=False) as store:
        check_report_subject(store, args.group, args.subject)
        report = build_report(store, args.group, args.subject)
    if args.json:
        emit_json(report)
        return EXIT_OK
    if args.readme is not None:
        return update_readme(args, report)
    if args.markdown:
        sys.stdout.write(markdown(report))
        return EXIT_OK
    if report.get("kind") == "ladder":
        return print_ladder_report(report)
    return print_peer_report(report)
