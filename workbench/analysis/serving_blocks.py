"""What a CTA reads in a ragged batch, per sequence (the reference model): its pages and the
wasted tail of its last page, its key blocks and which split reads them, the block map of its
own tile schedule; and the batch's FLOPs counted on its real lengths.

Each sequence runs the tile schedule (:mod:`kernels.schedule`) of its own lengths, its key
range split as the decode form splits it (auto: over the whole batch's grid, so a long
sequence among many short ones gets more splits). The batch's block map stacks the
sequences' maps, one below the other, padded with skipped blocks to the longest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels import schedule
from kernels.schedule import BlockKind, Schedule, visible_pairs
from workbench.batch_lengths import pages_of
from workbench.config import KernelConfig, Problem


@dataclass(frozen=True)
class _Shape:
    """One sequence's sizes as a schedule reads them (:class:`kernels.schedule.ProblemShape`),
    the whole batch's count kept so that an auto split sees the batch's grid."""

    batch: int
    heads: int
    kv_heads: int | None
    q_len: int
    k_len: int
    input_pos: int
    group_size: int


@dataclass(frozen=True)
class SequenceRead:
    """What the CTAs of one sequence read (one KV head; every head reads alike)."""

    index: int
    queries: int
    keys: int
    pages: int | None  # None on a contiguous cache
    wasted_tokens: int  # slots of the last page past the sequence's keys (0 contiguous)
    key_blocks: int
    splits: tuple[tuple[int, int], ...]  # key blocks [lo, hi) each split reads
    block_map: np.ndarray  # (q-blocks, k-blocks) BlockKind codes

    def to_dict(self) -> dict[str, object]:
        return {
            "index": self.index, "queries": self.queries, "keys": self.keys,
            "pages": self.pages, "wasted_tokens": self.wasted_tokens,
            "key_blocks": self.key_blocks, "splits": [list(s) for s in self.splits],
            "rows": max(1, self.block_map.shape[0]),  # its rows of the stacked map
        }  # fmt: skip


def sequence_schedule(problem: Problem, config: KernelConfig, index: int) -> Schedule | None:
    """The tile schedule of sequence ``index`` (None for one without keys or queries)."""
    lq, lk = problem.q_lens[index], problem.k_lens[index]
    if lq == 0 or lk == 0:
        return None
    shape = _Shape(problem.batch, problem.heads, problem.kv_heads, lq, lk, max(lk - lq, 0),
                   problem.group_size)  # fmt: skip
    return schedule.schedule_of(config.knob_values(), shape, config.mask, config.window)


def sequence_reads(problem: Problem, config: KernelConfig) -> list[SequenceRead]:
    """Every sequence's reads, in the batch's order."""
    reads = []
    for b, (lq, lk) in enumerate(zip(problem.q_lens, problem.k_lens)):
        plan = sequence_schedule(problem, config, b)
        pages = pages_of(lk, problem.page_size) if problem.page_size else None
        wasted = pages * problem.page_size - lk if pages is not None and problem.page_size else 0
        grid = plan.block_map if plan is not None else np.full((1, 0), BlockKind.SKIPPED, np.int8)
        splits = tuple(plan.split_ranges) if plan is not None else ()
        keys_blocks = plan.n_k_blocks if plan is not None else 0
        reads.append(SequenceRead(b, lq, lk, pages, wasted, keys_blocks, splits, grid))
    return reads


def with_sequences(
    extra: Mapping[str, Any] | None, problem: Problem, config: KernelConfig
) -> dict[str, Any]:
    """A ragged point's ``extra`` with its sequences' reads: those it stored, else the ones its
    problem and config give (what its stored map was made of; the GPU backends' points stored
    none before 2026-12-07, so the window drew their ragged maps as one dense batch)."""
    found = dict(extra or {})
    if problem.lengths is not None and not found.get("sequences"):
        found["sequences"] = [r.to_dict() for r in sequence_reads(problem, config)]
    return found


def ragged_method(problems: list[Problem]) -> tuple[str, str] | None:
    """A report's method words for ragged batches, (problem, measure), or None where none of
    ``problems`` is one: each batch by its summary, and the rule its figures follow, per
    sequence (a dense batch's ``2·B·Hkv·k_len·D`` would count 64 sequences at the longest's
    length)."""
    ragged = [q for q in problems if q.lengths is not None]
    if not ragged:
        return None
    shape = "; ".join(dict.fromkeys(q.summary() for q in ragged))
    if all(q.varlen for q in ragged):
        measure = (
            "TFLOP/s = 2·H·(D+Dv) per visible (query, key) pair of each sequence on its own "
            "(a causal sequence's half) / median time"
        )
    else:
        measure = (
            "GB/s = bytes of K and V each sequence reads (its own keys; on a paged cache whole "
            "pages, the last one's tail included, a shared page once), Hkv·(D+Dv)·itemsize a "
            "key position / median time"
        )
    return shape, measure


def own_block_counts(problem: Problem, config: KernelConfig) -> dict[str, int]:
    """Blocks of each kind within each sequence's own key blocks: a ragged point's counts
    (`show`, the CSV). The stacked map's own count calls the grey right of a short sequence
    "skipped" (27,851 of the H100 paged decode's 30,848), which is the picture's padding."""
    counts = dict.fromkeys(("computed", "masked", "skipped"), 0)
    for read in sequence_reads(problem, config):
        for name, count in schedule.kind_counts(read.block_map).items():
            counts[name] += count
    return counts


def point_block_counts(run: Any, point: Any) -> dict[str, int]:
    """A stored point's blocks of each kind, as `show` and the CSV give them: a ragged batch's
    within each sequence's own key blocks (:func:`own_block_counts`), else as stored."""
    if run.problem.lengths is not None:
        return own_block_counts(run.point_problem(point), run.config)
    return {
        "computed": point.blocks_computed,
        "masked": point.blocks_masked,
        "skipped": point.blocks_skipped,
    }


def stacked_block_map(reads: list[SequenceRead]) -> np.ndarray:
    """The sequences' block maps one below the other, padded with skipped blocks."""
    width = max(1, *(r.block_map.shape[1] for r in reads))
    rows = []
    for r in reads:
        grid = np.full((max(1, r.block_map.shape[0]), width), BlockKind.SKIPPED, dtype=np.int8)
        grid[: r.block_map.shape[0], : r.block_map.shape[1]] = r.block_map
        rows.append(grid)
    return np.concatenate(rows, axis=0)


def serving_flops(problem: Problem, config: KernelConfig) -> int:
    """2·H·(D + Dv) per visible (query, key) pair of each sequence on its own: a varlen
    prefill's causal mask the conventional half per sequence (lq·lk/2), decode's queries and
    any window counted exactly; nothing for an empty sequence."""
    width = 2 * problem.heads * (problem.head_dim + problem.value_dim)
    window = config.window if config.mask == "window" else None
    total = 0
    for lq, lk in zip(problem.q_lens, problem.k_lens):
        if config.mask == "causal" and problem.varlen:
            total += lq * lk // 2
        else:
            total += visible_pairs(lq, lk, config.mask, lk - lq, window)
    return width * total
