"""``fmha-workbench profile``: one stored point's launch under Nsight Compute, its headline
metrics and where its warps wait kept with the point."""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli.common_flags import add_db, add_json
from workbench.cli.database import db_of, db_path, open_db
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.output import emit_json, printable, table
from workbench.cli.values import UsageError, run_id
from workbench.config import AXIS_LABELS
from workbench.sizes import size_arg

NAME = "profile"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="profile one stored point's launch with Nsight Compute (ncu, clocks left as they "
        "are) and keep a dozen headline metrics with the point, and where its warps wait (the "
        "PC samples' hottest SASS instructions, and each stall reason's)",
    )
    p.add_argument("run", type=run_id, help="run id")
    p.add_argument(
        "--seq-len", type=size_arg, required=True,
        help="the point's length on its run's axis: N, or k_len for a decode sweep",
    )  # fmt: skip
    add_db(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from workbench.analysis.ncu_source import summary_rows
    from workbench.reports.ncu import ProfileRefused, compare_rows, profile_point

    db = db_path(args)
    with open_db(db_of(args), create=False) as store:
        run = store.run(args.run)
        point = next((p for p in store.points(run.id) if p.seq_len == args.seq_len), None)
    if point is None:
        lengths = ", ".join(str(n) for n in run.seq_lens)
        raise UsageError(
            f"--seq-len: run {run.id} has no point at {AXIS_LABELS[run.axis]}={args.seq_len} "
            f"({lengths})"
        )
    try:
        profile = profile_point(run, point, db)
    except ProfileRefused as exc:
        raise UsageError(f"cannot profile: {exc}") from exc
    with open_db(db_of(args)) as store:
        store.set_point_extra(run.id, point.seq_len, "ncu", profile.to_dict())
    if args.json:
        emit_json(profile.to_dict())
        return EXIT_OK
    print(f"run {run.id} at {AXIS_LABELS[run.axis]}={point.seq_len}: {printable(profile.kernel)}")
    print(table(compare_rows([profile.to_dict()]), ["metric", f"#{run.id}"]))
    if profile.waits is not None:
        loop = profile.waits.key_loop_share
        in_loop = "" if loop is None else f", {loop:.0%} of them in the key loop"
        print(f"where the warps wait ({profile.waits.samples:,} PC samples{in_loop}):")
        print(table(summary_rows(profile.waits), ["samples", "instruction", "reasons / next"]))
    print(f"report: {profile.report}")
    return EXIT_OK
