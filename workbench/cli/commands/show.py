"""``fmha-workbench show``: one run and its points."""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli.common_flags import add_db, add_json
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.values import run_id

NAME = "show"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(NAME, help="one run and its points")
    p.add_argument("run", type=run_id, help="run id")
    add_db(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from workbench.analysis.blockmap_text import run_source_words
    from workbench.analysis.roofline import no_ceiling_reason
    from workbench.cli.database import db_of, open_db
    from workbench.cli.output import emit_json, printable, table
    from workbench.cli.plan_text import plan_lines
    from workbench.cli.serving_show import batch_lines
    from workbench.cli.show_table import compile_summary, point_table

    with open_db(db_of(args), create=False) as store:
        run = store.run(args.run)
        points = store.points(run.id)
        if args.json:
            emit_json({**run.to_dict(), "points": [p.to_dict() for p in points]})
            return EXIT_OK
        print(f"run {run.id}  {printable(run.label)}".rstrip())
        # A plugin's traceback lines sit under the reason, indented as the fields are.
        error = printable(run.error, keep_newlines=True).replace("\n", "\n           ")
        error = f": {error}" if run.error else ""
        print(f"  status   {run.status}{error}")
        where = run.machine.get("gpu_name") or run.machine.get("hostname", "")
        print(f"  backend  {printable(run.backend)}   machine {printable(where)}")
        print(f"  problem  {run.problem.summary(run.axis)}")
        print(f"  config   {run.config.summary_for(run.backend, run.own_knobs)}")
        print(f"  created  {run.created_at}   finished {run.finished_at or '-'}")
        if points:
            print(f"  compile  {compile_summary(points)}")
        blocks = run_source_words(p.extra for p in points)
        if blocks:  # whose block map: the plugin's report, or the schedule's model
            print(f"  blocks   {blocks}")
        header, rows, ceilings = point_table(store, run, points)
        if rows:
            print(table(rows, header))
            if ceilings is None:
                where = str(run.machine.get("gpu_name") or "")
                print(no_ceiling_reason(where, run.backend))
        for line in (*plan_lines(points, run.axis), *batch_lines(run, points)):
            print(line)
    return EXIT_OK
