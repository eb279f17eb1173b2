"""``fmha-workbench runs``: the stored runs, newest first."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from workbench.cli.common_flags import add_db, add_json
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.values import UsageError, at_least_zero, search_text
from workbench.config import AXIS_LABELS

NAME = "runs"
NO_RUNS_YET = "no runs yet: try `fmha-workbench sweep --backend reference`"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(NAME, help="list stored runs, newest first")
    p.add_argument(
        "--search", type=search_text, help="only runs whose label, backend, status or config match"
    )
    p.add_argument("--limit", type=at_least_zero, default=50, help="at most this many (default 50)")
    add_db(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from workbench.analysis.compare import machine_name
    from workbench.cli.database import db_of, open_db
    from workbench.cli.output import emit_json, printable, table
    from workbench.store import data_dir_db_path, env_db_path

    if args.limit < 1:
        raise UsageError(f"--limit {args.limit}: expected 1 or more runs")
    db = db_of(args)
    if db is None and env_db_path() is None and not data_dir_db_path().exists():
        # A fresh install: no sweep has made the default database yet.
        if args.json:
            emit_json([])
        else:
            print(NO_RUNS_YET)
        return EXIT_OK
    with open_db(db, create=False) as store:
        runs = store.runs(search=args.search, limit=args.limit)
        if args.json:
            emit_json([r.to_dict() for r in runs])
            return EXIT_OK
        if not runs:
            print(NO_RUNS_YET)
            return EXIT_OK
        rows = [
            [
                str(r.id),
                r.created_at.replace("T", " ")[:19],
                r.backend,
                r.status,
                seq_summary(r.seq_lens, r.axis),
                r.problem.summary(r.axis),
                r.config.summary_for(r.backend, r.own_knobs),
                r.label,
            ]
            for r in runs
        ]
        header = ["id", "created", "backend", "status", "lengths", "problem", "config", "label"]
        machines = [machine_name(r.machine) for r in runs]
        if len(set(machines)) > 1:  # timings from two machines do not compare: say whose
            header.insert(2, "machine")
            rows = [[*row[:2], name, *row[2:]] for row, name in zip(rows, machines, strict=True)]
        rows = [[printable(cell) for cell in row] for row in rows]
        print(table(rows, header))
    return EXIT_OK


def seq_summary(seq_lens: Sequence[int], axis: str = "seq_len") -> str:
    """``N 128..512``, or ``k_len 4096..131072`` for a decode sweep."""
    shown = str(seq_lens[0]) if len(seq_lens) == 1 else f"{seq_lens[0]}..{seq_lens[-1]}"
    return f"{AXIS_LABELS[axis]} {shown}"
