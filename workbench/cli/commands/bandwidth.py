"""``fmha-workbench bandwidth``: measure (or with --show, print) this GPU's read bandwidth, kept
per GPU in ``bandwidth_path()``; every later run on it carries the figure in its machine
record."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from workbench.cli.common_flags import add_json
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.gpu_reads import bandwidth_by_size, local_gpu_name, measured_read
from workbench.cli.output import emit_json, printable
from workbench.cli.values import byte_sizes

NAME = "bandwidth"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="measure this GPU's streaming-read bandwidth once and keep it with the machine "
        "record, so runs show K+V GB/s as a %% of it",
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--show", action="store_true", help="print the stored measurement, measure nothing"
    )
    what.add_argument(
        "--sizes",
        type=byte_sizes,
        metavar="LIST",
        help="measure the read at these sizes instead, e.g. 16M,134M,537M (a decode call's K+V "
        "bytes): what a plain library read reaches at that many bytes, beside the stored "
        "figure; nothing is kept",
    )
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from workbench.analysis import bandwidth

    if args.show:
        stored = bandwidth.stored_measurements()
        if args.json:
            emit_json({"path": str(bandwidth.bandwidth_path()), "gpus": stored})
        elif not stored:
            print(f"no read bandwidth measured yet ({bandwidth.bandwidth_path()})")
        for gpu, entry in stored.items() if not args.json else ():
            line = bandwidth.read_line(bandwidth.machine_bandwidth(gpu))
            said = f"; a read: {bandwidth.read_line_text(line)}" if line else ""
            print(f"{printable(gpu)}: {entry['gbs']:.0f} GB/s{said}, {printable(entry['method'])}")
        return EXIT_OK
    gpu = local_gpu_name()
    if args.sizes:
        return bandwidth_by_size(gpu, args.sizes, args.json)
    measured = measured_read(gpu)
    path = bandwidth.save_bandwidth(measured)
    if args.json:
        emit_json({**dataclasses.asdict(measured), "path": str(path)})
    else:
        print(f"{gpu}: {measured.gbs:.0f} GB/s streaming read ({measured.method})")
        if measured.fixed_us is not None and measured.line_rate_gbs is not None:
            text = bandwidth.read_line_text((measured.fixed_us, measured.line_rate_gbs))
            print(f"a read of 134–537 MB: {text} (the least a kernel reading its bytes pays)")
        print(f"kept in {path}; runs on this GPU now show K+V GB/s as a % of it", file=sys.stderr)
    return EXIT_OK
