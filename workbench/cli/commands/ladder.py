"""``fmha-workbench ladder``: run the optimization ladder (each step one knob more on the
previous) as one group, and tabulate its speed-ups."""

from __future__ import annotations

import argparse
from typing import Any, cast

from workbench.cli.common_flags import add_db, add_json
from workbench.cli.timing_flags import add_timing, planned_timings
from workbench.cli.values import whole
from workbench.config import DTYPES
from workbench.sizes import size_arg

NAME = "ladder"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="run the optimization ladder (each step one knob more) and tabulate speed-ups",
    )
    p.add_argument("--backend", default="reference", help="backend to run (default reference)")
    p.add_argument(
        "--steps", metavar="FILE", help="a ladder JSON file (default: the built-in ladder)"
    )
    p.add_argument(
        "--preset",
        metavar="NAME",
        help="a built-in ladder: hopper, blackwell (default: the local GPU's), or decode "
        "(baseline, GQA packing, KV split, autotuned; its x axis is k_len)",
    )
    p.add_argument(
        "--seq-lens",
        help="default 1k-16k on a GPU backend, 128,256 on the reference (and on a plugin that "
        "computes on the host, as every default below)",
    )
    p.add_argument(
        "--k-lens",
        help="a decode ladder's key lengths (default 4k-32k on a GPU backend, 256,512 on "
        "reference)",
    )
    p.add_argument("--q-len", type=size_arg, help="a decode ladder's query rows (default its own)")
    p.add_argument("--batch", type=whole, help="default 4 on a GPU backend, 1 on reference")
    p.add_argument("--heads", type=whole, help="default 32 on a GPU backend, 2 on reference")
    p.add_argument("--kv-heads", type=whole, help="key/value heads for GQA (default: --heads)")
    p.add_argument("--head-dim", type=whole, help="default 128 on a GPU backend, 64 on reference")
    p.add_argument("--dtype", default="float16", help=f"one of {', '.join(DTYPES)}")
    p.add_argument("--mask", help="override the ladder's mask (causal by default)")
    p.add_argument("--window", type=size_arg, help="sliding-window size (with --mask window)")
    p.add_argument("--label", default="", help="a name for the ladder group")
    add_timing(p)
    add_db(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from workbench.analysis.compare import noise_rule
    from workbench.cli.database import db_of, open_db
    from workbench.cli.ladder_args import ladder_job
    from workbench.cli.output import emit_json, follow, table
    from workbench.cli.report_text import LADDER_RATIOS_NOTE
    from workbench.jobs.ladder_steps import format_ladder_table, ladder_table

    job = ladder_job(args)
    plan = job.preflight()
    timing = planned_timings(args, plan)
    with open_db(db_of(args)) as store:
        code, group_id, _ = follow(job, job.run(store, plan=plan, timing=timing))
        steps = ladder_table(store, cast(int, group_id))  # None: refused as no stored ladder
    if args.json:
        emit_json({**steps, "published_blackwell": job.ladder.published})
    else:
        rows = format_ladder_table(steps)
        print(table(rows[1:], rows[0]))
        print(LADDER_RATIOS_NOTE.format(rule=noise_rule()))
    return code
