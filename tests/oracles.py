"""Test oracles: the plain, slow, obviously right statements of what the product computes fast.

They live with the tests because nothing in the product calls them: the unfused float64
attention the NumPy reference is checked against, and the launch order the cuTile kernel's
recorded programs are checked against (tests/gpu).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernels.reference import masked_softmax_product
from kernels.schedule import Schedule, visible


def naive_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    scale: float | None = None,
    mask: str = "none",
    input_pos: int = 0,
    window: int | None = None,
) -> np.ndarray:
    """Plain masked softmax(Q Kᵀ · scale) V in float64 with the whole score matrix; the K/V
    heads repeated for GQA. Rows that see no key are zeros, as the kernels write them."""
    group = q.shape[1] // k.shape[1]
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    qf = q.astype(np.float64)
    kf = np.repeat(k.astype(np.float64), group, axis=1)
    vf = np.repeat(v.astype(np.float64), group, axis=1)
    scores = (qf @ kf.swapaxes(-1, -2)) * scale
    seen = visible(q.shape[2], k.shape[2], mask, input_pos, window)
    return masked_softmax_product(scores, seen, vf)


def work_per_q_block(schedule: Schedule) -> list[int]:
    """Visited k-blocks of each q-block: the work of one program."""
    return [r.visited for r in schedule.k_ranges]


def program_order(schedule: Schedule, batch_heads: int, *, remap: bool) -> list[tuple[int, int]]:
    """(q_block, batch_head) in the order the kernel launches its programs.

    Without remapping the q-block varies fastest (grid x) and batch·head slowest. With
    remapping the heaviest q-blocks start first (so the long causal rows are not left for a
    tail wave) and, within a q-block, consecutive programs share one batch·head group so
    their K/V stay in L2. Without a mask every q-block has the same work, so there is
    nothing to balance and remapping keeps the plain order, which already runs all q-blocks
    of one batch·head together (the grouped order was slower there on the H200).
    """
    nq = schedule.n_q_blocks
    if not remap or schedule.mask == "none":
        return [(qb, bh) for bh in range(batch_heads) for qb in range(nq)]
    work = work_per_q_block(schedule)
    heavy_first = sorted(range(nq), key=lambda qb: (-work[qb], -qb))
    return [(qb, bh) for qb in heavy_first for bh in range(batch_heads)]


def launched_order(recorded: Any) -> list[tuple[int, int]]:
    """The (q_block, batch_head) pairs an instrumented launch ran, sorted by the program id
    that ran them (``recorded``: a :class:`kernels.cutile.blockmap.GpuBlockMap`)."""
    order = recorded.launch_order
    bh, qb = np.unravel_index(np.argsort(order, axis=None), order.shape)
    return [(int(a), int(c)) for c, a in zip(bh, qb, strict=True)]
