"""What ``blockmap`` draws: the schedule of the problem and tiles its flags state (refused
past :data:`MAX_BLOCKMAP_CELLS`), and that schedule as the JSON ``--json`` prints."""

from __future__ import annotations

import argparse
from typing import Any

from kernels import schedule
from kernels.schedule import BlockKind, Schedule, cdiv
from workbench.backends.base import schedule_for
from workbench.cli.values import UsageError
from workbench.config import KernelConfig, Problem

# A block map of more cells than this (2048 x 2048: 128k x 128k at 64 x 64 tiles) is refused:
# its grid and JSON would take gigabytes and minutes.
MAX_BLOCKMAP_CELLS = 2048 * 2048


def blockmap_layout(args: argparse.Namespace) -> tuple[Problem, KernelConfig, Schedule]:
    """The problem, the config and their schedule, from ``blockmap``'s flags."""
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
    return problem, config, layout


def map_data(
    problem: Problem, config: KernelConfig, layout: Schedule, split: bool
) -> dict[str, Any]:
    """The map as ``--json`` prints it; ``split``: the decode form's split of each block."""
    grid = layout.block_map
    data: dict[str, Any] = {
        "q_len": problem.q_len,
        "k_len": problem.k_len,
        **schedule.tile_facts(layout),
        "mask": config.mask,
        "input_pos": problem.input_pos,
        "window": config.window,
        "shape": list(grid.shape),
        "counts": layout.counts(),
        "legend": {str(int(k)): k.name.lower() for k in BlockKind},
        "map": grid.tolist(),
    }
    if split:
        # Which split (CTA) reads each block (-1: skipped), and each split's key blocks.
        data.update(schedule.split_layout(layout), splits=layout.split_map.tolist())
    return data
