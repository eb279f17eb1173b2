"""``blockmap --backend NAME``: a plugin's own report of the blocks it computes
(``declare(..., block_map=...)``) at the problem of the flags and its ``--plugin-knob`` values;
for a backend that reports none, the tile schedule's model, said so above the map."""

from __future__ import annotations

import argparse

from kernels import schedule
from kernels.knobs import KNOBS
from kernels.schedule import BlockKind
from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.output import emit_json
from workbench.cli.values import UsageError
from workbench.config import KernelConfig, Problem


def schedule_note(name: str, plugin: bool) -> str:
    """The line above a map that is the tile schedule's model, not a report."""
    if plugin:
        return (
            f"{name} reports no block map (declare block_map= for one): this is the tile "
            "schedule's model, not what the plugin computed"
        )
    return f"{name}: the tile schedule's model"


def plugin_blockmap(args: argparse.Namespace) -> int | dict[str, str]:
    """The ``blockmap`` command for ``args.backend``: where it is a plugin that reports its
    blocks, its report printed and the exit code; else what the caller says above the schedule's
    map it draws (``backend``, ``source`` and ``note``)."""
    from workbench.analysis import blockmap_text
    from workbench.backends.catalog import declarations
    from workbench.backends.plugin_backend import PluginBackend

    name = args.backend
    found = declarations().get(name)
    if found is None:
        known = ", ".join(declarations())
        raise UsageError(f"--backend {name}: no such backend here (load its file with --plugin); "
                         f"expected one of {known}")  # fmt: skip
    backend = found.make() if found.source is not None else None
    if not isinstance(backend, PluginBackend) or backend.plugin.block_map is None:
        return {"backend": name, "source": "schedule",
                "note": schedule_note(name, found.source is not None)}  # fmt: skip
    for knob_name in schedule.TILE_KNOBS:  # the plugin counts in its own blocks
        knob = KNOBS[knob_name]
        if getattr(args, knob_name) != knob.default:
            raise UsageError(
                f"{knob.flag} {getattr(args, knob_name)}: our kernel's tiles; {name} reports "
                "its map in its own blocks (set its knobs with --plugin-knob NAME=VALUE)"
            )
    caps = backend.plugin.capabilities
    k_len = args.k_len if args.k_len is not None else args.q_len + args.input_pos
    problem = Problem(
        q_len=args.q_len, k_len=k_len, input_pos=args.input_pos, batch=args.batch,
        heads=args.heads, kv_heads=args.kv_heads, dtype=caps.dtypes[0],
        head_dim=caps.head_dims[0] if caps.head_dims and 64 not in caps.head_dims else 64,
    )  # fmt: skip
    config = KernelConfig(mask=args.mask, window=args.window)
    backend.check_declared(problem, config)  # its masks, knob values and rules; the report
    reported = backend.reported(problem, config)
    rows, keys = reported.extra["block_map_tiles"]
    grid = reported.grid
    if args.json:
        emit_json(
            {
                "backend": name, "source": "plugin", "q_len": problem.q_len,
                "k_len": problem.k_len, "block_rows": rows, "block_keys": keys,
                "mask": config.mask, "input_pos": problem.input_pos, "window": config.window,
                "knobs": dict(backend.knob_values), "shape": list(grid.shape),
                "counts": {k.name.lower(): int((grid == k).sum()) for k in BlockKind},
                "legend": {str(int(k)): k.name.lower() for k in BlockKind},
                "map": grid.tolist(),
            }
        )  # fmt: skip
        return EXIT_OK
    settings = " ".join(f"{k}={v}" for k, v in backend.knob_values.items())
    print(f"{name} {settings}: reported by the plugin, blocks of {rows}×{keys}")
    print(blockmap_text.counts_line(grid))
    for line in blockmap_text.draw_grid(grid):
        print(line)
    return EXIT_OK
