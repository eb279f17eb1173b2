"""Flags many commands share: ``--db`` after the command (the same as the global one before
it) and ``--json``."""

from __future__ import annotations

import argparse

DB_HELP = "database file (default: $FMHA_WORKBENCH_DB, else runs.db in your data directory)"


def add_db(parser: argparse.ArgumentParser) -> None:
    # Its own dest, and absent unless given: a subcommand's default must not overwrite a --db
    # written before the command (argparse lets a subparser's defaults win).
    parser.add_argument(
        "--db", metavar="PATH", dest="command_db", default=argparse.SUPPRESS, help=DB_HELP
    )


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
