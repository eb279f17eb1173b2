"""NumPy reference for attention as a serving engine runs it: varlen prefill over sequences
packed end to end (FlashAttention's ``cu_seqlens``) and decode against a paged KV cache read
through a block table (vLLM's and FlashInfer's layout).

Both follow FlashAttention's conventions, the contract the cuTile kernels share:

* varlen: q ``(total_q, Hq, D)``, k ``(total_k, Hkv, D)``, v ``(total_k, Hkv, Dv)``,
  ``cu_seqlens_q`` / ``cu_seqlens_k`` int32 ``(B+1,)`` (0 first, non-decreasing); output
  ``(total_q, Hq, Dv)``, lse ``(Hq, total_q)`` fp32.
* paged: q ``(B, q_len, Hq, D)``, k_cache ``(num_pages, page_size, Hkv, D)``, v_cache
  ``(num_pages, page_size, Hkv, Dv)``, ``block_table`` int32 ``(B, max_pages_per_seq)`` (page
  ids in any order, shared pages allowed, entries past a sequence's pages ignored),
  ``seq_lens_k`` int32 ``(B,)``; the q_len queries are each sequence's last positions; output
  ``(B, q_len, Hq, Dv)``, lse ``(B, Hq, q_len)`` fp32.

Causal and window masks are aligned bottom-right per sequence: query i of a sequence with lq
queries and lk keys sees key j when ``j <= i + lk - lq`` (and, with a window W,
``j > i + lk - lq - W``). A row that sees no key (a zero-length sequence) is zeros with lse
-inf, as the dense reference (:mod:`kernels.reference`) has it. The arithmetic is float32.
"""

from __future__ import annotations

import numpy as np

# Scores held at once (heads x rows x keys, float32: 64 MB), so a 128k-token sequence fits.
SCORES_PER_BLOCK = 1 << 24


class ServingInputError(ValueError):
    """A refused argument of the serving API: ``argument`` names it (``cu_seqlens_q``), the
    message is one line that starts with it."""

    def __init__(self, argument: str, reason: str) -> None:
        self.argument = argument
        super().__init__(f"{argument}: {reason}")


def check_cu_seqlens(name: str, cu_seqlens: np.ndarray, total: int, batch: int | None) -> None:
    """``cu_seqlens`` is int ``(B+1,)``, 0 first, non-decreasing, ending at ``total`` rows."""
    cu = np.asarray(cu_seqlens)
    if cu.ndim != 1 or cu.shape[0] < 2 or not np.issubdtype(cu.dtype, np.integer):
        raise ServingInputError(
            name, f"expected a 1-D integer array of B+1 offsets; got shape {cu.shape} {cu.dtype}"
        )
    if batch is not None and cu.shape[0] != batch + 1:
        raise ServingInputError(
            name, f"has {cu.shape[0]} offsets but the other has {batch + 1} (B+1, B = {batch})"
        )
    if int(cu[0]) != 0:
        raise ServingInputError(name, f"must start at 0; starts at {int(cu[0])}")
    steps = np.diff(cu.astype(np.int64))
    if (steps < 0).any():
        at = int(np.argmax(steps < 0)) + 1
        raise ServingInputError(
            name,
            f"must be non-decreasing; entry {at} is {int(cu[at])} after {int(cu[at - 1])}",
        )
    if int(cu[-1]) != total:
        raise ServingInputError(
            name, f"ends at {int(cu[-1])} but the packed tensor has {total} rows"
        )


def _check_heads(q_heads: int, kv_heads: int, q_dim: int, k_dim: int, v_heads: int) -> None:
    if kv_heads < 1 or q_heads % kv_heads:
        raise ServingInputError(
            "q", f"{q_heads} query heads are not a multiple of the {kv_heads} KV heads"
        )
    if q_dim != k_dim:
        raise ServingInputError("k", f"head dim {k_dim} differs from q's {q_dim}")
    if v_heads != kv_heads:
        raise ServingInputError("v", f"has {v_heads} heads but k has {kv_heads}")


def _visible(lq: int, lk: int, rows: np.ndarray, causal: bool, window: int | None) -> np.ndarray:
    """(len(rows), lk) booleans: may query row i (of lq, the last positions) see key j."""
    keys = np.arange(lk)[None, :]
    last = rows[:, None] + (lk - lq)  # the newest key each row may see, bottom-right aligned
    seen = np.ones((rows.shape[0], lk), dtype=bool)
    if causal or window is not None:
        seen &= keys <= last
    if window is not None:
        seen &= keys > last - window
    return seen


def _attend(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    causal: bool,
    window: int | None,
    scale: float,
) -> tuple[np.ndarray, np.ndarray]:
    """One sequence: q (lq, Hq, D), k (lk, Hkv, D), v (lk, Hkv, Dv) -> out (lq, Hq, Dv), lse
    (Hq, lq), float32."""
    lq, heads, _ = q.shape
    lk, kv_heads, value_dim = v.shape
    group = heads // kv_heads
    out = np.zeros((lq, heads, value_dim), dtype=np.float32)
    lse = np.full((heads, lq), -np.inf, dtype=np.float32)
    if lq == 0 or lk == 0:
        return out, lse
    kf = np.repeat(k.astype(np.float32).transpose(1, 0, 2), group, axis=0)  # (Hq, lk, D)
    vf = np.repeat(v.astype(np.float32).transpose(1, 0, 2), group, axis=0)  # (Hq, lk, Dv)
    rows_per_block = max(1, SCORES_PER_BLOCK // (heads * lk))
    for r0 in range(0, lq, rows_per_block):
        rows = np.arange(r0, min(lq, r0 + rows_per_block))
        qf = q[rows].astype(np.float32).transpose(1, 0, 2) * np.float32(scale)  # (Hq, r, D)
        scores = qf @ kf.transpose(0, 2, 1)  # (Hq, r, lk)
        seen = _visible(lq, lk, rows, causal, window)
        scores = np.where(seen[None], scores, -np.inf)
        top = scores.max(axis=-1, keepdims=True)
        top = np.where(np.isneginf(top), 0.0, top).astype(np.float32)
        weights = np.exp(scores - top)
        total = weights.sum(axis=-1, keepdims=True)
        safe = np.where(total > 0, total, 1.0)
        part = np.where(total > 0, (weights @ vf) / safe, 0.0)
        out[rows] = part.transpose(1, 0, 2)
        with np.errstate(divide="ignore"):
            lse[:, rows] = np.where(total[..., 0] > 0, top[..., 0] + np.log(safe[..., 0]), -np.inf)
    return out, lse


def _scale_of(scale: float | None, head_dim: int) -> float:
    return 1.0 / float(np.sqrt(head_dim)) if scale is None else float(scale)


def _check_window(window: int | None) -> None:
    if window is not None and (isinstance(window, bool) or int(window) < 1):
        raise ServingInputError("window", f"expected a window of at least 1 key; got {window!r}")


def varlen_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    cu_seqlens_q: np.ndarray,
    cu_seqlens_k: np.ndarray,
    *,
    causal: bool = False,
    window: int | None = None,
    scale: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Attention of each packed sequence over its own keys: (out, lse); see the module's doc."""
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ServingInputError(
            "q", f"q, k and v must be 3-D (tokens, heads, D); got {q.ndim}, {k.ndim}, {v.ndim}"
        )
    _check_heads(q.shape[1], k.shape[1], q.shape[2], k.shape[2], v.shape[1])
    if v.shape[0] != k.shape[0]:
        raise ServingInputError("v", f"has {v.shape[0]} tokens but k has {k.shape[0]}")
    _check_window(window)
    check_cu_seqlens("cu_seqlens_q", cu_seqlens_q, q.shape[0], None)
    check_cu_seqlens("cu_seqlens_k", cu_seqlens_k, k.shape[0], len(cu_seqlens_q) - 1)
    scale = _scale_of(scale, q.shape[2])
    out = np.zeros((q.shape[0], q.shape[1], v.shape[2]), dtype=np.float32)
    lse = np.full((q.shape[1], q.shape[0]), -np.inf, dtype=np.float32)
    for b in range(len(cu_seqlens_q) - 1):
        q0, q1 = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])
        k0, k1 = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
        out[q0:q1], lse[:, q0:q1] = _attend(q[q0:q1], k[k0:k1], v[k0:k1], causal, window, scale)
    return out, lse


def check_paged(
    q: np.ndarray,
    k_cache: np.ndarray,
    v_cache: np.ndarray,
    block_table: np.ndarray,
    seq_lens_k: np.ndarray,
) -> None:
    """Refuse paged inputs that do not fit together, naming the argument at fault."""
    if q.ndim != 4:
        raise ServingInputError("q", f"expected (B, q_len, Hq, D); got shape {q.shape}")
    if k_cache.ndim != 4 or v_cache.ndim != 4:
        raise ServingInputError(
            "k_cache", f"expected (num_pages, page_size, Hkv, D); got shape {k_cache.shape}"
        )
    if k_cache.shape[:3] != v_cache.shape[:3]:
        raise ServingInputError(
            "v_cache", f"shape {v_cache.shape} does not match k_cache {k_cache.shape} in pages"
        )
    _check_heads(q.shape[2], k_cache.shape[2], q.shape[3], k_cache.shape[3], v_cache.shape[2])
    batch, (num_pages, page_size) = q.shape[0], k_cache.shape[:2]
    table, lens = np.asarray(block_table), np.asarray(seq_lens_k)
    if table.ndim != 2 or table.shape[0] != batch or not np.issubdtype(table.dtype, np.integer):
        raise ServingInputError(
            "block_table", f"expected an integer (B={batch}, max_pages) array; got {table.shape}"
        )
    if lens.shape != (batch,) or not np.issubdtype(lens.dtype, np.integer):
        raise ServingInputError(
            "seq_lens_k", f"expected an integer ({batch},) array; got shape {lens.shape}"
        )
    if (lens < 0).any():
        at = int(np.argmax(lens < 0))
        raise ServingInputError("seq_lens_k", f"entry {at} is {int(lens[at])}; lengths are >= 0")
    pages = -(-lens.astype(np.int64) // page_size)
    if (pages > table.shape[1]).any():
        at = int(np.argmax(pages > table.shape[1]))
        raise ServingInputError(
            "seq_lens_k",
            f"sequence {at} has {int(lens[at])} keys ({int(pages[at])} pages of {page_size}) but "
            f"block_table has {table.shape[1]} entries a sequence",
        )
    for b in range(batch):
        used = table[b, : pages[b]]
        bad = (used < 0) | (used >= num_pages)
        if bad.any():
            at = int(np.argmax(bad))
            raise ServingInputError(
                "block_table",
                f"entry [{b}, {at}] is page {int(used[at])}, outside 0..{num_pages - 1} "
                f"(k_cache has {num_pages} pages)",
            )


def gather_pages(cache: np.ndarray, pages: np.ndarray, length: int) -> np.ndarray:
    """A sequence's first ``length`` tokens (length, H, D) read from ``cache`` through its
    page ids ``pages``."""
    page_size = cache.shape[1]
    needed = -(-length // page_size)
    rows = cache[np.asarray(pages[:needed], dtype=np.int64)]
    return rows.reshape(needed * page_size, *cache.shape[2:])[:length]


def paged_attention(
    q: np.ndarray,
    k_cache: np.ndarray,
    v_cache: np.ndarray,
    block_table: np.ndarray,
    seq_lens_k: np.ndarray,
    *,
    causal: bool = False,
    window: int | None = None,
    scale: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Decode (or chunked prefill) of q against each sequence's pages: (out, lse); see the
    module's doc."""
    check_paged(q, k_cache, v_cache, block_table, seq_lens_k)
    _check_window(window)
    batch, q_len, heads, head_dim = q.shape
    scale = _scale_of(scale, head_dim)
    out = np.zeros((batch, q_len, heads, v_cache.shape[3]), dtype=np.float32)
    lse = np.full((batch, heads, q_len), -np.inf, dtype=np.float32)
    for b in range(batch):
        length = int(seq_lens_k[b])
        k = gather_pages(k_cache, block_table[b], length)
        v = gather_pages(v_cache, block_table[b], length)
        out[b], lse[b] = _attend(q[b], k, v, causal, window, scale)
    return out, lse
