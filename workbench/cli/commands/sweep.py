"""``fmha-workbench sweep``: measure a sweep (one backend) or a group (several, interleaved)
and store it; everything is checked before the database is opened."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from workbench.cli.common_flags import add_db, add_json
from workbench.cli.problem_flags import add_problem_and_config, spec_from_args, sweep_backend_names
from workbench.cli.timing_flags import planned_timings
from workbench.cli.values import UsageError
from workbench.config import K_LEN_AXIS

NAME = "sweep"

# A decode sweep stated by hand keeps the knobs' defaults, which are the prefill tile form's.
TILE_FORM_DECODE_NOTE = (
    "note: cuTile runs this decode sweep on its prefill tile form (one CTA a query head, the "
    "key range unsplit: 0.12x cuDNN at B=1 k_len 32k on the H200); --pack-gqa --kv-splits "
    "auto --tile-n 128 (256 at D 64), or a --preset, runs its decode kernel"
)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(NAME, help="measure a sweep over sequence lengths and store it")
    p.add_argument("--backend", help="backend to run (default reference)")
    p.add_argument(
        "--backends", help="several backends, comma-separated, on the same inputs as one group"
    )
    p.add_argument("--label", default="", help="a name for the run")
    add_problem_and_config(p, seq_default="128,256,512")
    add_db(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from workbench.backends.base import decode_form
    from workbench.cli.database import db_of, open_db
    from workbench.cli.output import emit_json, follow
    from workbench.jobs import job_for
    from workbench.jobs.base import job_names

    names = sweep_backend_names(args)
    if args.backends and len(job_names(names)) < 2:
        raise UsageError(
            f"--backends {args.backends}: a group needs two or more backends (it is what "
            f"`compare --group` reads); for one, use --backend {names[0]}"
        )
    spec = spec_from_args(args, "reference")
    job = job_for(spec, names)
    plan = job.preflight()
    if spec.axis == K_LEN_AXIS and "cutile" in names and not decode_form(spec.config):
        print(TILE_FORM_DECODE_NOTE, file=sys.stderr)
    timing = planned_timings(args, plan)
    with open_db(db_of(args)) as store:
        code, group_id, run_ids = follow(job, job.run(store, plan=plan, timing=timing))
        if args.json:
            runs = [
                {**store.run(r).to_dict(), "points": [p.to_dict() for p in store.points(r)]}
                for r in sorted(run_ids)
            ]
            emit_json({"group_id": group_id, "runs": runs})
        else:
            for run_id in sorted(run_ids):
                print(run_id)
    return code
