"""The serving reference (kernels/reference_serving.py): varlen prefill and paged decode against
the plain float64 attention of each sequence on its own (tests/oracles.py), at odd lengths, a
zero-length sequence, one token, pages shuffled and shared, the last page part full, GQA and
Dv != D; and its refusals of inputs that do not fit together, each naming the argument.
The inputs are fresh random numbers from the session seed (printed in the header)."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.reference_serving import ServingInputError, paged_attention, varlen_attention
from tests.oracles import naive_attention


def dense(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: str, window: int | None = None):
    """(out (lq, Hq, Dv), lse (Hq, lq)) of one sequence in float64, queries last."""
    lq, lk = q.shape[0], k.shape[0]
    to4 = lambda x: x.transpose(1, 0, 2)[None]  # noqa: E731 - (tokens, H, D) -> (1, H, N, D)
    out = naive_attention(to4(q), to4(k), to4(v), mask=mask, input_pos=lk - lq, window=window)
    group = q.shape[1] // k.shape[1]
    scores = (to4(q)[0] @ np.repeat(to4(k)[0], group, 0).swapaxes(-1, -2)) / np.sqrt(q.shape[2])
    rows, keys = np.arange(lq)[:, None] + lk - lq, np.arange(lk)[None, :]
    seen = np.ones((lq, lk), bool) if mask == "none" else keys <= rows
    if window is not None:
        seen &= keys > rows - window
    scores = np.where(seen[None], scores, -np.inf)
    with np.errstate(divide="ignore"):
        top = scores.max(axis=-1)
        lse = top + np.log(np.exp(scores - top[..., None]).sum(axis=-1))
    return out[0].transpose(1, 0, 2), lse


def packed(rng: np.random.Generator, lengths: list[int], heads: int, dim: int) -> np.ndarray:
    return rng.standard_normal((sum(lengths), heads, dim)).astype(np.float32)


def offsets(lengths: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


@pytest.mark.parametrize(("mask", "window"), [("none", None), ("causal", None), ("window", 5)])
def test_varlen_matches_each_sequence_alone(
    rng: np.random.Generator, mask: str, window: int | None
) -> None:
    # Odd lengths, one token, an empty sequence and a chunk of queries after cached keys.
    q_lens, k_lens = [37, 1, 0, 20, 64], [37, 1, 0, 53, 64]
    q, k = packed(rng, q_lens, 4, 32), packed(rng, k_lens, 2, 32)
    v = packed(rng, k_lens, 2, 16)  # Dv 16 beside D 32
    cu_q, cu_k = offsets(q_lens), offsets(k_lens)
    out, lse = varlen_attention(
        q, k, v, cu_q, cu_k, causal=mask != "none", window=window, scale=None
    )
    assert out.shape == (sum(q_lens), 4, 16) and lse.shape == (4, sum(q_lens))
    assert out.dtype == np.float32 and lse.dtype == np.float32
    for b in range(len(q_lens)):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        if q_lens[b] == 0:
            continue
        want, want_lse = dense(q[qs], k[ks], v[ks], mask, window)
        np.testing.assert_allclose(out[qs], want, atol=2e-5, rtol=1e-4)
        np.testing.assert_allclose(lse[:, qs], want_lse, atol=2e-5, rtol=1e-5)


def test_varlen_empty_keys_give_zero_rows_and_minus_infinite_lse(rng: np.random.Generator) -> None:
    q_lens, k_lens = [3, 2], [0, 4]  # the first sequence's queries have no key at all
    q, k, v = packed(rng, q_lens, 2, 8), packed(rng, k_lens, 2, 8), packed(rng, k_lens, 2, 8)
    out, lse = varlen_attention(q, k, v, offsets(q_lens), offsets(k_lens), causal=False)
    assert not out[:3].any() and np.isneginf(lse[:, :3]).all()
    assert np.isfinite(lse[:, 3:]).all() and np.abs(out[3:]).sum() > 0


def write_pages(
    rng: np.random.Generator, lengths: list[int], page_size: int, heads: int, dim: int,
    shared: int,
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:  # fmt: skip
    """A shuffled page pool holding each sequence's keys, its first ``shared`` pages one set
    for all; (cache, block table, each sequence's tokens as the dense oracle sees them)."""
    pages = [-(-n // page_size) for n in lengths]
    own = [max(0, p - shared) for p in pages]
    num_pages = shared + sum(own) + 3  # three pages nobody reads
    order = rng.permutation(num_pages)
    cache = rng.standard_normal((num_pages, page_size, heads, dim)).astype(np.float32)
    table = np.full((len(lengths), max(pages) + 2), -7, dtype=np.int32)  # junk past the end
    shared_ids, cursor = order[:shared], shared
    tokens = []
    for b, n in enumerate(lengths):
        ids = list(shared_ids[: min(shared, pages[b])])
        ids += list(order[cursor : cursor + own[b]])
        cursor += own[b]
        table[b, : len(ids)] = ids
        tokens.append(cache[ids].reshape(-1, heads, dim)[:n] if ids else cache[:0, 0])
    return cache, table, tokens


@pytest.mark.parametrize(("q_len", "causal"), [(1, False), (4, True)])
def test_paged_decode_matches_each_sequence_alone(
    rng: np.random.Generator, q_len: int, causal: bool
) -> None:
    lengths, page_size = [50, 16, 7, 100, 33], 16  # part-full last pages, one exactly full
    k_cache, table, k_seqs = write_pages(rng, lengths, page_size, 2, 32, shared=1)
    v_cache = rng.standard_normal((*k_cache.shape[:3], 24)).astype(np.float32)
    v_seqs = [
        v_cache[table[b, : -(-n // 16)]].reshape(-1, 2, 24)[:n] for b, n in enumerate(lengths)
    ]
    q = rng.standard_normal((len(lengths), q_len, 8, 32)).astype(np.float32)
    seq_lens = np.array(lengths, dtype=np.int32)
    out, lse = paged_attention(q, k_cache, v_cache, table, seq_lens, causal=causal, scale=None)
    assert out.shape == (5, q_len, 8, 24) and lse.shape == (5, 8, q_len)
    # The shared first page is the same page id in every sequence's row.
    assert len(set(table[:, 0].tolist())) == 1
    for b in range(len(lengths)):
        want, want_lse = dense(q[b], k_seqs[b], v_seqs[b], "causal" if causal else "none")
        np.testing.assert_allclose(out[b], want, atol=2e-5, rtol=1e-4)
        np.testing.assert_allclose(lse[b], want_lse, atol=2e-5, rtol=1e-5)


def test_paged_zero_length_sequence_is_zeros(rng: np.random.Generator) -> None:
    k_cache, table, _ = write_pages(rng, [0, 20], 16, 1, 8, shared=0)
    q = rng.standard_normal((2, 1, 1, 8)).astype(np.float32)
    out, lse = paged_attention(q, k_cache, k_cache, table, np.array([0, 20], np.int32))
    assert not out[0].any() and np.isneginf(lse[0]).all() and np.isfinite(lse[1]).all()


def test_refusals_name_the_argument(rng: np.random.Generator) -> None:
    q, k, v = packed(rng, [4, 4], 2, 8), packed(rng, [4, 4], 2, 8), packed(rng, [4, 4], 2, 8)
    good = np.array([0, 4, 8], np.int32)
    with pytest.raises(ServingInputError, match=r"^cu_seqlens_q: must be non-decreasing; "
                       r"entry 2 is 3 after 6$"):  # fmt: skip
        varlen_attention(q, k, v, np.array([0, 6, 3, 8], np.int32), np.array([0, 2, 4, 8]))
    with pytest.raises(ServingInputError, match=r"^cu_seqlens_k: ends at 7 but the packed"):
        varlen_attention(q, k, v, good, np.array([0, 4, 7], np.int32))
    with pytest.raises(ServingInputError, match=r"^cu_seqlens_k: has 4 offsets"):
        varlen_attention(q, k, v, good, np.array([0, 4, 6, 8], np.int32))
    with pytest.raises(ServingInputError, match=r"^cu_seqlens_q: must start at 0"):
        varlen_attention(q, k, v, np.array([1, 4, 8], np.int32), good)
    k_cache, table, _ = write_pages(rng, [20, 5], 16, 2, 8, shared=0)
    qd = rng.standard_normal((2, 1, 2, 8)).astype(np.float32)
    lens = np.array([20, 5], np.int32)
    bad_table = table.copy()
    bad_table[0, 1] = k_cache.shape[0]
    with pytest.raises(ServingInputError, match=r"^block_table: entry \[0, 1\] is page"):
        paged_attention(qd, k_cache, k_cache, bad_table, lens)
    with pytest.raises(ServingInputError, match=r"^seq_lens_k: sequence 0 has 100 keys"):
        paged_attention(qd, k_cache, k_cache, table, np.array([100, 5], np.int32))
    with pytest.raises(ServingInputError, match=r"^seq_lens_k: entry 1 is -1"):
        paged_attention(qd, k_cache, k_cache, table, np.array([20, -1], np.int32))
    with pytest.raises(ServingInputError, match=r"^seq_lens_k: expected an integer \(2,\)"):
        paged_attention(qd, k_cache, k_cache, table, np.array([20], np.int32))
