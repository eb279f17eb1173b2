"""The cuTile backend on a ragged batch: which serving kernel runs it (:mod:`kernels.cutile.varlen`
for a varlen prefill or a decode on a contiguous cache, :mod:`kernels.cutile.paged` for a paged
cache), with which of the config's knobs, and what the point stores of the launch.

The knobs that mean something to a ragged launch come from the config
(:data:`kernels.cutile.plan.SERVING_KNOBS`): the tiles (the paged kernel's key block), the KV
splits (auto: the ragged split table; 1: none; N: every sequence in N pieces, paged only), the
CTAs an SM and whether heads are packed; a varlen launch's block step also takes the polynomial
exp2's columns and the load latencies (:data:`kernels.cutile.plan.VARLEN_STEP_KNOBS`). Any other
knob set away from its default is refused in one line naming its flag, before anything is
launched.
Nothing here imports torch or cuda.tile at module level: the choices and refusals run on any
machine (tests/test_cutile_serving.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels import knobs
from kernels.cutile import paged, varlen
from kernels.cutile.plan import (
    SERVING_KNOBS,
    VARLEN_CLUSTER_KNOB,
    VARLEN_STEP_KNOBS,
    serving_plan_record,
)
from kernels.knob_defs import poly_exp2_choices
from kernels.serving_schedule import varlen_tiles
from workbench.config import ConfigError, KernelConfig, Problem
from workbench.errors import BackendError

# The registry knobs a ragged launch reads (rows, key block, splits, CTAs an SM, heads packed).
ROWS, KEYS, SPLITS, CTAS, PACKED = SERVING_KNOBS
# The varlen kernel's block step: the polynomial exp2's columns, the K and V load latencies.
POLY, K_LAT, V_LAT = VARLEN_STEP_KNOBS
VARLEN_KERNEL = "fmha_varlen_kernel"
PAGED_KERNEL = "fmha_paged_kernel"
COMBINE_KERNEL = "paged_combine_kernel"


@dataclass(frozen=True)
class RaggedLaunch:
    """What one ragged point launches: the kernel's family ("varlen" or "paged"), its mask,
    tiles, CTAs an SM and split request (None: auto); a varlen launch's block step (the
    polynomial exp2's columns, the K and V load latencies) and its CTAs a cluster."""

    kernel: str
    causal: bool
    window: int | None
    block_m: int
    block_n: int
    ctas_per_sm: int | None
    splits: int | None
    step: tuple[int, int, int] = (0, varlen.K_LATENCY, varlen.V_LATENCY)
    cluster_ctas: int | None = None


def kernel_defaults(problem: Problem) -> dict[str, Any]:
    """The serving kernels' own knob values for ``problem``'s batch, which a sweep takes for
    every knob the user left alone (the CLI: not typed; the window: still at the value the
    last batch shape gave). A paged cache: its key block for the page and head dim
    (:func:`kernels.cutile.paged.default_block_n`: 128 keys at pages of 16 would join eight
    pages and spill, a dense preset's 256 at D 64 is not one of its blocks) and the ragged
    split table (auto, which keeps a batch that fills the SMs whole). A varlen prefill: the
    varlen kernel's tile (:func:`kernels.cutile.varlen.default_tile`). Else nothing."""
    if problem.page_size is not None:
        return {KEYS: paged.default_block_n(problem.page_size, problem.head_dim), SPLITS: None}
    if problem.varlen:
        return dict(zip((ROWS, KEYS), varlen.default_tile(problem.head_dim), strict=True))
    return {}


def ragged_launch(problem: Problem, config: KernelConfig) -> RaggedLaunch:
    """The launch of ``problem`` (a ragged batch) under ``config``; a ConfigError naming the
    field (so the CLI names its flag) for anything the serving kernels cannot run as asked."""
    assert problem.lengths is not None
    values = config.knob_values()
    defaults = knobs.defaults()
    for name, value in values.items():
        if name not in (*SERVING_KNOBS, *VARLEN_STEP_KNOBS, VARLEN_CLUSTER_KNOB) and (
            value != defaults[name]
        ):
            raise ConfigError(
                name, value, "does not apply to the cuTile serving kernels (varlen, paged); "
                "leave it at its default for a ragged batch",
            )  # fmt: skip
    window = config.window if config.mask == "window" else None
    if problem.page_size is None:
        return _varlen_launch(config, values, window)
    return _paged_launch(problem, config, values)


def _varlen_launch(
    config: KernelConfig, values: dict[str, Any], window: int | None
) -> RaggedLaunch:
    for name, allowed in ((ROWS, varlen.BLOCK_M_SIZES), (KEYS, varlen.BLOCK_N_SIZES)):
        if values[name] not in allowed:
            raise ConfigError(
                name, values[name], f"the cuTile varlen kernel takes {_words(allowed)}"
            )
    if values[SPLITS] not in (None, 1):
        raise ConfigError(
            SPLITS, values[SPLITS], "the cuTile varlen kernel does not split a sequence's "
            "keys (one CTA a q-block); a paged cache (--kv-cache paged) does",
        )  # fmt: skip
    if values[PACKED]:
        raise ConfigError(
            PACKED, True, "the cuTile varlen kernel runs one query head a CTA; a paged cache "
            "(--kv-cache paged) packs the heads of a KV head",
        )  # fmt: skip
    if values[POLY] not in poly_exp2_choices(values[KEYS]):  # the latencies: the registry's
        raise ConfigError(
            POLY, values[POLY], "the cuTile varlen kernel takes 0 or its key block over 16, 8, "
            f"4 or 2 ({_words(poly_exp2_choices(values[KEYS]))} at {values[KEYS]} keys)",
        )  # fmt: skip
    if values[VARLEN_CLUSTER_KNOB] not in varlen.CLUSTER_SIZES:
        raise ConfigError(
            VARLEN_CLUSTER_KNOB, values[VARLEN_CLUSTER_KNOB], "the cuTile varlen kernel runs a "
            "tile on 1 or 2 CTAs of a cluster",
        )  # fmt: skip
    ctas = values[CTAS] if values[CTAS] is not None else varlen.default_ctas_per_sm(values[ROWS])
    step = (values[POLY], values[K_LAT], values[V_LAT])
    return RaggedLaunch("varlen", config.causal, window, values[ROWS], values[KEYS], ctas, 1, step,
                        values[VARLEN_CLUSTER_KNOB])  # fmt: skip


def _paged_launch(problem: Problem, config: KernelConfig, values: dict[str, Any]) -> RaggedLaunch:
    if config.mask == "window":
        raise ConfigError("mask", "window", "the cuTile paged kernel has no window mask")
    if config.mask == "none" and problem.q_len > 1:
        raise ConfigError(
            "mask", "none", f"the cuTile paged kernel runs its {problem.q_len} queries causal "
            "among themselves (the last positions): give --mask causal, or --q-len 1",
        )  # fmt: skip
    if problem.q_len > paged.MAX_Q_LEN:
        raise ConfigError("q_len", problem.q_len, f"the cuTile paged kernel takes 1 to "
                          f"{paged.MAX_Q_LEN} queries a sequence")  # fmt: skip
    for name in (*VARLEN_STEP_KNOBS, VARLEN_CLUSTER_KNOB):
        if values[name] != knobs.KNOBS[name].default:
            raise ConfigError(
                name, values[name], "the cuTile paged kernel's block step has no such knob "
                "(the varlen prefill's has); leave it out",
            )  # fmt: skip
    if values[ROWS] != knobs.KNOBS[ROWS].default:
        raise ConfigError(
            ROWS, values[ROWS], "the cuTile paged kernel's rows are a KV head's packed "
            "query heads × queries (set by the heads and --q-len); leave it out",
        )  # fmt: skip
    if values[KEYS] not in paged.BLOCK_N_CHOICES:
        allowed = _words(paged.BLOCK_N_CHOICES)
        raise ConfigError(KEYS, values[KEYS], f"the cuTile paged kernel takes {allowed}")
    rows_q, rows_g, _ = paged.tile_rows(problem.q_len, problem.group_size)
    most = max(1, min(paged.MAX_SPLITS, paged.COMBINE_ELEMENTS // (rows_q * rows_g * 8)))
    if values[SPLITS] is not None and values[SPLITS] > most:
        raise ConfigError(
            SPLITS, values[SPLITS],
            f"the cuTile paged kernel's combine takes at most {most} splits a sequence here",
        )  # fmt: skip
    return RaggedLaunch("paged", True, None, rows_q * rows_g, values[KEYS], values[CTAS],
                        values[SPLITS])  # fmt: skip


def _words(values: tuple[int, ...]) -> str:
    return (
        ", ".join(map(str, values[:-1])) + f" or {values[-1]}"
        if len(values) > 1
        else str(values[0])
    )


def paged_plan(problem: Problem, launch: RaggedLaunch, sm_count: int) -> paged.PagedPlan:
    """The paged kernel's plan of this batch on ``sm_count`` SMs (host work, once a point)."""
    assert problem.kv_heads is not None and problem.page_size is not None
    splits = launch.splits
    return paged.plan_paged(
        problem.k_lens, q_len=problem.q_len, heads=problem.heads, kv_heads=problem.kv_heads,
        page_size=problem.page_size, block_n=launch.block_n, sm_count=sm_count,
        ctas_per_sm=launch.ctas_per_sm or 1, split=splits != 1,
        splits=splits if splits not in (None, 1) else None,
    )  # fmt: skip


def plan_record(
    problem: Problem, launch: RaggedLaunch, plan: paged.PagedPlan | None, sm_count: int | None
) -> dict[str, Any]:
    """What a ragged point stores as its launch plan (the ``plan`` column, ``show``'s "ran"
    line, export's plan columns): the kernel, its tiles, the page and key block, the split
    table's summary."""
    assert problem.kv_heads is not None
    facts: dict[str, Any] = {
        "page_size": problem.page_size,
        "sm_count": sm_count,
        "mask": "window" if launch.window else ("causal" if launch.causal else "none"),
        "window": launch.window or 0,
    }
    tiles = (launch.block_m, launch.block_n)
    if plan is None:
        cu_q, cu_k = _offsets(problem.q_lens).tolist(), _offsets(problem.k_lens).tolist()
        table = varlen_tiles(cu_q, cu_k, *tiles, causal=launch.causal, window=launch.window)
        grid = [problem.heads, len(table), 1]
        facts.update(zip(VARLEN_STEP_KNOBS, launch.step, strict=True))
        facts[VARLEN_CLUSTER_KNOB] = launch.cluster_ctas
        return serving_plan_record("varlen", VARLEN_KERNEL, tiles, 1, launch.ctas_per_sm, False,
                                   grid, units=len(table), **facts)  # fmt: skip
    splits = plan.schedule.splits
    facts.update(
        min_splits=min(splits, default=1),
        split_request="auto" if launch.splits is None else launch.splits,
        units=plan.schedule.slots,
        rows_q=plan.rows_q,
        rows_g=plan.rows_g,
    )
    if plan.schedule.needs_combine:
        tile, _ = paged.combine_constants(_shape(problem), plan, with_lse=False)
        chunks = -(-problem.value_dim // tile[3])
        facts["combine"] = {
            "kernel": COMBINE_KERNEL,
            "grid": [problem.kv_heads, problem.batch, plan.q_blocks * chunks],
        }
    grid = [problem.kv_heads, len(plan.schedule.units), plan.q_blocks]
    return serving_plan_record("paged", PAGED_KERNEL, tiles, max(splits, default=1),
                               launch.ctas_per_sm, True, grid, **facts)  # fmt: skip


def _shape(problem: Problem) -> paged.PagedShape:
    assert problem.kv_heads is not None and problem.page_size is not None
    return paged.PagedShape(
        problem.batch, problem.q_len, problem.heads, problem.kv_heads, problem.head_dim,
        problem.value_dim, 0, problem.page_size, problem.dtype, tuple(problem.k_lens),
    )  # fmt: skip


def _offsets(lengths: tuple[int, ...]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int32)


def prepare(problem: Problem, launch: RaggedLaunch, inputs: tuple[Any, ...],
            plan: paged.PagedPlan | None) -> tuple[Callable[[], Any], Any]:  # fmt: skip
    """The ragged launch on ``inputs`` (``upload_serving``'s) and its output buffer: tables
    copied to q's device once, the kernel's argument tuple built once; the call launches and
    returns the output in the serving layout. A kernel's own refusal (ValueError) is one line
    naming its argument."""
    import torch

    q = inputs[0]
    tables = [torch.from_numpy(np.ascontiguousarray(x)).to(q.device) for x in inputs[3:]]
    try:
        if plan is None:
            run, out, _ = varlen.prepare_varlen(
                q, inputs[1], inputs[2], *tables, causal=launch.causal, window=launch.window,
                block_m=launch.block_m, block_n=launch.block_n, ctas_per_sm=launch.ctas_per_sm,
                with_lse=False, poly_cols=launch.step[0], key_latency=launch.step[1],
                value_latency=launch.step[2], cluster_ctas=launch.cluster_ctas,
            )  # fmt: skip
        else:
            run, out, _ = paged.prepare_paged(
                q, inputs[1], inputs[2], *tables, plan=plan, with_lse=False,
                ctas_per_sm=launch.ctas_per_sm,
            )  # fmt: skip
    except ValueError as exc:  # the kernel's own input checks, which name its argument
        raise BackendError(f"cutile's {launch.kernel} kernel refused the batch: {exc}") from None

    def call() -> Any:
        run()
        return out

    return call, out
