"""The instrumented launch: the block map the kernel's own loops produced.

Every kernel form takes ``BlockMap`` and ``Order`` arrays and, with ``WITH_MAP``, records each
(q-block, k-block) it visits and which program ran each tile, so a test can compare them with
``kernels.schedule``'s block map and with the launch order the schedule implies. The decode
form records, per (row block, key block), the split that read it instead of a program id:
:attr:`GpuBlockMap.split_map`, to set beside :attr:`kernels.schedule.Schedule.split_map`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernels import schedule
from kernels.cutile import forms
from kernels.cutile.arrays import (
    device_id,
    empty,
    fill,
    pick_lib,
    random_qkv,
    to_numpy,
    zeros,
)
from kernels.cutile.diagnostics import check_arch
from kernels.cutile.launch import LaunchConfig, check_inputs, check_mask
from kernels.cutile.launches import PreparedLaunch, device_plan


@dataclass(frozen=True)
class GpuBlockMap:
    """What the instrumented kernel recorded.

    ``map``: (n_q_blocks, n_k_blocks) int8 of BlockKind codes (0 skipped, 1 computed without
    mask, 2 computed with mask), identical for every batch·head (checked). ``per_head``: the
    same per batch·head, int32, as accumulated (a block visited twice would show 2 or 3 or 4).
    ``launch_order``: (batch·heads, n_q_blocks) program id that ran each pair (None for the
    decode form). ``split_map``: the decode form's (row blocks, k blocks) int16, the split
    that read each block, -1 where none did (identical for every batch·head, checked).
    """

    map: np.ndarray
    per_head: np.ndarray
    launch_order: np.ndarray | None
    out: Any = field(repr=False, default=None)
    split_map: np.ndarray | None = None


def gpu_block_map(
    q_len: int,
    k_len: int,
    rows: int,
    keys: int,
    mask: str = "none",
    input_pos: int = 0,
    window: int | None = None,
    *,
    batch: int = 1,
    heads: int = 2,
    kv_heads: int | None = None,
    head_dim: int = 64,
    dtype: str = "float16",
    lib: str | None = None,
    seed: int = 0,
    **knobs: Any,
) -> GpuBlockMap:
    """Run the instrumented kernel on random inputs and return the blocks its loops visited.

    ``rows``, ``keys``: the tile's shape (:data:`kernels.schedule.TILE_KNOBS`); ``knobs``: the
    other fields of :class:`LaunchConfig` (:data:`kernels.knobs.LAUNCH`). Every
    visited (q-block, k-block) adds its code (1 unmasked, 2 masked) atomically to a zeroed
    map, so skipped blocks stay 0 and a block visited twice cannot look right.
    """
    config = LaunchConfig.of({**dict(zip(schedule.TILE_KNOBS, (rows, keys))), **knobs})
    check_mask(mask, input_pos, window)
    if schedule.decode_form(config.values()) and mask == "window":
        raise ValueError(f"the decode form has no window mask ({'/'.join(schedule.DECODE_KNOBS)})")
    lib = lib or pick_lib()
    kv_heads = kv_heads or heads
    q, k, v = random_qkv(batch, heads, kv_heads, q_len, k_len, head_dim, dtype, lib=lib, seed=seed)
    p = check_inputs(q, k, v)
    check_arch(device_id(q, lib) or 0)
    plan = device_plan(
        p, config, q, scale=None, mask=mask, input_pos=int(input_pos), window=window,
        with_lse=False, with_map=True,
    )  # fmt: skip
    decode = plan.form == "decode"
    slices, n_q_blocks, n_k_blocks = batch * plan.heads, plan.n_q_blocks, plan.n_k_blocks
    # The decode form's maps per (slice, row block, key block): the code, and the split that
    # read it; the other forms' order per (slice, q-block).
    order_shape: tuple[int, ...] = (
        forms.block_map_shape(slices, n_q_blocks, n_k_blocks)
        if decode
        else forms.order_shape(slices, n_q_blocks)
    )
    # Padded (forms.padded): one compile per kernel config, not per problem size.
    bmap = zeros(lib, forms.block_map_shape(slices, n_q_blocks, n_k_blocks), "int32", q)
    order = fill(empty(lib, order_shape, "int32", q), -1)
    out = empty(lib, tuple(q.shape), dtype, q)
    arrays = {"Q": q, "K": k, "V": v, "Out": out, "BlockMap": bmap, "Order": order}
    PreparedLaunch(p, plan, q).runner(arrays, None)()
    per_head = to_numpy(bmap, lib)[:slices, :n_q_blocks, :n_k_blocks]
    if not (per_head == per_head[0]).all():
        raise AssertionError("instrumented kernel visited different blocks for different heads")
    if decode:
        splits = to_numpy(order, lib)[:slices, :n_q_blocks, :n_k_blocks]
        if not (splits == splits[0]).all():
            raise AssertionError("instrumented kernel split different heads differently")
        split_map = splits[0].astype(np.int16)
        return GpuBlockMap(per_head[0].astype(np.int8), per_head, None, out, split_map)
    launch_order = to_numpy(order, lib)[:slices, :n_q_blocks]
    return GpuBlockMap(per_head[0].astype(np.int8), per_head, launch_order, out)
