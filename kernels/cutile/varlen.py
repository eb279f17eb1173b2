"""Varlen prefill on the GPU: sequences packed end to end, FlashAttention's ``cu_seqlens``
convention, torch tensors in, ``(out, lse)`` out.

- q ``(total_q, Hq, D)``, k ``(total_k, Hkv, D)``, v ``(total_k, Hkv, Dv)``;
  ``cu_seqlens_q``/``cu_seqlens_k`` int32 ``(B+1,)``; GQA (Hq a multiple of Hkv).
- causal per sequence, aligned bottom-right (query ``i`` of a sequence with ``lq`` queries and
  ``lk`` keys sees keys ``<= i + lk - lq``); ``window``: also only keys ``> i + lk - lq - window``.
- out ``(total_q, Hq, Dv)`` in q's dtype; lse ``(Hq, total_q)`` float32, natural log, ``-inf``
  (and zeros in out) for a query that sees no key.

The grid is one CTA per (head, q-block of a sequence), from a table built once per cu_seqlens
(:func:`kernels.serving_schedule.varlen_tiles`): no CTA for a block past a sequence's end. Input
checks run first, on shapes and a host copy of cu_seqlens, before cuda.tile is imported.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernels.cutile.plan import VARLEN_CLUSTER_KNOB, VARLEN_STEP_KNOBS
from kernels.cutile.serving_checks import (
    check_cu_seqlens,
    check_head_dims,
    check_heads,
    check_same_dtype,
    check_tensor,
    check_window,
    host_ints,
)
from kernels.head_dims import pads_head_dim, tile_head_dim
from kernels.knob_defs import poly_exp2_choices
from kernels.knobs import KNOBS
from kernels.serving_schedule import VARLEN_COLUMNS, varlen_tiles

LOG2E = 1.4426950408889634
# 64×64, two CTAs an SM: the tile form's fastest spill-free config on the H200 (notes §6).
DEFAULT_CTAS_PER_SM = 2
DEFAULT_TILE = (64, 64)
# Query rows and keys per tile.
BLOCK_M_SIZES = (64, 128)
BLOCK_N_SIZES = (64, 128)
# A 128-row tile runs 8 worker warps, one CTA an SM: so it compiles to 168 registers and no
# spill on sm_90 (bf16, D 128, 128 keys), where the compiler's own choice spills 288 B a
# thread and two CTAs an SM 552 B (tests/test_serving_kernels_offline.py).
WIDE_ROWS, WIDE_WORKER_WARPS, WIDE_CTAS_PER_SM = 128, 8, 1
# The tile a caller who names none gets: 128x128 up to D 128, where it compiles without a spill
# and ran fastest (H100, serving-prefill-varlen: 538.5 TFLOP/s against 502.5 at 64x128 and
# 475.6 at 64x64, bench/results/h100-varlen-tiles.db); past D 128 it spills, and 64x64 stays.
WIDE_TILE, WIDE_TILE_MAX_HEAD_DIM = (128, 128), 128


def default_tile(head_dim: int) -> tuple[int, int]:
    """(block_m, block_n) of a varlen launch at ``head_dim`` when the caller names none."""
    return WIDE_TILE if head_dim <= WIDE_TILE_MAX_HEAD_DIM else DEFAULT_TILE


# Each tile program on a 2-CTA cluster (cuTile's cluster hint) at 2 CTAs an SM: the dense
# prefill's fastest 128x128 form, to which the varlen tile compiles with no spill (128
# registers, 256 threads, 83 KB of shared memory, the compiler's worker warps) where 2 CTAs an
# SM alone spill 552 B (docs/lab/varlen-prefill.md). Untimed yet: no cluster by default.
CLUSTER_SIZES = tuple(n for n in KNOBS[VARLEN_CLUSTER_KNOB].values if n is None or n <= 2)
# The kernel's load latency hints (TileGym's), and the values a caller may give: the registry's.
K_LATENCY, V_LATENCY = 2, 4
LATENCY_VALUES = KNOBS[VARLEN_STEP_KNOBS[1]].values


@dataclass(frozen=True)
class VarlenShape:
    """What a varlen call's inputs pose, once checked."""

    total_q: int
    total_k: int
    heads: int
    kv_heads: int
    head_dim: int
    head_dim_v: int
    dtype: str
    cu_q: tuple[int, ...]
    cu_k: tuple[int, ...]

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads


def check_varlen(
    q: Any,
    k: Any,
    v: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    *,
    window: int | None = None,
) -> VarlenShape:
    """The shape of a varlen call; ValueError (one line, naming the argument) for bad input."""
    total_q, heads, d = check_tensor(q, "q", "(total_q, heads, head_dim)")
    total_k, kv_heads, dk = check_tensor(k, "k", "(total_k, kv_heads, head_dim)")
    total_v, kv_heads_v, dv = check_tensor(v, "v", "(total_k, kv_heads, head_dim_v)")
    dtype = check_same_dtype(q=q, k=k, v=v)
    if total_v != total_k:
        raise ValueError(f"v has {total_v} tokens but k has {total_k} (both are total_k)")
    if kv_heads_v != kv_heads:
        raise ValueError(f"v has {kv_heads_v} heads but k has {kv_heads}")
    if dk != d:
        raise ValueError(f"k's head dim {dk} differs from q's {d}")
    check_heads(heads, kv_heads, "q", "k")
    check_head_dims(d, dv, "q", "v")
    check_window(window)
    cu_q = host_ints(cu_seqlens_q, "cu_seqlens_q", 1)
    cu_k = host_ints(cu_seqlens_k, "cu_seqlens_k", 1)
    if cu_q.size != cu_k.size:
        raise ValueError(
            f"cu_seqlens_q has {cu_q.size} offsets but cu_seqlens_k has {cu_k.size} "
            "(both batch + 1)"
        )
    check_cu_seqlens(cu_q, "cu_seqlens_q", total_q, "q")
    check_cu_seqlens(cu_k, "cu_seqlens_k", total_k, "k")
    return VarlenShape(
        total_q, total_k, heads, kv_heads, d, dv, dtype, tuple(cu_q.tolist()), tuple(cu_k.tolist())
    )


def default_ctas_per_sm(block_m: int) -> int:
    """CTAs an SM a tile of ``block_m`` rows runs when the caller does not say."""
    return WIDE_CTAS_PER_SM if block_m >= WIDE_ROWS else DEFAULT_CTAS_PER_SM


def worker_warps(block_m: int, cluster_ctas: int | None = None) -> int | None:
    """The worker warps a tile of ``block_m`` rows is compiled for (None: the compiler's, as
    in a cluster: see :data:`CLUSTER_SIZES`)."""
    if cluster_ctas is not None and cluster_ctas > 1:
        return None
    return WIDE_WORKER_WARPS if block_m >= WIDE_ROWS else None


def check_cluster(cluster_ctas: int | None) -> None:
    """ValueError (one line) unless the kernel takes ``cluster_ctas`` CTAs a cluster."""
    if cluster_ctas not in CLUSTER_SIZES:
        raise ValueError(f"cluster_ctas must be one of {CLUSTER_SIZES}, got {cluster_ctas!r}")


def _compiled_for(block_m: int, ctas_per_sm: int | None, cluster_ctas: int | None) -> Any:
    """The kernel with the hints a launch and an offline compile share: CTAs an SM (None: the
    tile's own), the tile's worker warps, the cluster."""
    from kernels.cutile.device_varlen import fmha_varlen_kernel
    from kernels.cutile.serving_launch import variant

    ctas = default_ctas_per_sm(block_m) if ctas_per_sm is None else ctas_per_sm
    return variant(fmha_varlen_kernel, ctas, worker_warps(block_m, cluster_ctas), cluster_ctas)


def _mask_code(causal: bool, window: int | None) -> int:
    return 2 if window is not None else (1 if causal else 0)


def check_tile(block_m: int, block_n: int) -> None:
    for name, value, sizes in (("block_m", block_m, BLOCK_M_SIZES), ("block_n", block_n,
                                                                  BLOCK_N_SIZES)):  # fmt: skip
        if value not in sizes:
            raise ValueError(f"{name} must be one of {sizes}, got {value!r}")


def check_block_step(block_n: int, poly_cols: int, key_latency: int, value_latency: int) -> None:
    """ValueError (one line, naming the argument) for a block step the kernel cannot compile:
    the polynomial's columns are 0 or ``block_n`` over 16, 8, 4 or 2; a latency hint 1-10."""
    allowed = poly_exp2_choices(block_n)
    if poly_cols not in allowed:
        raise ValueError(
            f"poly_cols must be one of {allowed} at block_n {block_n}, got {poly_cols!r}"
        )
    for name, value in (("key_latency", key_latency), ("value_latency", value_latency)):
        if value not in LATENCY_VALUES:
            raise ValueError(f"{name} must be one of {LATENCY_VALUES}, got {value!r}")


def kernel_arguments(
    s: VarlenShape,
    *,
    causal: bool,
    window: int | None,
    scale: float,
    block_m: int,
    block_n: int,
    with_lse: bool,
    fast_math: bool = True,
    poly_cols: int = 0,
    key_latency: int = K_LATENCY,
    value_latency: int = V_LATENCY,
) -> dict[str, Any]:
    """The scalars and constants of one launch, by parameter name (the arrays apart);
    ``poly_cols``: score columns of each unmasked key block whose exp2 is the FMA polynomial
    (the masked blocks always take the MUFU's, :func:`kernels.cutile.device.exp2_mixed`)."""
    d_padded = pads_head_dim(s.head_dim) or pads_head_dim(s.head_dim_v)
    opts = (_mask_code(causal, window), fast_math, key_latency, value_latency, poly_cols, d_padded)
    return {
        "qk_scale_log2": scale * LOG2E,
        "kv_group": s.group,
        "window": int(window or 0),
        "TILE": (block_m, block_n, tile_head_dim(s.head_dim)),
        "VALUE_TILE": (tile_head_dim(s.head_dim_v),),
        "OPTS": opts,
        "WITH_LSE": with_lse,
    }


def varlen_attention(
    q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any, **options: Any
) -> tuple[Any, Any]:
    """Attention over packed sequences; ``(out, lse)`` (lse None without ``with_lse``).
    ``options``: those of :func:`prepare_varlen`."""
    run, out, lse = prepare_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, **options)
    run()
    return out, lse


def prepare_varlen(
    q: Any,
    k: Any,
    v: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    *,
    causal: bool = False,
    window: int | None = None,
    scale: float | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
    ctas_per_sm: int | None = None,
    with_lse: bool = True,
    poly_cols: int = 0,
    key_latency: int = K_LATENCY,
    value_latency: int = V_LATENCY,
    cluster_ctas: int | None = None,
) -> tuple[Callable[[], None], Any, Any]:
    """Check, build the tile table and allocate once: ``(run, out, lse)``, where ``run()``
    launches into ``out`` and ``lse`` on torch's current stream with no host work (a timing
    loop or a CUDA graph replays it). ``window`` implies causal (the window mask is
    bottom-right causal with a width); ``block_m``/``block_n`` None: :func:`default_tile`'s;
    ``ctas_per_sm`` None: the tile's own (:func:`default_ctas_per_sm`); ``poly_cols``,
    ``key_latency``, ``value_latency``: the block step's (:func:`kernel_arguments`);
    ``cluster_ctas``: CTAs a cluster (:data:`CLUSTER_SIZES`)."""
    s = check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, window=window)
    wide_m, wide_n = default_tile(s.head_dim)
    block_m = wide_m if block_m is None else block_m
    block_n = wide_n if block_n is None else block_n
    check_tile(block_m, block_n)
    check_block_step(block_n, poly_cols, key_latency, value_latency)
    check_cluster(cluster_ctas)
    for name, arr in (("q", q), ("k", k), ("v", v)):
        if arr.stride(-1) != 1:
            raise ValueError(f"{name}'s head dim must be contiguous (stride 1): call .contiguous()")
    import torch

    out = torch.empty((s.total_q, s.heads, s.head_dim_v), dtype=q.dtype, device=q.device)
    lse = torch.empty((s.heads, s.total_q), dtype=torch.float32, device=q.device)
    kept_lse = lse if with_lse else None
    scale = 1.0 / math.sqrt(s.head_dim) if scale is None else float(scale)
    tiles = varlen_tiles(s.cu_q, s.cu_k, block_m, block_n, causal=causal or window is not None,
                         window=window)  # fmt: skip
    if s.total_q == 0:
        return (lambda: None), out, kept_lse
    if s.total_k == 0 or len(tiles) == 0:  # no query sees a key: zeros and -inf

        def no_keys() -> None:
            out.zero_()
            lse.fill_(-math.inf)

        return no_keys, out, kept_lse
    from kernels.cutile.serving_launch import device_table, launch

    values = kernel_arguments(
        s, causal=causal, window=window, scale=scale, block_m=block_m, block_n=block_n,
        with_lse=with_lse, poly_cols=poly_cols, key_latency=key_latency,
        value_latency=value_latency,
    )  # fmt: skip
    lse_arg = lse.unsqueeze(0) if with_lse else torch.empty((1, 1, 1), device=q.device)
    args = (
        q.permute(1, 0, 2).unsqueeze(0),
        k.permute(1, 0, 2).unsqueeze(0),
        v.permute(1, 0, 2).unsqueeze(0),
        out.permute(1, 0, 2).unsqueeze(0),
        lse_arg,
        device_table(tiles, q),
        *values.values(),
    )
    kern = _compiled_for(block_m, ctas_per_sm, cluster_ctas)
    grid = (s.heads, len(tiles), 1)

    def run() -> None:
        launch(grid, kern, args, q)

    return run, out, kept_lse


def compile_varlen_cubin(
    *,
    arch: str = "sm_90",
    dtype: str = "float16",
    head_dim: int = 128,
    head_dim_v: int | None = None,
    heads: int = 32,
    kv_heads: int = 8,
    causal: bool = True,
    window: int | None = None,
    block_m: int = DEFAULT_TILE[0],
    block_n: int = DEFAULT_TILE[1],
    ctas_per_sm: int | None = None,
    with_lse: bool = True,
    total_tokens: int = 4096,
    poly_cols: int = 0,
    key_latency: int = K_LATENCY,
    value_latency: int = V_LATENCY,
    cluster_ctas: int | None = None,
) -> bytes:
    """The varlen kernel's cubin for ``arch``, compiled without a GPU (tileiras only), for
    reading its registers, spills and shared memory."""
    from kernels.cutile.serving_launch import ArrayArg, compile_offline

    check_tile(block_m, block_n)
    check_block_step(block_n, poly_cols, key_latency, value_latency)
    check_cluster(cluster_ctas)
    dv = head_dim_v or head_dim
    s = VarlenShape(total_tokens, total_tokens, heads, kv_heads, head_dim, dv, dtype, (0,), (0,))
    values = kernel_arguments(
        s, causal=causal, window=window, scale=1.0 / math.sqrt(head_dim), block_m=block_m,
        block_n=block_n, with_lse=with_lse, poly_cols=poly_cols, key_latency=key_latency,
        value_latency=value_latency,
    )  # fmt: skip
    arrays = [
        ArrayArg(dtype, (1, heads, total_tokens, head_dim)),
        ArrayArg(dtype, (1, kv_heads, total_tokens, head_dim)),
        ArrayArg(dtype, (1, kv_heads, total_tokens, dv)),
        ArrayArg(dtype, (1, heads, total_tokens, dv)),
        ArrayArg("float32", (1, heads, total_tokens) if with_lse else (1, 1, 1)),
        ArrayArg("int32", (64, len(VARLEN_COLUMNS))),
    ]
    params = [*arrays, float, int, int, *list(values.values())[3:]]
    return compile_offline(_compiled_for(block_m, ctas_per_sm, cluster_ctas), params, arch)
