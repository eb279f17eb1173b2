"""NumPy helpers of the serving kernels' CPU tests: the float64 reference of one sequence, the
comparison, and a paged batch with shuffled, shared pages and NaN in every unused slot."""

from __future__ import annotations

import math

import numpy as np

REL_TOL = 1e-2


def reference(q, k, v, *, causal: bool, window: int | None = None):
    """One sequence, float64: out (lq, Hq, Dv), lse (Hq, lq), and which rows see a key."""
    lq, heads, d = q.shape
    lk = k.shape[0]
    group = heads // k.shape[1]
    qd = q.astype(np.float64).transpose(1, 0, 2)
    kd = np.repeat(k.astype(np.float64).transpose(1, 0, 2), group, axis=0)
    vd = np.repeat(v.astype(np.float64).transpose(1, 0, 2), group, axis=0)
    i = np.arange(lq)[:, None] + (lk - lq)
    j = np.arange(lk)[None, :]
    seen = np.ones((lq, lk), dtype=bool)
    if causal or window is not None:
        seen &= j <= i
    if window is not None:
        seen &= j > i - window
    s = np.where(seen, qd @ kd.transpose(0, 2, 1) / math.sqrt(d), -np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        top = np.max(s, axis=-1, keepdims=True, initial=-np.inf)
        e = np.exp(s - np.where(np.isfinite(top), top, 0))
        total = e.sum(-1, keepdims=True)
        out = (e / np.where(total == 0, 1, total)) @ vd
        lse = (np.log(total) + np.where(np.isfinite(top), top, 0))[..., 0]
    return out.transpose(1, 0, 2), lse, seen.any(-1)


def compare(out, lse, want, want_lse, sees, what: str) -> None:
    assert np.isfinite(out).all(), f"NaN/Inf (or an unwritten row) in the output: {what}"
    if sees.any():
        got, ref = out[sees].astype(np.float64), want[sees]
        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        assert err < REL_TOL, f"relative error {err:.2e}: {what}"
        np.testing.assert_allclose(lse[:, sees], want_lse[:, sees], atol=2e-2, rtol=1e-3)
    assert np.isneginf(lse[:, ~sees]).all() and (out[~sees] == 0).all(), what


def paged_batch(rng, seq_lens, page, kv_heads, head_dim):
    """Shuffled pages (sequence 1 shares sequence 0's first two), NaN in every unused slot, a
    block table padded with -1; each sequence's contiguous K and V."""
    need = [-(-n // page) for n in seq_lens]
    num_pages = sum(need) + 2
    order = rng.permutation(num_pages)
    k_cache = np.full((num_pages, page, kv_heads, head_dim), np.nan, dtype=np.float16)
    v_cache = np.full_like(k_cache, np.nan)
    table = np.full((len(seq_lens), max(need) + 1), -1, dtype=np.int32)
    keys, at = [], 0
    for b, n in enumerate(seq_lens):
        shared = max(min(need[0] - 1, need[b] - 1, 2), 0) if b == 1 else 0
        table[b, :shared] = table[0, :shared]
        table[b, shared : need[b]] = order[at : at + need[b] - shared]
        at += need[b] - shared
        kb = rng.standard_normal((n, kv_heads, head_dim)).astype(np.float16)
        vb = rng.standard_normal((n, kv_heads, head_dim)).astype(np.float16)
        if shared:
            kb[: shared * page] = keys[0][0][: shared * page]
            vb[: shared * page] = keys[0][1][: shared * page]
        for p in range(need[b]):
            lo, hi = p * page, min((p + 1) * page, n)
            k_cache[table[b, p], : hi - lo] = kb[lo:hi]
            v_cache[table[b, p], : hi - lo] = vb[lo:hi]
        keys.append((kb, vb))
    return k_cache, v_cache, table, keys
