"""The NumPy FlashAttention (online softmax over the tile schedule) against the float64 oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.reference import flash_attention
from kernels.schedule import Schedule, visible
from tests.oracles import naive_attention


def inputs(
    rng: np.random.Generator,
    *,
    batch: int = 1,
    heads: int = 2,
    kv_heads: int | None = None,
    q_len: int = 64,
    k_len: int = 64,
    head_dim: int = 32,
    dtype: type = np.float64,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    kv_heads = kv_heads or heads
    q = rng.standard_normal((batch, heads, q_len, head_dim)).astype(dtype)
    k = rng.standard_normal((batch, kv_heads, k_len, head_dim)).astype(dtype)
    v = rng.standard_normal((batch, kv_heads, k_len, head_dim)).astype(dtype)
    return q, k, v


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


CASES = [
    dict(),
    dict(q_len=100, k_len=77),  # ragged on both axes
    dict(q_len=1, k_len=300),
    dict(q_len=300, k_len=1),
    dict(heads=8, kv_heads=2, q_len=96, k_len=96),  # GQA, group of 4
    dict(heads=6, kv_heads=1, q_len=50, k_len=130, mask="causal"),  # MQA
    dict(q_len=100, k_len=100, mask="causal"),
    dict(q_len=37, k_len=200, mask="causal", input_pos=163),  # chunked prefill
    dict(q_len=150, k_len=90, mask="causal", input_pos=5),
    dict(q_len=200, k_len=200, mask="window", window=17),
    dict(q_len=64, k_len=300, mask="window", input_pos=236, window=100),
    dict(q_len=130, k_len=130, mask="window", window=1),
    dict(batch=3, heads=2, q_len=70, k_len=70, mask="causal", tile_m=16, tile_n=128),
    dict(q_len=129, k_len=257, tile_m=128, tile_n=16),
    dict(q_len=255, k_len=255, tile_m=32, tile_n=64, mask="window", window=64),
]

SHAPE_KEYS = ("batch", "heads", "kv_heads", "q_len", "k_len")


def split(case: dict) -> tuple[dict, dict]:
    shape = {k: v for k, v in case.items() if k in SHAPE_KEYS}
    rest = {k: v for k, v in case.items() if k not in SHAPE_KEYS}
    return shape, rest


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_float64_agrees_with_naive_to_1e9(case: dict, rng: np.random.Generator) -> None:
    shape, rest = split(case)
    q, k, v = inputs(rng, **shape)
    masking = {k: v for k, v in rest.items() if k in ("mask", "input_pos", "window")}
    want = naive_attention(q, k, v, **masking)
    got = flash_attention(q, k, v, accumulate=np.float64, **rest)
    assert got.dtype == np.float64
    assert got.shape == q.shape
    assert np.isfinite(got).all()
    assert rel_err(got, want) < 1e-9
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_float32_default_is_close(case: dict, rng: np.random.Generator) -> None:
    shape, rest = split(case)
    q, k, v = inputs(rng, dtype=np.float32, **shape)
    masking = {k: v for k, v in rest.items() if k in ("mask", "input_pos", "window")}
    want = naive_attention(q, k, v, **masking)  # float64 arithmetic on the same values
    got = flash_attention(q, k, v, **rest)
    assert got.dtype == np.float32
    assert rel_err(got.astype(np.float64), want) < 1e-5


@settings(max_examples=60, deadline=None)
@given(
    q_len=st.integers(1, 160),
    k_len=st.integers(1, 160),
    group=st.sampled_from([1, 2, 3]),
    kv_heads=st.integers(1, 2),
    mask=st.sampled_from(["none", "causal", "window"]),
    input_pos=st.integers(0, 100),
    window=st.integers(1, 200),
    tile_m=st.sampled_from([16, 32, 64, 128]),
    tile_n=st.sampled_from([16, 32, 64, 128]),
    head_dim=st.sampled_from([8, 32]),
    scale=st.one_of(st.none(), st.floats(0.01, 2.0)),
)
def test_random_shapes_agree_with_naive(
    q_len: int,
    k_len: int,
    group: int,
    kv_heads: int,
    mask: str,
    input_pos: int,
    window: int,
    tile_m: int,
    tile_n: int,
    head_dim: int,
    scale: float | None,
) -> None:
    rng = np.random.default_rng()
    q, k, v = inputs(
        rng, heads=kv_heads * group, kv_heads=kv_heads, q_len=q_len, k_len=k_len, head_dim=head_dim
    )
    masking = dict(
        mask=mask,
        input_pos=input_pos if mask != "none" else 0,
        window=window if mask == "window" else None,
    )
    want = naive_attention(q, k, v, scale=scale, **masking)
    got, grid = flash_attention(
        q,
        k,
        v,
        scale=scale,
        tile_m=tile_m,
        tile_n=tile_n,
        accumulate=np.float64,
        return_block_map=True,
        **masking,
    )
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    schedule = Schedule(q_len, k_len, tile_m, tile_n, **masking)
    np.testing.assert_array_equal(grid, schedule.block_map)


def test_rows_that_see_no_key_return_zeros(rng: np.random.Generator) -> None:
    # Keys 0..99, window of 8: query rows past key 107 see nothing at all.
    q, k, v = inputs(rng, q_len=256, k_len=100)
    blind = ~visible(256, 100, "window", 0, 8).any(axis=1)
    assert blind.sum() > 100 and (~blind).sum() > 50  # both kinds of rows are present
    for accumulate in (np.float32, np.float64):
        out = flash_attention(
            q, k, v, mask="window", window=8, tile_m=64, tile_n=32, accumulate=accumulate
        )
        assert np.isfinite(out).all()
        assert (out[:, :, blind] == 0).all()
        assert (np.abs(out[:, :, ~blind]).sum(axis=-1) > 0).all()
    naive = naive_attention(q, k, v, mask="window", window=8)
    assert (naive[:, :, blind] == 0).all()


def test_returned_block_map_is_the_schedule(rng: np.random.Generator) -> None:
    q, k, v = inputs(rng, q_len=300, k_len=420)
    for kwargs in (
        dict(mask="none"),
        dict(mask="causal", input_pos=120),
        dict(mask="window", input_pos=120, window=90),
    ):
        out, grid = flash_attention(q, k, v, tile_m=32, tile_n=64, return_block_map=True, **kwargs)
        want = Schedule(300, 420, 32, 64, **kwargs).block_map
        assert grid.dtype == np.int8
        np.testing.assert_array_equal(grid, want)
        assert out.shape == q.shape


def test_extreme_scores_do_not_overflow(rng: np.random.Generator) -> None:
    """The running max keeps exp() finite even when raw scores are huge."""
    q, k, v = inputs(rng, dtype=np.float32, q_len=80, k_len=120)
    q *= 300.0
    out = flash_attention(q, k, v, mask="causal", input_pos=40, tile_m=16, tile_n=32)
    want = naive_attention(q, k, v, mask="causal", input_pos=40)
    assert np.isfinite(out).all()
    assert rel_err(out.astype(np.float64), want) < 1e-4


def test_inputs_are_not_modified(rng: np.random.Generator) -> None:
    q, k, v = inputs(rng, dtype=np.float32)
    copies = [a.copy() for a in (q, k, v)]
    flash_attention(q, k, v, mask="causal")
    for before, after in zip(copies, (q, k, v)):
        np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize(
    ("q_shape", "k_shape", "v_shape"),
    [
        ((2, 16, 8), (1, 2, 16, 8), (1, 2, 16, 8)),  # q rank 3
        ((1, 2, 16, 8), (2, 16, 8), (2, 16, 8)),  # k, v rank 3
        ((1, 2, 16, 8), (1, 2, 16, 8), (1, 2, 17, 8)),  # k and v differ
        ((1, 2, 16, 8), (2, 2, 16, 8), (2, 2, 16, 8)),  # batch differs
        ((1, 2, 16, 8), (1, 2, 16, 16), (1, 2, 16, 16)),  # head_dim differs
        ((1, 3, 16, 8), (1, 2, 16, 8), (1, 2, 16, 8)),  # heads not a multiple of kv heads
        ((1, 2, 16, 8), (1, 0, 16, 8), (1, 0, 16, 8)),  # no kv heads
    ],
)
def test_bad_ranks_and_shapes_raise_value_error(
    q_shape: tuple, k_shape: tuple, v_shape: tuple, rng: np.random.Generator
) -> None:
    q = rng.standard_normal(q_shape)
    k = rng.standard_normal(k_shape)
    v = rng.standard_normal(v_shape)
    with pytest.raises(ValueError):
        flash_attention(q, k, v)


def test_bad_mask_arguments_raise_value_error(rng: np.random.Generator) -> None:
    q, k, v = inputs(rng)
    with pytest.raises(ValueError):
        flash_attention(q, k, v, mask="sliding")
    with pytest.raises(ValueError):
        flash_attention(q, k, v, mask="window")  # no window size
