"""``fmha-workbench resources``: what a cuTile config compiles to (offline, no GPU), per
architecture; or, with --runs, store that for stored points."""

from __future__ import annotations

import argparse
from typing import Any

from kernels import knobs
from kernels.schedule import MASK_MODES
from workbench.cli.common_flags import add_db, add_json
from workbench.cli.exit_codes import EXIT_FAILED, EXIT_OK
from workbench.cli.knob_flags import add_knob_flag
from workbench.cli.values import UsageError, run_ids, whole
from workbench.config import DTYPES, HEAD_DIMS
from workbench.sizes import size_arg

NAME = "resources"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="what a cuTile config compiles to (offline, no GPU): registers, spill, shared "
        "memory and CTAs per SM, per architecture",
    )
    p.add_argument(
        "--runs",
        type=run_ids,
        help="instead: store what each point of these stored runs compiled to, where it was "
        "stored without (cuTile runs; comma-separated ids)",
    )
    p.add_argument(
        "--seq-len", type=size_arg, default=4096, help="sequence length N (default 4096)"
    )
    p.add_argument(
        "--q-len",
        type=size_arg,
        help="decode: the query rows (instead of --seq-len), the last tokens of --k-len keys",
    )
    p.add_argument("--k-len", type=size_arg, help="decode: the keys the --q-len rows read")
    p.add_argument("--batch", type=whole, default=1, help="batch size (default 1)")
    p.add_argument("--heads", type=whole, default=8, help="query heads (default 8)")
    p.add_argument("--kv-heads", type=whole, help="key/value heads for GQA (default: --heads)")
    p.add_argument("--head-dim", type=whole, default=128, help=f"one of {HEAD_DIMS} (default 128)")
    p.add_argument("--dtype", default="float16", help=f"one of {', '.join(DTYPES)}")
    p.add_argument("--input-pos", type=size_arg, default=0, help="causal offset of the queries")
    p.add_argument("--mask", default="none", help=f"one of {', '.join(MASK_MODES)}")
    p.add_argument("--window", type=size_arg, help="sliding-window size (with --mask window)")
    for knob in knobs.EXPOSED:
        add_knob_flag(p, knob)
    p.add_argument(
        "--backend",
        default="cutile",
        help="whose kernel: cutile (default), or a plugin's that declares compile_cubin= "
        "(with --plugin PATH; its knobs by --plugin-knob)",
    )
    p.add_argument(
        "--arch",
        metavar="sm_XY[,sm_XY]",
        help="architectures to compile for (default: the local GPU's, else sm_90,sm_100,sm_120)",
    )
    add_db(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from workbench.analysis.resources import (
        ResourceService,
        compiled_from_registry,
        missing_tools,
    )
    from workbench.backends.catalog import declarations
    from workbench.cli.database import db_of
    from workbench.cli.output import emit_json
    from workbench.cli.resources_args import (
        fill_stored_resources,
        resource_archs,
        resources_config,
        resources_problem,
    )

    declarations()  # each declares whether its configs compile from our kernel
    if not compiled_from_registry(args.backend):
        from workbench.cli.plugin_resources import plugin_resources

        return plugin_resources(args)
    if args.runs:
        return fill_stored_resources(args)
    if db_of(args) is not None:
        raise UsageError("--db: only with --runs (a config alone is compiled, not stored)")

    problem = resources_problem(args)
    config = resources_config(args, problem)
    archs = resource_archs(args.arch)
    why = missing_tools()
    if why:
        raise UsageError(f"cannot compile here: {why}")
    service = ResourceService()
    found = {arch: service.for_config(problem, config, arch) for arch in archs}
    if args.json:
        emit_json({arch: res.to_dict() for arch, res in found.items() if res is not None})
    else:
        lengths = (
            f"N={problem.q_len}"
            if args.q_len is None
            else f"q_len={problem.q_len} k_len={problem.k_len}"
        )
        print(f"{config.summary()} · {problem.summary()} {lengths}")
        for res in found.values():
            if res is not None:
                print(res.summary())
                if res.key_block():
                    print(f"  {res.key_block()}")
    failed = any(res is not None and res.error for res in found.values())
    return EXIT_FAILED if failed else EXIT_OK
