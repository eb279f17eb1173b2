"""The top-level parser: the program, its global flags, and one subparser per command, each
registered by its own module (:mod:`workbench.cli.commands`).

A global flag (given before the command) is added in :func:`build_parser`, before the
subcommands; a flag of one command goes in that command's ``register``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

from workbench.cli.commands import ALL as COMMANDS
from workbench.cli.common_flags import DB_HELP
from workbench.cli.values import UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fmha-workbench",
        description="Profile and tune a cuTile FlashAttention kernel. With no command, "
        "opens the desktop workbench.",
    )
    # The global flags.
    parser.add_argument("--db", metavar="PATH", help=DB_HELP)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


# Options whose value is free text, which may start with '-' ('--label -2+3').
_TEXT_OPTIONS = ("--label", "--search")


def join_text_values(argv: Sequence[str]) -> list[str]:
    """``--label -2+3`` as ``--label=-2+3``: argparse takes a value starting with '-' for an
    option of its own and refused the label."""
    out: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        following = items[i + 1] if i + 1 < len(items) else ""
        # "--x" after --label is more likely a flag than a label: argparse says what is missing.
        dashed = following.startswith("-") and not following.startswith("--")
        if items[i] in _TEXT_OPTIONS and dashed:
            out.append(f"{items[i]}={items[i + 1]}")
            i += 2
            continue
        out.append(items[i])
        i += 1
    return out
