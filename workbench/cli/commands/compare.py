"""``fmha-workbench compare``: runs' latencies side by side, per length."""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli.common_flags import add_db, add_json
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.values import UsageError, run_id

NAME = "compare"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(NAME, help="latencies of runs side by side, per sequence length")
    p.add_argument(
        "runs", type=run_id, nargs="*", help="two or more run ids; the first is the base"
    )
    p.add_argument("--group", type=run_id, help="compare every run of a group (from --backends)")
    add_db(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from workbench.analysis.compare import compare_runs, noise_rule
    from workbench.cli.compare_table import compare_table, print_profiles
    from workbench.cli.database import db_of, open_db
    from workbench.cli.output import emit_json, printable, table

    with open_db(db_of(args), create=False) as store:
        run_ids = list(args.runs)
        if args.group is not None:
            run_ids += [r.id for r in store.group_runs(args.group)]
            if not run_ids:
                raise UsageError(f"group {args.group} has no runs")
        unique = list(dict.fromkeys(run_ids))  # `compare 1 1`: one run, once
        if len(unique) == 1 and len(run_ids) >= 2:
            run = store.run(unique[0])  # a missing id is refused as missing
            raise UsageError(f"compare {run.id} {run.id}: one run twice; give two different runs")
        run_ids = unique
        if len(run_ids) < 2:
            raise UsageError("compare: give two or more run ids (or --group G)")
        data = compare_runs(store, run_ids)
        if args.json:
            emit_json(data)
            return EXIT_OK
        for r in data["runs"]:
            where = f"  ({r['machine']})" if data["machines"] else ""
            print(f"run {r['id']}: {r['backend']}  {r['config']}  {printable(r['label'])}{where}")
        if data["differences"]:
            print(f"careful: the runs solve different problems ({'; '.join(data['differences'])})")
        if data["machines"]:
            print(f"careful: the runs come from different machines ({'; '.join(data['machines'])})")
        header, rows = compare_table(data)
        print(table(rows, header))
        if any(cell.endswith(" ~") for row in rows for cell in row):
            print(f"~ within the noise: {noise_rule()}")
        for reason in dict.fromkeys(r["roofline"] for r in data["runs"] if r["roofline"]):
            print(reason)
        print_profiles(store, [r["id"] for r in data["runs"]])
    return EXIT_OK
