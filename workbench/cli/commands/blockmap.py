"""``fmha-workbench blockmap``: which q×k blocks a configuration computes, masks and skips
(and, in the decode form, which split reads each), drawn by
:mod:`workbench.analysis.blockmap_text`; with ``--backend`` a plugin's report of its blocks
(:mod:`workbench.cli.plugin_blockmap`)."""

from __future__ import annotations

import argparse
from typing import Any

import workbench.cli.serving_blockmap as serving_blockmap
from kernels import knobs, schedule
from kernels.schedule import MASK_MODES
from workbench.cli.common_flags import add_json
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.knob_flags import add_knob_flag
from workbench.cli.values import UsageError, whole
from workbench.sizes import size_arg

NAME = "blockmap"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(NAME, help="which q×k blocks a configuration computes, masks, skips")
    p.add_argument(
        "--q-len", type=size_arg, help="query length (rows); required but with --lengths"
    )
    p.add_argument("--k-len", type=size_arg, help="default: q-len + input-pos")
    for name in schedule.TILE_KNOBS:
        add_knob_flag(p, knobs.KNOBS[name])
    p.add_argument("--mask", default="none", help=f"one of {', '.join(MASK_MODES)}")
    p.add_argument("--input-pos", type=size_arg, default=0, help="causal offset of the queries")
    p.add_argument("--window", type=size_arg, help="sliding-window size (with --mask window)")
    for name in schedule.DECODE_KNOBS:
        add_knob_flag(p, knobs.KNOBS[name])
    p.add_argument(
        "--heads", type=whole, default=1, help="query heads (with --pack-gqa: rows per KV head)"
    )
    p.add_argument("--kv-heads", type=whole, help="key/value heads (default: --heads)")
    p.add_argument("--batch", type=whole, default=1, help="batch (auto splits read the grid)")
    p.add_argument(
        "--backend",
        metavar="NAME",
        help="a plugin's backend (load its file with --plugin): the blocks it reports it "
        "computes, at its --plugin-knob values; one that reports none: the schedule's model",
    )
    serving_blockmap.add_flags(p)
    add_json(p)


def run(args: argparse.Namespace) -> int:
    from workbench.analysis import blockmap_text
    from workbench.backends.base import decode_form
    from workbench.cli.blockmap_layout import blockmap_layout, map_data
    from workbench.cli.output import emit_json
    from workbench.cli.plugin_blockmap import plugin_blockmap

    if serving_blockmap.wanted(args):  # a ragged batch: one line a sequence
        if args.backend is not None:
            raise UsageError("--backend: a ragged batch's map is the schedule's; leave it out")
        return serving_blockmap.run(args)
    if args.q_len is None:
        raise UsageError("blockmap: the following arguments are required: --q-len")
    note: dict[str, str] = {}
    if args.backend is not None:  # a plugin's own report, or a note above the schedule's
        shown = plugin_blockmap(args)
        if isinstance(shown, int):
            return shown
        note = shown
    problem, config, layout = blockmap_layout(args)
    split = decode_form(config)
    if args.json:
        emit_json({**note, **map_data(problem, config, layout, split)})
        return EXIT_OK
    if note:
        print(note["note"])
    print(blockmap_text.counts_line(layout.block_map))
    if split:
        ranges = ", ".join(f"{lo}-{hi - 1}" for lo, hi in layout.split_ranges)
        print(f"{layout.n_splits} split(s) of the key range, key blocks {ranges}")
    for line in blockmap_text.draw(layout, split):
        print(line)
    return EXIT_OK
