"""Host-side schedules of the serving kernels: which CTA runs what, decided once per batch.

Two tables, both plain Python (no GPU, no cuTile), both built once per batch shape and reused
for every launch on it:

- :func:`varlen_tiles`: the varlen prefill's grid, one row per (sequence, q-block) that holds
  at least one query; no CTA for a block past a sequence's end, none for an empty sequence.
  Rows come longest work first, so the long causal tiles start before the short ones.
- :func:`plan_splits`: the paged decode's ragged key splits. A batch of one 32k request and
  63 of 1k has 760 key blocks of 128; one CTA per sequence and KV head leaves the SMs waiting
  on the long one (256 blocks against an average of 12). Each sequence's key range is cut into
  work units of about equal key blocks (a short sequence stays one unit), units run longest
  first, and the combine merges each sequence's own units (FlashInfer's scheduler and FA3's
  ``num_splits`` heuristic address the same imbalance). A batch that already fills the SMs
  whole is not cut: the split count with the shortest estimated end, combine included, wins.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# The combine holds every split of a sequence in one tile ([splits, 16 rows, >= 8 columns]
# within 4096 float32, kernels.cutile.combine_shape): at most 32 splits a sequence.
MAX_SPLITS = 32
# A unit shorter than this many key blocks costs more in its fixed part (Q load, partial
# store, its share of the combine) than splitting it saves.
MIN_UNIT_BLOCKS = 4
# The pieces the longest sequence may be cut into, tried in turn (the others are cut into
# pieces of about the same number of key blocks): list scheduling's end moves in steps with the
# piece size, so a few sizes are tried rather than one aimed at a number of waves.
LONGEST_PIECES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
# A unit's fixed cost in keys (Q load, the first loads in flight, the partial store) and the
# combine launch's, in the makespan estimate. On an H100, 16 sequences of 8k at pages of 64
# ran 9 % slower cut 4 ways over 64-key blocks than whole (192.3 against 176.4 us,
# bench/results/h100-serving.db): about 4 us a unit beyond the combine's 3 us, where a CTA
# reads 64 keys of D 128 in about 1.4 us.
UNIT_OVERHEAD_KEYS = 192
COMBINE_KEYS = 128
# Columns of the varlen tile table (int32): where its queries and keys start, how many.
VARLEN_COLUMNS = ("q_start", "q_len", "k_start", "k_len", "q_block", "seq", "work", "pad")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def key_blocks(seq_len: int, block_n: int) -> int:
    """Key blocks of ``block_n`` keys a sequence of ``seq_len`` keys spans (the last partly)."""
    return cdiv(max(seq_len, 0), block_n)


@dataclass(frozen=True)
class WorkUnit:
    """One CTA's share of a sequence's keys (for each KV head and row block): key blocks
    ``[first_block, stop_block)`` of sequence ``seq``, its ``split``-th piece."""

    seq: int
    split: int
    first_block: int
    stop_block: int

    @property
    def blocks(self) -> int:
        return self.stop_block - self.first_block


@dataclass(frozen=True)
class SplitSchedule:
    """The ragged splits of one decode batch: ``units`` in launch order (most key blocks
    first), ``splits[b]`` units of sequence ``b`` whose partial outputs sit at slots
    ``first_slot[b] .. first_slot[b] + splits[b] - 1`` (a sequence's slots are adjacent, so
    the combine reads them as one slice)."""

    block_n: int
    units: tuple[WorkUnit, ...]
    splits: tuple[int, ...]
    first_slot: tuple[int, ...]

    @property
    def slots(self) -> int:
        """Partial outputs the split kernel writes (one per unit)."""
        return len(self.units)

    @property
    def needs_combine(self) -> bool:
        return any(n > 1 for n in self.splits)

    def slot_of(self, unit: WorkUnit) -> int:
        return self.first_slot[unit.seq] + unit.split

    @functools.cached_property
    def unit_table(self) -> np.ndarray:
        """The kernel's ``Units`` argument, one row per unit in launch order: sequence, slot,
        first key block, stop key block (int32); made once, read-only."""
        rows = [(u.seq, self.slot_of(u), u.first_block, u.stop_block) for u in self.units]
        table = np.array(rows, dtype=np.int32).reshape(len(rows), 4)
        table.flags.writeable = False
        return table

    @functools.cached_property
    def sequence_table(self) -> np.ndarray:
        """The combine's ``SeqSplits`` argument: per sequence its first slot and split count."""
        table = np.array(list(zip(self.first_slot, self.splits, strict=True)), dtype=np.int32)
        table = table.reshape(len(self.splits), 2)
        table.flags.writeable = False
        return table

    def makespan(self, sm_slots: int, ctas_per_unit: int = 1) -> float:
        """When the last CTA ends, in key-block times, if each of ``sm_slots`` slots takes the
        next CTA in launch order as it frees (how the hardware hands out CTAs); every unit
        runs ``ctas_per_unit`` CTAs (KV heads × row blocks), adjacent in launch order."""
        free = [0.0] * max(sm_slots, 1)
        overhead = UNIT_OVERHEAD_KEYS / self.block_n
        for unit in self.units:
            cost = unit.blocks + overhead
            for _ in range(ctas_per_unit):
                heapq.heappush(free, heapq.heappop(free) + cost)
        return max(free)

    def ideal_span(self, sm_slots: int, ctas_per_unit: int = 1) -> float:
        """The makespan of perfectly divisible work: all key blocks spread evenly."""
        overhead = UNIT_OVERHEAD_KEYS / self.block_n
        total = sum(u.blocks for u in self.units) + overhead * len(self.splits)
        return total * ctas_per_unit / max(sm_slots, 1)

    def estimated_end(self, sm_slots: int, ctas_per_unit: int = 1) -> float:
        """The makespan with the combine launch after it where a sequence is split."""
        combine = COMBINE_KEYS / self.block_n if self.needs_combine else 0.0
        return self.makespan(sm_slots, ctas_per_unit) + combine


def _even_pieces(blocks: int, pieces: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` of ``pieces`` runs covering ``blocks`` whose sizes differ by at most one."""
    base, extra = divmod(blocks, pieces)
    out, lo = [], 0
    for i in range(pieces):
        hi = lo + base + (1 if i < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


def plan_splits(
    seq_lens: Sequence[int],
    block_n: int,
    *,
    sm_slots: int,
    ctas_per_unit: int = 1,
    min_blocks: int = MIN_UNIT_BLOCKS,
    max_splits: int = MAX_SPLITS,
) -> SplitSchedule:
    """Key splits per sequence for ``sm_slots`` CTA slots (SMs × CTAs an SM holds), each unit
    running ``ctas_per_unit`` CTAs (KV heads × row blocks).

    A chunk is the key blocks per unit: the longest sequence's blocks over each count of
    :data:`LONGEST_PIECES`, at least ``min_blocks``; each sequence is cut into as many even
    pieces of about that chunk as it needs (at most ``max_splits``). Of those cuts (the first
    is none at all) the one whose estimated end (:meth:`SplitSchedule.estimated_end`) is
    soonest wins, the fewer units on a tie. A sequence with no key is one unit of no block
    (its rows get 0 and -inf).
    """
    if block_n <= 0:
        raise ValueError(f"block_n must be positive, got {block_n}")
    if sm_slots <= 0:
        raise ValueError(f"sm_slots must be positive, got {sm_slots}")
    blocks = [key_blocks(int(n), block_n) for n in seq_lens]
    longest = max(blocks, default=1) or 1
    chunks = {longest} | {max(min_blocks, cdiv(longest, n), 1) for n in LONGEST_PIECES}
    schedules = [_cut(blocks, block_n, chunk, max_splits) for chunk in sorted(chunks)]
    return min(
        schedules, key=lambda s: (round(s.estimated_end(sm_slots, ctas_per_unit), 6), s.slots)
    )


def _cut(blocks: list[int], block_n: int, chunk: int, max_splits: int) -> SplitSchedule:
    """Each sequence of ``blocks`` key blocks cut into even pieces of about ``chunk``."""
    splits = [min(max(cdiv(n, chunk), 1), max_splits) for n in blocks]
    first_slot, slot = [], 0
    for n in splits:
        first_slot.append(slot)
        slot += n
    units = [
        WorkUnit(b, s, lo, hi)
        for b, (n_blocks, n_splits) in enumerate(zip(blocks, splits, strict=True))
        for s, (lo, hi) in enumerate(_even_pieces(n_blocks, n_splits))
    ]
    # Longest first (a stable sort: ties keep batch order, so a sequence's units stay close).
    units.sort(key=lambda u: -u.blocks)
    return SplitSchedule(block_n, tuple(units), tuple(splits), tuple(first_slot))


def one_unit_per_sequence(seq_lens: Sequence[int], block_n: int) -> SplitSchedule:
    """The schedule without splits (each sequence one CTA per KV head), in batch order: what
    the ragged splits are measured against."""
    units = tuple(WorkUnit(b, 0, 0, key_blocks(int(n), block_n)) for b, n in enumerate(seq_lens))
    n = len(units)
    return SplitSchedule(block_n, units, (1,) * n, tuple(range(n)))


@functools.lru_cache(maxsize=64)
def _varlen_tiles(
    cu_q: tuple[int, ...],
    cu_k: tuple[int, ...],
    block_m: int,
    block_n: int,
    causal: bool,
    window: int | None,
) -> np.ndarray:
    rows = []
    for b in range(len(cu_q) - 1):
        q0, lq = cu_q[b], cu_q[b + 1] - cu_q[b]
        k0, lk = cu_k[b], cu_k[b + 1] - cu_k[b]
        for qb in range(cdiv(lq, block_m)):
            rows.append(
                (q0, lq, k0, lk, qb, b, _tile_work(qb, lq, lk, block_m, block_n, causal, window), 0)
            )
    table = np.array(rows, dtype=np.int32).reshape(len(rows), len(VARLEN_COLUMNS))
    if len(rows):
        table = table[np.argsort(-table[:, 6], kind="stable")]
    table.flags.writeable = False
    return table


def _tile_work(
    qb: int, lq: int, lk: int, block_m: int, block_n: int, causal: bool, window: int | None
) -> int:
    """Key blocks the q-block ``qb`` of a sequence reads (its rows see keys up to
    ``i + lk - lq`` when causal, and above ``i + lk - lq - window`` with a window)."""
    shift = lk - lq
    first, last = qb * block_m, min((qb + 1) * block_m, lq) - 1
    hi_key = min(last + shift, lk - 1) if causal or window is not None else lk - 1
    lo_key = max(first + shift - window + 1, 0) if window is not None else 0
    if hi_key < lo_key:
        return 0
    return hi_key // block_n - lo_key // block_n + 1


def varlen_tiles(
    cu_seqlens_q: Sequence[int],
    cu_seqlens_k: Sequence[int],
    block_m: int,
    block_n: int,
    *,
    causal: bool,
    window: int | None = None,
) -> np.ndarray:
    """The varlen prefill's ``Tiles`` argument: one int32 row per (sequence, q-block) with a
    query, columns :data:`VARLEN_COLUMNS`, most key blocks first; cached per cu_seqlens."""
    return _varlen_tiles(
        tuple(int(x) for x in cu_seqlens_q),
        tuple(int(x) for x in cu_seqlens_k),
        block_m,
        block_n,
        causal,
        window,
    )
