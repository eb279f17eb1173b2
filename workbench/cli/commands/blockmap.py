"""``fmha-workbench blockmap``: which q×k blocks a configuration computes, masks and skips
(and, in the decode form, which split reads each), drawn by :mod:`workbench.blockmap_text`."""

from __future__ import annotations

import argparse
from typing import Any

from kernels import knobs, schedule
from kernels.schedule import MASK_MODES, BlockKind, cdiv
from workbench import blockmap_text
from workbench.backends.base import decode_form, schedule_for
from workbench.cli.common_flags import add_json
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.knob_flags import add_knob_flag
from workbench.cli.output import emit_json
from workbench.cli.values import UsageError, whole
from workbench.config import KernelConfig, Problem
from workbench.sizes import size_arg

NAME = "blockmap"
# A block map of more cells than this (2048 x 2048: 128k x 128k at 64 x 64 tiles) is refused:
# its grid and JSON would take gigabytes and minutes.
MAX_BLOCKMAP_CELLS = 2048 * 2048


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(NAME, help="which q×k blocks a configuration computes, masks, skips")
    p.add_argument("--q-len", type=size_arg, required=True, help="query length (rows)")
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
    add_json(p)


def run(args: argparse.Namespace) -> int:
    k_len = args.k_len if args.k_len is not None else args.q_len + args.input_pos
    problem = Problem(
        q_len=args.q_len,
        k_len=k_len,
        input_pos=args.input_pos,
        batch=args.batch,
        heads=args.heads,
        kv_heads=args.kv_heads,
    )
    config = KernelConfig(
        mask=args.mask,
        window=args.window,
        **{name: getattr(args, name) for name in (*schedule.TILE_KNOBS, *schedule.DECODE_KNOBS)},
    )
    layout = schedule_for(problem, config)
    tile_rows, tile_keys = schedule.tile_shape(config.knob_values())
    cells = cdiv(layout.rows, tile_rows) * cdiv(problem.k_len, tile_keys)
    if cells > MAX_BLOCKMAP_CELLS:
        raise UsageError(
            f"blockmap: {problem.q_len}x{problem.k_len} at {tile_rows}x{tile_keys} tiles "
            f"is {cells:,} blocks; at most {MAX_BLOCKMAP_CELLS:,} (use larger tiles or lengths "
            "up to 128k)"
        )
    counts = layout.counts()
    grid = layout.block_map
    split = decode_form(config)
    if args.json:
        data = {
            "q_len": problem.q_len,
            "k_len": problem.k_len,
            **schedule.tile_facts(layout),
            "mask": config.mask,
            "input_pos": problem.input_pos,
            "window": config.window,
            "shape": list(grid.shape),
            "counts": counts,
            "legend": {str(int(k)): k.name.lower() for k in BlockKind},
            "map": grid.tolist(),
        }
        if split:
            # Which split (CTA) reads each block (-1: skipped), and each split's key blocks.
            data.update(schedule.split_layout(layout), splits=layout.split_map.tolist())
        emit_json(data)
        return EXIT_OK
    total = grid.size
    print(
        f"{grid.shape[0]}×{grid.shape[1]} blocks: {counts['computed']} computed, "
        f"{counts['masked']} masked, {counts['skipped']} skipped "
        f"({100 * counts['skipped'] / total:.1f} % skipped)"
    )
    if split:
        ranges = ", ".join(f"{lo}-{hi - 1}" for lo, hi in layout.split_ranges)
        print(f"{layout.n_splits} split(s) of the key range, key blocks {ranges}")
    for line in blockmap_text.draw(layout, split):
        print(line)
    return EXIT_OK
