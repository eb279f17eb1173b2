"""``fmha-workbench knobs``: the kernel knobs, their flags, defaults and values, and the rules
between them."""

from __future__ import annotations

import argparse
from typing import Any

from kernels import knobs
from workbench.cli.common_flags import add_json
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.knob_flags import add_arch, knob_arch

NAME = "knobs"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        NAME,
        help="the kernel knobs: flags, defaults, the values each backend takes on this GPU's "
        "architecture (or --arch), and the rules between them",
    )
    add_arch(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from workbench.backends.plugin_cli import print_plugin_knobs
    from workbench.cli.knobs_table import knobs_rows, knobs_table
    from workbench.cli.output import emit_json, table

    offered = knobs_table(knob_arch(args))
    if args.json:
        emit_json(offered)
        return EXIT_OK
    where = f"cutile on {offered['arch']}" if offered["arch"] else "cutile"
    header = ["knob", "flag", "default", "values", where, "rules"]
    print(table(knobs_rows(offered), header))
    for refused in offered["not_offered"]:
        values = knobs.KNOBS[refused["knob"]].values_text(refused["values"])
        print(f"{refused['knob']} {values}: {refused['reason']}")
    print_plugin_knobs(offered["plugin_knobs"])
    return EXIT_OK
