"""Attention against a paged KV cache on the GPU (decode and chunked prefill), torch tensors in,
``(out, lse)`` out; FlashAttention's paged conventions.

- q ``(B, q_len, Hq, D)``: each sequence's last q_len positions, causal among themselves
  (q_len 1-16 is decode; longer is a chunked prefill against the cache).
- k_cache ``(num_pages, page_size, Hkv, D)``, v_cache ``(num_pages, page_size, Hkv, Dv)``;
  ``block_table`` int32 ``(B, max_pages_per_seq)``: pages in any order, shared pages allowed;
  ``seq_lens_k`` int32 ``(B,)``, keys per sequence (the last page partly filled).
- out ``(B, q_len, Hq, Dv)``; lse ``(B, Hq, q_len)`` float32, natural log, ``-inf`` (and 0 in
  out) for a query that sees no key.

The key range of each sequence is split into work units (:func:`kernels.serving_schedule.
plan_splits`): a batch of one long and many short requests keeps every SM busy; the combine
merges each sequence's units. :func:`plan_paged` makes the plan once per batch (as FlashInfer's
``plan()``); :func:`paged_attention` takes it, or makes one. Input checks run first, on shapes
and host copies of the tables, before cuda.tile is imported.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels.cutile.combine_shape import COMBINE_COLUMNS, COMBINE_ELEMENTS
from kernels.cutile.serving_checks import (
    check_head_dims,
    check_heads,
    check_same_dtype,
    check_tensor,
    host_ints,
)
from kernels.decode_choice import decode_tile_n
from kernels.head_dims import pads_head_dim, tile_head_dim
from kernels.serving_schedule import (
    MAX_SPLITS,
    SplitSchedule,
    WorkUnit,
    key_blocks,
    plan_splits,
)

LOG2E = 1.4426950408889634
PAGE_SIZES = (16, 32, 64, 128, 256)
# Longest q_len (a chunk of prefill against the cache) the kernel takes.
MAX_Q_LEN = 1024
# Rows of one tile: at least a tensor-core MMA's 16, at most 64 (a chunked prefill's tiles).
MIN_ROWS, MAX_ROWS = 16, 64
BLOCK_N_CHOICES = (16, 32, 64, 128)
K_LATENCY, V_LATENCY = 2, 4
# CTAs of the combine an SM holds: 4 (64 registers, no spill, with or without the LSE; at 8 the
# one without it spills 64 B a thread on sm_90; without a hint tileiras takes 255 registers, one
# CTA an SM, and the combine runs in waves, as the contiguous decode's did).
COMBINE_CTAS_PER_SM = 4
# Hopper's SM count where the device does not say (offline plans).
DEFAULT_SMS = 132


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


@dataclass(frozen=True)
class PagedShape:
    """What a paged call's inputs pose, once checked."""

    batch: int
    q_len: int
    heads: int
    kv_heads: int
    head_dim: int
    head_dim_v: int
    num_pages: int
    page_size: int
    dtype: str
    seq_lens: tuple[int, ...]

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads


def check_paged(
    q: Any, k_cache: Any, v_cache: Any, block_table: Any, seq_lens_k: Any
) -> PagedShape:
    """The shape of a paged call; ValueError (one line, naming the argument) for bad input."""
    batch, q_len, heads, d = check_tensor(q, "q", "(batch, q_len, heads, head_dim)")
    pages, page, kv_heads, dk = check_tensor(
        k_cache, "k_cache", "(num_pages, page_size, kv_heads, head_dim)"
    )
    pages_v, page_v, kv_heads_v, dv = check_tensor(
        v_cache, "v_cache", "(num_pages, page_size, kv_heads, head_dim_v)"
    )
    dtype = check_same_dtype(q=q, k_cache=k_cache, v_cache=v_cache)
    if page not in PAGE_SIZES:
        raise ValueError(
            f"k_cache's page size {page} (shape[1]) is not one the kernel takes: "
            f"{', '.join(map(str, PAGE_SIZES))}"
        )
    if (pages_v, page_v, kv_heads_v) != (pages, page, kv_heads):
        raise ValueError(
            f"v_cache is {(pages_v, page_v, kv_heads_v)} pages × page size × heads but k_cache "
            f"is {(pages, page, kv_heads)}"
        )
    if dk != d:
        raise ValueError(f"k_cache's head dim {dk} differs from q's {d}")
    check_heads(heads, kv_heads, "q", "k_cache")
    check_head_dims(d, dv, "q", "v_cache")
    if not 1 <= q_len <= MAX_Q_LEN:
        raise ValueError(f"q's q_len (shape[1]) must be 1 to {MAX_Q_LEN}, got {q_len}")
    table = host_ints(block_table, "block_table", 2)
    lens = host_ints(seq_lens_k, "seq_lens_k", 1)
    if table.shape[0] != batch:
        raise ValueError(f"block_table has {table.shape[0]} rows but q has batch {batch}")
    if lens.shape[0] != batch:
        raise ValueError(f"seq_lens_k has {lens.shape[0]} lengths but q has batch {batch}")
    if lens.size and lens.min() < 0:
        b = int(np.argmin(lens))
        raise ValueError(f"seq_lens_k[{b}] = {lens[b]} is negative")
    need = -(-lens // page)
    if lens.size and need.max() > table.shape[1]:
        b = int(np.argmax(need))
        raise ValueError(
            f"seq_lens_k[{b}] = {lens[b]} needs {need[b]} pages of {page} but block_table has "
            f"{table.shape[1]} columns"
        )
    for b in range(batch):
        used = table[b, : need[b]]
        bad = np.flatnonzero((used < 0) | (used >= pages))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"block_table[{b}, {i}] = {used[i]} is out of range: k_cache has {pages} pages"
            )
    return PagedShape(
        batch, q_len, heads, kv_heads, d, dv, pages, page, dtype, tuple(lens.tolist())
    )


@dataclass(frozen=True)
class PagedPlan:
    """How one batch runs: the tile's rows (``rows_q`` positions × ``rows_g`` heads), key
    blocks of ``block_n``, and the work units of the key splits."""

    rows_q: int
    rows_g: int
    block_n: int
    q_blocks: int
    schedule: SplitSchedule
    seq_lens: tuple[int, ...]
    page_size: int

    @property
    def block_m(self) -> int:
        return self.rows_q * self.rows_g


def default_block_n(page_size: int, head_dim: int = 128) -> int:
    """Key block per step: 128 keys from pages of 32 up (four pages of 32 or two of 64 joined,
    one TMA load a block; two blocks a page of 256), 64 keys for pages of 16 (four joined);
    at most the decode form's 32 KB of K (:func:`kernels.decode_choice.decode_tile_n`: 64 keys
    at D 256).

    Why (compiled offline for sm_90, tileiras 13.4, bf16, D 128, q_len 1, group 4): a 16-key
    block spills 456 B a thread whichever way its page comes, eight 16-token pages joined into
    128 keys spill 464 B, while two to four pages joined into 32-128 keys and one page of
    32-256 tokens spill nothing (tests/test_serving_kernels_offline.py). Measured on an H100
    (16 sequences of 8k at pages of 64, one split, bench/results/h100-serving.db): 128-key
    blocks ran 173.8 us, 64-key blocks 176.4 us, the dense decode over 128-key blocks 173.0.
    """
    return min(64 if page_size < 32 else 128, decode_tile_n(head_dim))


def tile_rows(q_len: int, group: int) -> tuple[int, int, int]:
    """(positions, heads, q-blocks) of the tile layout: the group whole, as many positions as
    fit in :data:`MAX_ROWS` rows, at least :data:`MIN_ROWS` rows."""
    rows_g = _pow2(group)
    rows_q = min(_pow2(q_len), max(MAX_ROWS // rows_g, 1))
    rows_q = max(rows_q, MIN_ROWS // rows_g, 1)
    return rows_q, rows_g, -(-q_len // rows_q)


def plan_paged(
    seq_lens: Any,
    *,
    q_len: int,
    heads: int,
    kv_heads: int,
    page_size: int,
    block_n: int | None = None,
    sm_count: int = DEFAULT_SMS,
    ctas_per_sm: int = 1,
    split: bool = True,
    splits: int | None = None,
    head_dim: int = 128,
) -> PagedPlan:
    """The plan of a batch with these key lengths (a host sequence, NumPy or torch array).
    ``block_n`` None: :func:`default_block_n` of the page and ``head_dim``. ``splits``: every
    sequence cut into that many even pieces of its key blocks (fewer where it has fewer
    blocks) instead of the ragged chunks; ValueError past the combine's limit."""
    if hasattr(seq_lens, "detach"):
        seq_lens = seq_lens.detach().cpu().numpy()
    lens = [int(n) for n in np.asarray(seq_lens).reshape(-1)]
    block_n = default_block_n(page_size, head_dim) if block_n is None else block_n
    if block_n not in BLOCK_N_CHOICES:
        raise ValueError(f"block_n must be one of {BLOCK_N_CHOICES}, got {block_n!r}")
    if page_size not in PAGE_SIZES:
        raise ValueError(f"page_size must be one of {PAGE_SIZES}, got {page_size!r}")
    if kv_heads < 1 or heads < 1 or heads % kv_heads:
        raise ValueError(f"heads={heads} is not a multiple of kv_heads={kv_heads}")
    rows_q, rows_g, q_blocks = tile_rows(q_len, heads // kv_heads)
    # The combine holds a sequence's splits × rows × 8 columns within 4096 float32.
    max_splits = max(1, min(MAX_SPLITS, COMBINE_ELEMENTS // (rows_q * rows_g * 8))) if split else 1
    if splits is not None:
        if not 1 <= splits <= max_splits:
            raise ValueError(f"splits must be 1 to {max_splits} for this batch, got {splits!r}")
        schedule = even_splits(lens, block_n, splits)
        return PagedPlan(rows_q, rows_g, block_n, q_blocks, schedule, tuple(lens), page_size)
    schedule = plan_splits(
        lens, block_n, sm_slots=sm_count * ctas_per_sm, ctas_per_unit=kv_heads * q_blocks,
        max_splits=max_splits,
    )  # fmt: skip
    return PagedPlan(rows_q, rows_g, block_n, q_blocks, schedule, tuple(lens), page_size)


def even_splits(seq_lens: list[int], block_n: int, splits: int) -> SplitSchedule:
    """Each sequence's key blocks cut into ``splits`` even pieces (one a block where it has
    fewer; one unit of no block where it has none), longest units first."""
    units, counts, first_slot, slot = [], [], [], 0
    for b, n in enumerate(seq_lens):
        blocks = key_blocks(n, block_n)
        pieces = max(1, min(splits, blocks))
        base, extra = divmod(blocks, pieces)
        lo = 0
        for i in range(pieces):
            hi = lo + base + (1 if i < extra else 0)
            units.append(WorkUnit(b, i, lo, hi))
            lo = hi
        counts.append(pieces)
        first_slot.append(slot)
        slot += pieces
    units.sort(key=lambda u: -u.blocks)
    return SplitSchedule(block_n, tuple(units), tuple(counts), tuple(first_slot))


def kernel_constants(
    s: PagedShape, plan: PagedPlan, *, scale: float, with_lse: bool, fast_math: bool = True
) -> tuple[Any, ...]:
    """The scalars and constants of the split kernel, in its parameter order."""
    d_padded = pads_head_dim(s.head_dim) or pads_head_dim(s.head_dim_v)
    return (
        scale * LOG2E,
        s.q_len,
        (plan.block_m, plan.block_n, tile_head_dim(s.head_dim)),
        (tile_head_dim(s.head_dim_v),),
        (1, fast_math, K_LATENCY, V_LATENCY, 0, d_padded),
        (plan.rows_q, plan.rows_g, s.page_size, plan.schedule.needs_combine, with_lse),
    )


def combine_constants(s: PagedShape, plan: PagedPlan, *, with_lse: bool) -> tuple[Any, ...]:
    """The combine's tile (splits padded, positions, heads, columns) and its LSE switch: at
    most 32 columns (wider combines met misaligned addresses on the H200,
    kernels.cutile.combine_shape) and about 4096 float32 a tile."""
    tile_s = _pow2(max(plan.schedule.splits))
    tile_dc = min(
        tile_head_dim(s.head_dim_v), COMBINE_COLUMNS,
        max(8, COMBINE_ELEMENTS // (tile_s * plan.block_m)),
    )  # fmt: skip
    return ((tile_s, plan.rows_q, plan.rows_g, tile_dc), with_lse)


def paged_attention(
    q: Any,
    k_cache: Any,
    v_cache: Any,
    block_table: Any,
    seq_lens_k: Any,
    **options: Any,
) -> tuple[Any, Any]:
    """Attention of ``q`` against the paged cache; ``(out, lse)`` (lse None without
    ``with_lse``). ``options``: those of :func:`prepare_paged`."""
    run, out, lse = prepare_paged(q, k_cache, v_cache, block_table, seq_lens_k, **options)
    run()
    return out, lse


def prepare_paged(
    q: Any,
    k_cache: Any,
    v_cache: Any,
    block_table: Any,
    seq_lens_k: Any,
    *,
    plan: PagedPlan | None = None,
    scale: float | None = None,
    block_n: int | None = None,
    with_lse: bool = True,
    ctas_per_sm: int | None = None,
) -> tuple[Callable[[], None], Any, Any]:
    """Check, plan and allocate once: ``(run, out, lse)``, where ``run()`` launches the split
    kernel (and the combine) into ``out`` and ``lse`` on torch's current stream, with no host
    work (a timing loop or a CUDA graph replays it). ``plan``: :func:`plan_paged` of this
    batch (made here without one, on the device's SM count)."""
    s = check_paged(q, k_cache, v_cache, block_table, seq_lens_k)
    import torch

    for name, arr in (("block_table", block_table), ("seq_lens_k", seq_lens_k)):
        if arr.device != q.device:
            raise ValueError(f"{name} must be on q's device ({q.device}), got {arr.device}")
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if cache.stride(-1) != 1:
            raise ValueError(f"{name}'s head dim must be contiguous (stride 1)")
    q, block_table, seq_lens_k = q.contiguous(), block_table.contiguous(), seq_lens_k.contiguous()
    if plan is None:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count
        plan = plan_paged(
            s.seq_lens, q_len=s.q_len, heads=s.heads, kv_heads=s.kv_heads,
            page_size=s.page_size, block_n=block_n, sm_count=sms, ctas_per_sm=ctas_per_sm or 1,
            head_dim=s.head_dim,
        )  # fmt: skip
    check_plan(plan, s)
    scale = 1.0 / math.sqrt(s.head_dim) if scale is None else float(scale)
    out = torch.empty((s.batch, s.q_len, s.heads, s.head_dim_v), dtype=q.dtype, device=q.device)
    lse = torch.empty((s.batch, s.heads, s.q_len), dtype=torch.float32, device=q.device)
    kept_lse = lse if with_lse else None
    if s.batch == 0:
        return (lambda: None), out, kept_lse
    from kernels.cutile.device_paged import fmha_paged_kernel, paged_combine_kernel
    from kernels.cutile.serving_launch import device_table, launch, variant

    g, hkv = s.group, s.kv_heads
    out5 = out.view(s.batch, s.q_len, hkv, g, s.head_dim_v).permute(0, 2, 1, 3, 4)
    lse4 = lse.view(s.batch, hkv, g, s.q_len)
    split = plan.schedule.needs_combine

    def dummy(rank: int) -> Any:  # one per parameter: a launch's arrays must not alias
        return torch.empty((1,) * rank, dtype=torch.float32, device=q.device)

    rows = plan.q_blocks * plan.block_m
    slots = plan.schedule.slots
    parts = torch.empty((slots, hkv, rows, s.head_dim_v), dtype=torch.float32, device=q.device)
    lse_parts = torch.empty((slots, hkv, rows), dtype=torch.float32, device=q.device)
    args = (
        q.view(s.batch, s.q_len, hkv, g, s.head_dim).permute(0, 2, 1, 3, 4),
        k_cache.permute(0, 2, 1, 3),
        v_cache.permute(0, 2, 1, 3),
        block_table,
        seq_lens_k,
        device_table(plan.schedule.unit_table, q),
        out5,
        lse4 if with_lse and not split else dummy(4),
        parts if split else dummy(4),
        lse_parts if split else dummy(3),
        *kernel_constants(s, plan, scale=scale, with_lse=with_lse),
    )
    grid = (hkv, len(plan.schedule.units), plan.q_blocks)
    kernel = variant(fmha_paged_kernel, ctas_per_sm)
    launches = [(grid, kernel, args)]
    if split:
        tile, lse_on = combine_constants(s, plan, with_lse=with_lse)
        n_dc = -(-s.head_dim_v // tile[3])
        combine_args = (
            parts, lse_parts, device_table(plan.schedule.sequence_table, q), out5,
            lse4 if with_lse else dummy(4), tile, lse_on,
        )  # fmt: skip
        combine = variant(paged_combine_kernel, COMBINE_CTAS_PER_SM)
        launches.append(((hkv, s.batch, plan.q_blocks * n_dc), combine, combine_args))

    def run() -> None:
        for grid_of, kern, kern_args in launches:
            launch(grid_of, kern, kern_args, q)

    return run, out, kept_lse


def check_plan(plan: PagedPlan, s: PagedShape) -> None:
    """ValueError unless ``plan`` was made for this batch: its units read exactly the key
    blocks of these lengths (another batch's would read pages the table does not hold)."""
    if plan.seq_lens != s.seq_lens:
        raise ValueError("plan was made for other seq_lens_k: make it with plan_paged(seq_lens_k)")
    if plan.page_size != s.page_size:
        raise ValueError(f"plan is for pages of {plan.page_size}, k_cache's are {s.page_size}")
    if (plan.rows_q, plan.rows_g, plan.q_blocks) != tile_rows(s.q_len, s.group):
        raise ValueError(f"plan is for another q_len or group than q's ({s.q_len}, {s.group})")


def compile_paged_cubin(
    *,
    arch: str = "sm_90",
    combine: bool = False,
    dtype: str = "bfloat16",
    head_dim: int = 128,
    head_dim_v: int | None = None,
    heads: int = 32,
    kv_heads: int = 8,
    q_len: int = 1,
    page_size: int = 64,
    block_n: int | None = None,
    split: bool = True,
    with_lse: bool = True,
    ctas_per_sm: int | None = None,
    batch: int = 64,
    num_pages: int = 4096,
) -> bytes:
    """The paged split kernel's (or with ``combine`` its combine's) cubin for ``arch``,
    compiled without a GPU, for reading registers, spills and shared memory. ``split``: a
    batch whose first sequence is long enough to be split (else one unit per sequence)."""
    from kernels.cutile.device_paged import fmha_paged_kernel, paged_combine_kernel
    from kernels.cutile.serving_launch import ArrayArg, compile_offline, variant

    dv = head_dim_v or head_dim
    lens = [32768 if split else 512] + [512] * (batch - 1)
    s = PagedShape(batch, q_len, heads, kv_heads, head_dim, dv, num_pages, page_size, dtype,
                   tuple(lens))  # fmt: skip
    plan = plan_paged(lens, q_len=q_len, heads=heads, kv_heads=kv_heads, page_size=page_size,
                      block_n=block_n, split=split, head_dim=head_dim)  # fmt: skip
    g = heads // kv_heads
    rows = plan.q_blocks * plan.block_m
    slots = plan.schedule.slots
    out5 = ArrayArg(dtype, (batch, kv_heads, q_len, g, dv))
    lse4 = ArrayArg("float32", (batch, kv_heads, g, q_len))
    parts = ArrayArg("float32", (slots, kv_heads, rows, dv))
    lse_parts = ArrayArg("float32", (slots, kv_heads, rows))
    one = ArrayArg("float32", (1, 1, 1, 1))
    if combine:
        if not plan.schedule.needs_combine:
            raise ValueError("a batch that is not split has no combine kernel")
        tile, lse_on = combine_constants(s, plan, with_lse=with_lse)
        params = [parts, lse_parts, ArrayArg("int32", (batch, 2)), out5,
                  lse4 if with_lse else one, tile, lse_on]  # fmt: skip
        combine_kernel = variant(paged_combine_kernel, COMBINE_CTAS_PER_SM)
        return compile_offline(combine_kernel, params, arch)
    split_on = plan.schedule.needs_combine
    consts = kernel_constants(s, plan, scale=1.0 / math.sqrt(head_dim), with_lse=with_lse)
    params = [
        ArrayArg(dtype, (batch, kv_heads, q_len, g, head_dim)),
        ArrayArg(dtype, (num_pages, kv_heads, page_size, head_dim)),
        ArrayArg(dtype, (num_pages, kv_heads, page_size, dv)),
        ArrayArg("int32", (batch, -(-32768 // page_size))),
        ArrayArg("int32", (batch,)),
        ArrayArg("int32", (len(plan.schedule.units), 4)),
        out5,
        lse4 if with_lse and not split_on else one,
        parts if split_on else one,
        lse_parts if split_on else ArrayArg("float32", (1, 1, 1)),
        float,
        int,
        *consts[2:],
    ]
    return compile_offline(variant(fmha_paged_kernel, ctas_per_sm), params, arch)
