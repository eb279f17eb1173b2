"""The serving kernels' host schedules, on the CPU: the ragged key splits of a paged decode batch
(one long and many short requests keep every SM busy) and the varlen prefill's tile table (no
CTA past a sequence's end)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kernels.serving_schedule import (
    MAX_SPLITS,
    VARLEN_COLUMNS,
    key_blocks,
    one_unit_per_sequence,
    plan_splits,
    varlen_tiles,
)

H100_SLOTS = 132  # SMs, one decode CTA each
KV_HEADS = 8


def covered(schedule, seq_lens, block_n):
    """Each sequence's key blocks as the union of its units' ranges, checked disjoint."""
    seen = {b: [] for b in range(len(seq_lens))}
    for u in schedule.units:
        seen[u.seq].append((u.first_block, u.stop_block))
    for b, ranges in seen.items():
        ranges.sort()
        assert ranges[0][0] == 0 and ranges[-1][1] == key_blocks(seq_lens[b], block_n)
        for (_, hi), (lo, _) in itertools.pairwise(ranges):
            assert hi == lo, f"sequence {b}: units {ranges} leave a gap or overlap"
    return seen


def test_one_long_and_many_short_requests_are_cut_into_balanced_units() -> None:
    seq_lens = [32768] + [1024] * 63
    plan = plan_splits(seq_lens, 128, sm_slots=H100_SLOTS, ctas_per_unit=KV_HEADS)
    covered(plan, seq_lens, 128)
    sizes = [u.blocks for u in plan.units]
    # The long request is cut into several units, the short ones are not cut below 4 blocks.
    assert plan.splits[0] >= 4 and all(n <= 2 for n in plan.splits[1:])
    # Handed to the SMs in launch order, the batch ends near the ideal; unsplit it waits on
    # the one 256-block CTA per head.
    span = plan.makespan(H100_SLOTS, KV_HEADS)
    ideal = plan.ideal_span(H100_SLOTS, KV_HEADS)
    unsplit = one_unit_per_sequence(seq_lens, 128)
    assert span <= 1.3 * ideal, (span, ideal)
    assert unsplit.makespan(H100_SLOTS, KV_HEADS) >= 4 * span
    # Longest units first, every slot a unit's own, a sequence's slots adjacent.
    assert sizes == sorted(sizes, reverse=True)
    table = plan.unit_table
    assert sorted(table[:, 1].tolist()) == list(range(plan.slots))
    seqs = plan.sequence_table
    for b, (first, n) in enumerate(seqs.tolist()):
        assert sorted(table[table[:, 0] == b, 1].tolist()) == list(range(first, first + n))


def test_a_batch_that_fills_the_sms_whole_is_not_cut() -> None:
    # 16 x 8k with 8 KV heads is 128 CTAs for 132 SMs: cut 4 ways it ran 9 % slower on an H100
    # (192.3 against 176.4 us), the combine and each unit's fixed cost for no better balance.
    seq_lens = [8192] * 16
    for block_n in (64, 128):
        plan = plan_splits(seq_lens, block_n, sm_slots=H100_SLOTS, ctas_per_unit=KV_HEADS)
        assert plan.splits == (1,) * 16 and not plan.needs_combine
        cut = plan_splits(
            seq_lens, block_n, sm_slots=H100_SLOTS, ctas_per_unit=KV_HEADS, min_blocks=32
        )
        assert plan.estimated_end(H100_SLOTS, KV_HEADS) <= cut.estimated_end(H100_SLOTS, KV_HEADS)
    # Half the heads' CTAs would leave most SMs idle: the same lengths at 2 KV heads are cut.
    few = plan_splits(seq_lens, 128, sm_slots=H100_SLOTS, ctas_per_unit=2)
    assert min(few.splits) >= 2 and few.needs_combine


def test_random_batches_cover_every_key_block_once(rng: np.random.Generator) -> None:
    for _ in range(20):
        batch = int(rng.integers(1, 80))
        seq_lens = rng.integers(0, 40000, size=batch).tolist()
        block_n = int(rng.choice([16, 64, 128, 256]))
        plan = plan_splits(seq_lens, block_n, sm_slots=int(rng.integers(1, 300)))
        covered(plan, seq_lens, block_n)
        assert max(plan.splits) <= MAX_SPLITS
        assert plan.slots == sum(plan.splits) == len(plan.units)


def test_a_sequence_with_no_key_is_one_empty_unit() -> None:
    plan = plan_splits([0, 5, 0], 64, sm_slots=132)
    assert plan.splits == (1, 1, 1)
    assert sorted((u.seq, u.blocks) for u in plan.units) == [(0, 0), (1, 1), (2, 0)]
    assert not plan.needs_combine


@pytest.mark.parametrize("bad", [dict(block_n=0), dict(sm_slots=0)])
def test_plan_splits_refuses_nonsense(bad: dict) -> None:
    args = dict(block_n=64, sm_slots=132) | bad
    name = next(iter(bad))
    with pytest.raises(ValueError, match=f"^{name} must be positive"):
        plan_splits([10], args.pop("block_n"), **args)


def test_varlen_tiles_hold_one_row_per_q_block_with_a_query() -> None:
    cu_q = [0, 1, 1, 130, 130 + 64]  # lengths 1, 0, 129, 64
    cu_k = [0, 7, 7, 7 + 200, 7 + 200 + 64]  # lengths 7, 0, 200, 64
    table = varlen_tiles(cu_q, cu_k, 64, 64, causal=True)
    col = {name: i for i, name in enumerate(VARLEN_COLUMNS)}
    seqs = sorted(table[:, col["seq"]].tolist())
    assert seqs == [0, 2, 2, 2, 3]  # 1 + 0 + cdiv(129, 64) + 1 q-blocks; no CTA for seq 1
    for row in table:
        q_start, q_len, _, _, qb = row[:5]
        assert qb * 64 < q_len  # no block past the sequence's end
        assert q_start == cu_q[row[col["seq"]]]
    # Causal, bottom-right: the last q-block of sequence 2 sees all 200 keys (4 blocks), its
    # first only keys up to 63 + 71 (3 blocks); rows come most work first.
    work = table[:, col["work"]].tolist()
    assert work == sorted(work, reverse=True) and work[0] == 4
    first_block = table[(table[:, col["seq"]] == 2) & (table[:, col["q_block"]] == 0)]
    assert first_block[0, col["work"]] == 3
    # Cached: the same cu_seqlens give the same (read-only) table object.
    assert varlen_tiles(cu_q, cu_k, 64, 64, causal=True) is table
    assert not table.flags.writeable
