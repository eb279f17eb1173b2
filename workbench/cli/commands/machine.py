"""``fmha-workbench machine``: this machine's measured roofline ceilings, listed, or measured
on the GPU with --measure."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from workbench.cli.ceilings_text import ceilings_line
from workbench.cli.common_flags import add_db, add_json
from workbench.cli.database import db_of, open_db
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.gpu_reads import local_gpu_name, measured_read
from workbench.cli.output import emit_json, printable
from workbench.cli.values import UsageError

NAME = "machine"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="this machine's measured ceilings for the roofline (dense matmul TFLOP/s, "
        "streaming read GB/s): list them, or --measure on the GPU",
    )
    p.add_argument(
        "--measure",
        action="store_true",
        help="measure the ceilings on this GPU now and store them (again: re-measures)",
    )
    add_db(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from workbench.analysis.roofline import MEASURE_COMMAND, device_lib, measure_ceilings

    if not args.measure:
        with open_db(db_of(args), create=False) as store:
            records = store.ceilings()
        if args.json:
            emit_json(records)
        elif not records:
            print(f"no measured ceilings in this database; `{MEASURE_COMMAND}` on a GPU")
        for record in [] if args.json else records:
            print(printable(ceilings_line(record)))
        return EXIT_OK
    lib, which = device_lib()
    if lib is None:
        raise UsageError(f"cannot measure the ceilings: {which}")
    from workbench.backends.gpu import gpu_machine_info

    gpu = gpu_machine_info()
    if not gpu.get("gpu_name") and which == "torch":
        import torch

        gpu["gpu_name"] = torch.cuda.get_device_name()
    dtypes = ("float16", "bfloat16") if which == "torch" else ("float16",)
    print(f"measuring {gpu.get('gpu_name', 'the GPU')} with {which} …", file=sys.stderr)
    # One read measurement: the roofline's read ceiling is the figure decode points are a %
    # of, and `bandwidth` measures the same way.
    from workbench.analysis import bandwidth

    read = measured_read(str(gpu.get("gpu_name") or local_gpu_name()))
    record = measure_ceilings(lib, gpu, read.gbs, read.method, dtypes=dtypes).to_dict()
    with open_db(db_of(args)) as store:
        record["id"] = store.add_ceilings(record)
    bandwidth.save_bandwidth(read)
    if args.json:
        emit_json(record)
    else:
        print(printable(ceilings_line(record)))
        for name, how in record["method"].items():
            print(f"  {name}: {how}")
    return EXIT_OK
