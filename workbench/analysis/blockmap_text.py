"""The ``blockmap`` command's text map: one character a block, or, where the map is wider than
the terminal (at most :data:`MAX_COLUMNS`) or taller than :data:`MAX_ROWS`, one character a
b×b group of blocks, with a line above it saying so.

A group's character follows the "any visited" rule, so no work disappears in the drawing:
``.`` only where every block of the group is skipped, ``m`` where any is computed with a mask,
``#`` where the visited blocks are all computed without one. In a split map a group shows the
split that reads most of its visited blocks (the lower split on a tie).

Also where a stored point's map came from, in the words ``show``, the window's block-map view
and the CSV use (:func:`source_words`): the point's ``extra.block_map_source``, absent for the
backends whose map is their walk of the schedule (the reference, the peers).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from kernels.schedule import BlockKind, Schedule, cdiv, kind_counts

# Wider than this a map wraps in most terminals and reads as noise, whatever the terminal says.
MAX_COLUMNS = 120
MAX_ROWS = 200
SPLIT_SYMBOLS = "0123456789abcdefghijklmnopqrstuvwxyz"
KIND_SYMBOLS = {BlockKind.COMPUTED: "#", BlockKind.MASKED: "m", BlockKind.SKIPPED: "."}
KIND_LEGEND = "# computed   m masked   . skipped"
SPLIT_LEGEND = "0-9 a-z: the split that reads the block   . skipped"


def map_columns() -> int:
    """The columns a map may take: the terminal's width ($COLUMNS where set), at most 120."""
    return min(MAX_COLUMNS, shutil.get_terminal_size((MAX_COLUMNS, 24)).columns)


def group_size(shape: tuple[int, int], columns: int) -> int:
    """The smallest b for which the map drawn in b×b groups fits ``columns`` and MAX_ROWS."""
    rows, cols = shape
    return max(1, cdiv(cols, max(1, columns)), cdiv(rows, MAX_ROWS))


def _groups(grid: np.ndarray, b: int, fill: int) -> np.ndarray:
    """``grid`` padded with ``fill`` to whole groups, as (group rows, group cols, b*b)."""
    rows, cols = grid.shape
    padded = np.full((cdiv(rows, b) * b, cdiv(cols, b) * b), fill, dtype=np.int64)
    padded[:rows, :cols] = grid
    shaped = padded.reshape(padded.shape[0] // b, b, padded.shape[1] // b, b)
    return shaped.transpose(0, 2, 1, 3).reshape(shaped.shape[0], shaped.shape[2], b * b)


def kind_cells(block_map: np.ndarray, b: int) -> np.ndarray:
    """Each b×b group's kind by the any-visited rule (see the module's doc)."""
    groups = _groups(block_map, b, int(BlockKind.SKIPPED))
    any_masked = (groups == BlockKind.MASKED).any(axis=2)
    any_computed = (groups == BlockKind.COMPUTED).any(axis=2)
    cells = np.full(any_masked.shape, int(BlockKind.SKIPPED), dtype=np.int64)
    cells[any_computed] = BlockKind.COMPUTED
    cells[any_masked] = BlockKind.MASKED
    return cells


def split_cells(split_map: np.ndarray, n_splits: int, b: int) -> np.ndarray:
    """Each b×b group's split: the one reading most of its visited blocks, -1 where none is."""
    groups = _groups(split_map, b, -1)
    counts = np.stack([(groups == s).sum(axis=2) for s in range(n_splits)], axis=2)
    return np.where(counts.sum(axis=2) > 0, counts.argmax(axis=2), -1)


def counts_line(grid: np.ndarray) -> str:
    """``32×32 blocks: 496 computed, 32 masked, 496 skipped (48.4 % skipped)``."""
    counts = kind_counts(grid)
    skipped = counts["skipped"]
    return (
        f"{grid.shape[0]}×{grid.shape[1]} blocks: {counts['computed']} computed, "
        f"{counts['masked']} masked, {skipped} skipped "
        f"({100 * skipped / max(1, grid.size):.1f} % skipped)"
    )


def draw(layout: Schedule, split: bool, columns: int | None = None) -> list[str]:
    """The map's lines: the grouping note where it is grouped, the rows, the legend."""
    return draw_grid(layout.block_map, layout if split else None, columns)


def draw_grid(
    grid: np.ndarray, split_layout: Schedule | None = None, columns: int | None = None
) -> list[str]:
    """The lines of ``grid`` (BlockKind codes: a schedule's map or a plugin's report), or of
    ``split_layout``'s splits where given."""
    b = group_size(grid.shape, map_columns() if columns is None else columns)
    lines = []
    layout = split_layout
    split = layout is not None and layout.n_splits <= len(SPLIT_SYMBOLS)
    if b > 1:
        rule = (
            "the split that reads most of them" if split else "'m' where any is masked"
        ) + ", '.' where all are skipped"
        tall, wide = min(b, grid.shape[0]), min(b, grid.shape[1])  # a one-row map groups keys only
        lines.append(f"each cell is {tall}×{wide} blocks ({rule})")
    if split and layout is not None:
        for row in split_cells(layout.split_map, layout.n_splits, b):
            lines.append("".join("." if s < 0 else SPLIT_SYMBOLS[s] for s in row))
        return [*lines, SPLIT_LEGEND]
    for row in kind_cells(grid, b):
        lines.append("".join(KIND_SYMBOLS[BlockKind(int(c))] for c in row))
    return [*lines, KIND_LEGEND]


SOURCE_WORDS = {
    "plugin": "reported by the plugin",
    "schedule": "the tile schedule's model (the plugin reports none)",
    "kernel": "recorded by the kernel's instrumented launch",
    "host model": "the tile schedule's model",
}


def source_words(extra: Mapping[str, Any] | None) -> str | None:
    """One point's source in words (with the plugin's block size where it reported one);
    None where the point does not say."""
    extra = extra or {}
    source = extra.get("block_map_source")
    words = SOURCE_WORDS.get(source) if isinstance(source, str) else None
    if words is None:
        return None
    tiles = extra.get("block_map_tiles")
    if source == "plugin" and isinstance(tiles, list) and len(tiles) == 2:
        words += f", blocks of {tiles[0]}×{tiles[1]}"
    return words


def run_source_words(extras: Iterable[Mapping[str, Any] | None]) -> str | None:
    """The sources of a run's points in words, each once, in the order first seen."""
    found: list[str] = []
    for extra in extras:
        words = source_words(extra)
        if words is not None and words not in found:
            found.append(words)
    return "; ".join(found) or None
