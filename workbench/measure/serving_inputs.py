"""A ragged batch's inputs in the serving layouts (:mod:`kernels.reference_serving`), its launch
on the reference and its output checked against float64 attention of sampled sequences.

The layouts, by problem (see docs/serving.md):

* varlen prefill, or decode on a contiguous cache: ``(q, k, v, cu_seqlens_q, cu_seqlens_k)``,
  every sequence packed end to end (decode: q_len queries a sequence);
* decode on a paged cache: ``(q, k_cache, v_cache, block_table, seq_lens_k)``, the pages of
  the pool shuffled, the first ``shared_pages`` of every sequence the same pages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kernels.reference import masked_softmax_product
from kernels.reference_serving import gather_pages, paged_attention, varlen_attention
from kernels.schedule import visible_block
from workbench.batch_lengths import pages_of
from workbench.config import KernelConfig, Problem
from workbench.measure.accuracy import MAX_ROWS, MAX_SLICES, TOLERANCE, AccuracyReport


def _offsets(lengths: Sequence[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int32)


def block_table_of(problem: Problem, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """(block table, pool size): each sequence's pages drawn in shuffled order from one pool,
    its first ``shared_pages`` (as many as it has) the pool's shared prefix pages; entries past
    a sequence's pages are 0 (never read)."""
    assert problem.page_size is not None
    pages = [pages_of(n, problem.page_size) for n in problem.k_lens]
    shared = problem.shared_pages
    own = [max(0, p - shared) for p in pages]
    pool = shared + sum(own)
    order = rng.permutation(max(pool, 1)).astype(np.int32)
    table = np.zeros((problem.batch, max(max(pages), 1)), dtype=np.int32)
    cursor = shared
    for b, count in enumerate(pages):
        ids = [*order[: min(shared, count)], *order[cursor : cursor + own[b]]]
        cursor += own[b]
        table[b, : len(ids)] = ids
    return table, max(pool, 1)


def serving_host_inputs(
    problem: Problem,
    rng: np.random.Generator,
    rounded: Callable[[np.ndarray, str], np.ndarray],
) -> tuple[np.ndarray, ...]:
    """Fresh standard-normal tensors of a ragged ``problem`` in its layout, ``rounded`` to its
    dtype (float32 storage), with the int32 offsets or block table beside them."""
    assert problem.kv_heads is not None

    def normal(*shape: int) -> np.ndarray:
        return rounded(rng.standard_normal(shape, dtype=np.float32), problem.dtype)

    heads, kv_heads, d, dv = problem.heads, problem.kv_heads, problem.head_dim, problem.value_dim
    if problem.page_size is None:
        total_q, total_k = sum(problem.q_lens), sum(problem.k_lens)
        return (
            normal(total_q, heads, d), normal(total_k, kv_heads, d), normal(total_k, kv_heads, dv),
            _offsets(problem.q_lens), _offsets(problem.k_lens),
        )  # fmt: skip
    table, pool = block_table_of(problem, rng)
    page = problem.page_size
    return (
        normal(problem.batch, problem.q_len, heads, d),
        normal(pool, page, kv_heads, d),
        normal(pool, page, kv_heads, dv),
        table,
        np.asarray(problem.k_lens, dtype=np.int32),
    )


def _mask_of(config: KernelConfig) -> tuple[bool, int | None]:
    return config.causal, config.window if config.mask == "window" else None


def serving_launch(
    problem: Problem, config: KernelConfig, inputs: Sequence[np.ndarray]
) -> Callable[[], np.ndarray]:
    """The reference's launch of a ragged problem on ``inputs``: its output, fp32."""
    causal, window = _mask_of(config)
    run = paged_attention if problem.page_size is not None else varlen_attention

    def launch() -> np.ndarray:
        out, _ = run(*inputs, causal=causal, window=window, scale=None)
        return out

    return launch


def sequence_tensors(problem: Problem, inputs: Sequence[Any], b: int) -> tuple[Any, Any, Any]:
    """Sequence ``b``'s q (lq, Hq, D), k and v (lk, Hkv, D or Dv), as host arrays."""
    if problem.page_size is not None:
        q, k_cache, v_cache, table, lens = inputs
        length = int(np.asarray(lens[b]))
        pages = np.asarray(table[b])
        return (
            np.asarray(q[b]),
            gather_pages(k_cache, pages, length),
            gather_pages(v_cache, pages, length),
        )
    q, k, v, cu_q, cu_k = inputs
    q0, q1, k0, k1 = (int(x) for x in (cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]))
    return np.asarray(q[q0:q1]), np.asarray(k[k0:k1]), np.asarray(v[k0:k1])


def output_rows(problem: Problem, out: Any, inputs: Sequence[Any], b: int) -> np.ndarray:
    """Sequence ``b``'s output rows (lq, Hq, Dv) of a launch's ``out``."""
    if problem.page_size is not None:
        return np.asarray(out[b])
    cu_q = inputs[3]
    return np.asarray(out[int(cu_q[b]) : int(cu_q[b + 1])])


def sampled_sequences(problem: Problem, rng: np.random.Generator) -> list[int]:
    """The sequences checked: the longest, the shortest and others at random, MAX_SLICES."""
    lengths = problem.k_lens
    picks = {int(np.argmax(lengths)), int(np.argmin(lengths))}
    others = [b for b in range(problem.batch) if b not in picks]
    rng.shuffle(others)
    return sorted([*picks, *others][:MAX_SLICES])


def check_serving_output(
    inputs: Sequence[Any],
    out: Any,
    problem: Problem,
    config: KernelConfig,
    rng: np.random.Generator,
) -> AccuracyReport:
    """``out`` against float64 attention of each sampled sequence alone (one head of each,
    its first and last query rows among up to MAX_ROWS); NaN anywhere never passes."""
    scale = 1.0 / np.sqrt(problem.head_dim)
    window = config.window if config.mask == "window" else None
    group = problem.group_size
    diff_sq = ref_sq = max_abs = 0.0
    checked = 0
    for b in sampled_sequences(problem, rng):
        q, k, v = sequence_tensors(problem, inputs, b)
        got_all = output_rows(problem, out, inputs, b)
        lq, lk = q.shape[0], k.shape[0]
        if lq == 0:
            continue
        rows = np.arange(lq)
        if lq > MAX_ROWS:
            middle = rng.choice(np.arange(1, lq - 1), size=MAX_ROWS - 2, replace=False)
            rows = np.sort(np.concatenate([[0, lq - 1], middle]))
        head = int(rng.integers(problem.heads))
        qf = q[rows, head].astype(np.float64)
        kf, vf = k[:, head // group].astype(np.float64), v[:, head // group].astype(np.float64)
        seen = visible_block(rows, range(lk), config.mask, lk - lq, window)
        ref = (
            masked_softmax_product((qf @ kf.T) * scale, seen, vf)
            if lk
            else np.zeros((len(rows), problem.value_dim))  # no key: zeros, as the kernels write
        )
        diff = got_all[rows, head].astype(np.float64) - ref
        diff_sq += float(np.sum(diff * diff))
        ref_sq += float(np.sum(ref * ref))
        max_abs = max(max_abs, float(np.max(np.abs(diff))) if diff.size else 0.0)
        checked += len(rows)
    if not np.isfinite(diff_sq):
        max_abs = rel = float("nan")
    else:
        rel = float(np.sqrt(diff_sq / ref_sq)) if ref_sq > 0 else float(np.sqrt(diff_sq))
    return AccuracyReport(max_abs, rel, checked, TOLERANCE[problem.dtype])
