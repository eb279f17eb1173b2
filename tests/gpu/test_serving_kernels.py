"""The serving kernels on the GPU against a float64 torch reference, sequence by sequence: varlen
prefill (odd lengths, zero-length sequences, one token, fewer keys than queries, causal, window,
GQA) and paged KV (pages shuffled and shared, the last page partly filled with NaN in its tail,
zero-length and one-token sequences, ragged splits and their combine, chunked prefill), D 64,
96 (padded), 128, fp16 and bf16. Inputs are fresh random normals from the session's printed seed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pytest.importorskip("cuda.tile")

from kernels.cutile.paged import paged_attention, plan_paged  # noqa: E402
from kernels.cutile.varlen import varlen_attention  # noqa: E402

REL_TOL = 1e-2


def reference(q, k, v, *, causal: bool, window: int | None = None):
    """One sequence: q (lq, Hq, D), k/v (lk, Hkv, D·); float64 softmax attention with the
    bottom-right masks; out (lq, Hq, Dv) and lse (Hq, lq), 0 and -inf where a row sees no key."""
    lq, heads, d = q.shape
    lk = k.shape[0]
    group = heads // k.shape[1]
    qd = q.double().transpose(0, 1)  # (Hq, lq, D)
    kd = k.double().transpose(0, 1).repeat_interleave(group, dim=0)
    vd = v.double().transpose(0, 1).repeat_interleave(group, dim=0)
    i = torch.arange(lq, device=q.device)[:, None] + (lk - lq)
    j = torch.arange(lk, device=q.device)[None, :]
    seen = torch.ones((lq, lk), dtype=torch.bool, device=q.device)
    if causal or window is not None:
        seen &= j <= i
    if window is not None:
        seen &= j > i - window
    s = (qd @ kd.transpose(-1, -2)) / math.sqrt(d)
    s = s.masked_fill(~seen, -math.inf)
    lse = torch.logsumexp(s, dim=-1)  # (Hq, lq)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return (p @ vd).transpose(0, 1), lse, seen.any(dim=-1)


def compare(out, lse, want, want_lse, sees, what: str) -> None:
    assert torch.isfinite(out).all(), f"NaN/Inf in the output: {what}"
    if sees.any():
        got, ref = out[sees].double(), want[sees]
        err = (torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)).item()
        assert err < REL_TOL, f"relative error {err:.2e}: {what}"
        assert torch.allclose(lse[:, sees], want_lse[:, sees].float(), atol=2e-2, rtol=1e-3), what
    assert torch.isneginf(lse[:, ~sees]).all() and (out[~sees] == 0).all(), what


def randn(gen, shape, dtype):
    return torch.randn(shape, generator=gen, device="cuda", dtype=getattr(torch, dtype))


def cu(lengths) -> torch.Tensor:
    return torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int32).cuda()


POLY16 = {"poly_cols": 16, "key_latency": 3, "value_latency": 6}


@pytest.mark.parametrize(
    ("dtype", "head_dim", "heads", "kv_heads", "mask", "tile", "step"),
    [
        ("float16", 128, 8, 2, "causal", (64, 64), {}),
        ("bfloat16", 64, 4, 4, "none", (64, 64), {}),
        ("bfloat16", 96, 8, 1, "window", (64, 64), {}),
        ("float16", 128, 6, 2, "none", (64, 64), {}),
        ("bfloat16", 128, 8, 2, "causal", (128, 128), {}),  # 8 worker warps, one CTA an SM
        ("bfloat16", 96, 8, 1, "window", (128, 64), {}),
        # The polynomial exp2 on the unmasked key blocks.
        ("bfloat16", 128, 8, 2, "causal", (128, 128), POLY16),
        ("float16", 128, 8, 2, "none", (128, 128), {"poly_cols": 32}),
        ("bfloat16", 96, 8, 1, "window", (64, 128), {"poly_cols": 8}),
        # Each tile on a 2-CTA cluster, 2 CTAs an SM (the dense prefill's fastest form).
        ("bfloat16", 128, 8, 2, "causal", (128, 128), {"cluster_ctas": 2, "ctas_per_sm": 2}),
        ("float16", 64, 4, 4, "none", (128, 64), {"cluster_ctas": 2, "ctas_per_sm": 2}),
    ],
    ids=[
        "fp16-d128-gqa4-causal",
        "bf16-d64-mha-none",
        "bf16-d96-mqa-window",
        "fp16-group3",
        "bf16-d128-causal-128x128",
        "bf16-d96-window-128x64",
        "bf16-d128-causal-128x128-poly16",
        "fp16-d128-none-128x128-poly32",
        "bf16-d96-window-64x128-poly8",
        "bf16-d128-causal-128x128-cluster2",
        "fp16-d64-none-128x64-cluster2",
    ],
)
def test_varlen_prefill_matches_the_reference(
    seed, dtype, head_dim, heads, kv_heads, mask, tile, step
):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    rng = np.random.default_rng(seed)
    # Odd lengths, an empty sequence, one token, keys beyond the queries (a cached prefix), a
    # sequence with fewer keys than queries (its first rows see none when causal).
    lq = [1, 0, 37, 300, 129, int(rng.integers(200, 700)), 50, 64]
    lk = [1, 0, 37, 300 + 77, 129, lq[5] + int(rng.integers(0, 300)), 20, 0]
    q = randn(gen, (sum(lq), heads, head_dim), dtype)
    k = randn(gen, (sum(lk), kv_heads, head_dim), dtype)
    v = randn(gen, (sum(lk), kv_heads, head_dim), dtype)
    window = 100 if mask == "window" else None
    out, lse = varlen_attention(
        q, k, v, cu(lq), cu(lk), causal=mask == "causal", window=window, block_m=tile[0],
        block_n=tile[1], **step,
    )  # fmt: skip
    torch.cuda.synchronize()
    assert out.shape == (sum(lq), heads, head_dim) and lse.shape == (heads, sum(lq))
    qo, ko = np.cumsum([0, *lq]), np.cumsum([0, *lk])
    for b in range(len(lq)):
        if lq[b] == 0:
            continue
        qs, ks = slice(qo[b], qo[b + 1]), slice(ko[b], ko[b + 1])
        want, want_lse, sees = reference(
            q[qs], k[ks], v[ks], causal=mask == "causal", window=window
        )
        what = f"seed {seed} sequence {b} (lq {lq[b]}, lk {lk[b]}) {mask} {dtype} D{head_dim}"
        what += f" {tile[0]}x{tile[1]} tiles {step or ''}"
        compare(out[qs], lse[:, qs], want, want_lse, sees, what)


def test_varlen_with_no_key_at_all_gives_zeros_and_minus_inf(seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = randn(gen, (5, 4, 64), "float16")
    k = randn(gen, (0, 4, 64), "float16")
    out, lse = varlen_attention(q, k, k, cu([2, 3]), cu([0, 0]), causal=True)
    assert (out == 0).all() and torch.isneginf(lse).all()


def paged_cache(gen, rng, seq_lens, page_size, kv_heads, head_dim, dtype, *, share: bool):
    """K and V caches whose pages are shuffled (and, with ``share``, sequence 1 reuses sequence
    0's first pages as a shared prefix), every unused slot NaN; the block table; per sequence
    its contiguous K and V for the reference."""
    need = [-(-n // page_size) for n in seq_lens]
    num_pages = sum(need) + 3  # spare pages that no sequence uses
    order = rng.permutation(num_pages)
    dt = getattr(torch, dtype)
    k_cache = torch.full((num_pages, page_size, kv_heads, head_dim), math.nan, dtype=dt).cuda()
    v_cache = torch.full_like(k_cache, math.nan)
    table = np.full((len(seq_lens), max(max(need), 1) + 2), -1, dtype=np.int32)
    next_page, keys = 0, []
    for b, n in enumerate(seq_lens):
        shared = max(min(need[0] - 1, need[b] - 1, 2), 0) if share and b == 1 else 0
        table[b, :shared] = table[0, :shared]
        for p in range(shared, need[b]):
            table[b, p] = order[next_page]
            next_page += 1
        kb = randn(gen, (n, kv_heads, head_dim), dtype)
        vb = randn(gen, (n, kv_heads, head_dim), dtype)
        if shared:
            prefix = shared * page_size
            kb[:prefix] = keys[0][0][:prefix]
            vb[:prefix] = keys[0][1][:prefix]
        for p in range(need[b]):
            lo, hi = p * page_size, min((p + 1) * page_size, n)
            k_cache[int(table[b, p]), : hi - lo] = kb[lo:hi]
            v_cache[int(table[b, p]), : hi - lo] = vb[lo:hi]
        keys.append((kb, vb))
    return k_cache, v_cache, torch.from_numpy(table).cuda(), keys


def check_paged(seed, *, seq_lens, q_len, heads, kv_heads, head_dim, dtype, page_size,
                share=True, **plan_knobs):  # fmt: skip
    gen = torch.Generator(device="cuda").manual_seed(seed)
    rng = np.random.default_rng(seed)
    k_cache, v_cache, table, keys = paged_cache(
        gen, rng, seq_lens, page_size, kv_heads, head_dim, dtype, share=share
    )
    q = randn(gen, (len(seq_lens), q_len, heads, head_dim), dtype)
    lens = torch.tensor(seq_lens, dtype=torch.int32).cuda()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    plan = plan_paged(seq_lens, q_len=q_len, heads=heads, kv_heads=kv_heads,
                      page_size=page_size, sm_count=sms, **plan_knobs)  # fmt: skip
    out, lse = paged_attention(q, k_cache, v_cache, table, lens, plan=plan)
    torch.cuda.synchronize()
    assert out.shape == (len(seq_lens), q_len, heads, head_dim)
    assert lse.shape == (len(seq_lens), heads, q_len)
    for b, (kb, vb) in enumerate(keys):
        want, want_lse, sees = reference(q[b], kb, vb, causal=True)
        what = (
            f"seed {seed} sequence {b} of {seq_lens} q_len {q_len} P{page_size} {dtype} "
            f"D{head_dim} H{heads}/{kv_heads} splits {plan.schedule.splits[b]} {plan_knobs}"
        )
        compare(out[b], lse[b], want, want_lse, sees, what)
    return plan


@pytest.mark.parametrize(
    ("page_size", "q_len", "dtype", "head_dim"),
    [
        (16, 1, "bfloat16", 128),
        (64, 1, "float16", 128),
        (256, 1, "bfloat16", 64),
        (32, 4, "float16", 64),
        (128, 16, "bfloat16", 128),
        (64, 1, "bfloat16", 96),
    ],
    ids=["p16-q1", "p64-q1-fp16", "p256-q1-d64", "p32-q4-fp16-d64", "p128-q16", "p64-d96"],
)
def test_paged_decode_matches_the_reference(seed, page_size, q_len, dtype, head_dim):
    # One long sequence (split into many units, merged by the combine) beside short ones, an
    # empty one, a single token and lengths that leave the last page partly filled.
    seq_lens = [9000, 333, 0, 1, page_size * 3, 1000 + page_size // 2 + 1]
    plan = check_paged(seed, seq_lens=seq_lens, q_len=q_len, heads=32, kv_heads=8,
                       head_dim=head_dim, dtype=dtype, page_size=page_size)  # fmt: skip
    assert plan.schedule.needs_combine and plan.schedule.splits[0] > 1


@pytest.mark.parametrize("block_n", [16, 64, 128])
def test_paged_decode_at_page_16_in_every_key_block(seed, block_n):
    # A page a step, four pages joined, eight joined: the same result.
    check_paged(seed, seq_lens=[700, 5, 64, 1], q_len=2, heads=8, kv_heads=2, head_dim=128,
                dtype="bfloat16", page_size=16, block_n=block_n)  # fmt: skip


def test_paged_without_splits_writes_the_output_itself(seed):
    plan = check_paged(seed, seq_lens=[4000, 17, 0], q_len=1, heads=16, kv_heads=16,
                       head_dim=128, dtype="float16", page_size=64, split=False)  # fmt: skip
    assert not plan.schedule.needs_combine


@pytest.mark.parametrize("page_size", [16, 128])
def test_chunked_prefill_over_pages(seed, page_size):
    # 128 queries, the last positions of each sequence, against its pages; one sequence holds
    # fewer keys than queries (its first rows see none).
    check_paged(seed, seq_lens=[1500, 128, 300, 90], q_len=128, heads=8, kv_heads=2,
                head_dim=128, dtype="bfloat16", page_size=page_size)  # fmt: skip
