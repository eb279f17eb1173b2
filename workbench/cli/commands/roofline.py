"""``fmha-workbench roofline``: runs' points against this machine's measured ceilings."""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli.ceilings_text import ceilings_line
from workbench.cli.common_flags import add_db, add_json
from workbench.cli.database import db_of, open_db
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.output import emit_json, fmt, printable, table
from workbench.cli.values import run_id

NAME = "roofline"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="runs' points against this machine's ceilings: arithmetic intensity, TFLOP/s, "
        "%% of the bounding ceiling (the window's Roofline view)",
    )
    p.add_argument("runs", type=run_id, nargs="+", help="one or more run ids")
    add_db(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from workbench.analysis.compare import roofline_points

    with open_db(db_of(args), create=False) as store:
        for each in args.runs:
            store.run(each)  # a missing id is refused in one line
        chart = roofline_points(store, list(dict.fromkeys(args.runs)))
    if args.json:
        emit_json(chart)
        return EXIT_OK
    ceilings = chart["ceilings"]
    if ceilings:
        print(printable(ceilings_line(ceilings)))
    else:
        print(chart["reason"])
    rows = [
        [
            f"#{run['run_id']}",
            str(p["seq_len"]),
            f"{p['intensity']:.1f}",
            f"{p['tflops']:.3g}",
            fmt(p["pct_of_roofline"], ".0f"),
            printable(run["config"]),
        ]
        for run in chart["runs"]
        for p in run["points"]
    ]
    print(table(rows, ["run", "N", "FLOP/byte", "TFLOP/s", "% roof", "config"]))
    return EXIT_OK
