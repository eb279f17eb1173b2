"""``fmha-workbench backends``: which backends this machine can run, and why not."""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli.common_flags import add_json
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.output import emit_json

NAME = "backends"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(NAME, help="which backends this machine can run, and why not")
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from workbench.backends import backend_notes, backend_statuses

    statuses = backend_statuses()
    notes = backend_notes()
    if args.json:
        emit_json(
            {
                n: {"available": s.available, "reason": s.reason, "notes": notes.get(n, "")}
                for n, s in statuses.items()
            }
        )
    else:
        width = max([12, *(len(name) for name in statuses)])  # a plugin's name can be longer
        for name, status in statuses.items():
            print(f"{name:{width}} {'yes' if status.available else 'no ':3}  {status.reason}")
            if notes.get(name):
                print(f"{'':{width}}      note: {notes[name]}")
    return EXIT_OK
