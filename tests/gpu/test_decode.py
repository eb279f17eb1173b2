"""The decode form on the GPU (packed GQA heads, the key range split across CTAs, the combine)
against a float64 reference: every split count the knob offers and auto, splits and rows that
see no key, ragged k_len, bottom-right causal with input_pos, GQA 32/8, MQA, MHA, D 64/128,
fp16/bf16. Outputs are poisoned with NaN before each launch; inputs are fresh random normals
from the session's printed seed."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pytest.importorskip("cuda.tile")

from kernels.cutile import forms, launch  # noqa: E402
from kernels.knobs import KV_SPLIT_COUNTS  # noqa: E402
from kernels.schedule import visible  # noqa: E402

REL_TOL = 1e-2


def reference(q, k, v, mask: str, input_pos: int):
    """float64 softmax attention; rows that see no key give 0 and -inf."""
    group = q.shape[1] // k.shape[1]
    kd = k.double().repeat_interleave(group, dim=1)
    vd = v.double().repeat_interleave(group, dim=1)
    seen = torch.from_numpy(visible(q.shape[2], k.shape[2], mask, input_pos)).to(q.device)
    s = (q.double() @ kd.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~seen, -math.inf)
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return p @ vd, lse, seen.any(dim=-1)


def inputs(
    seed: int,
    batch: int,
    heads: int,
    kv_heads: int,
    q_len: int,
    k_len: int,
    head_dim: int,
    dtype: str,
):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dt = getattr(torch, dtype)

    def make(h: int, n: int):
        return torch.randn((batch, h, n, head_dim), generator=gen, device="cuda", dtype=dt)

    return make(heads, q_len), make(kv_heads, k_len), make(kv_heads, k_len)


def check(
    seed: int,
    *,
    batch: int,
    heads: int,
    kv_heads: int,
    q_len: int,
    k_len: int,
    head_dim: int = 128,
    dtype: str = "bfloat16",
    mask: str = "none",
    input_pos: int = 0,
    **knobs,
) -> None:
    """Run the decode form (out and LSE poisoned first) and compare with the reference."""
    q, k, v = inputs(seed, batch, heads, kv_heads, q_len, k_len, head_dim, dtype)
    out = torch.full_like(q, math.nan)
    run = launch.prepare(q, k, v, mask=mask, input_pos=input_pos, out=out, return_lse=True, **knobs)
    _, lse = run()
    torch.cuda.synchronize()
    want, want_lse, sees = reference(q, k, v, mask, input_pos)
    what = f"seed {seed} {knobs} B{batch} H{heads}/{kv_heads} q{q_len} k{k_len} {mask}"
    assert torch.isfinite(out).all(), f"NaN/Inf in the output: {what}"
    err = (torch.linalg.vector_norm(out.double() - want) / torch.linalg.vector_norm(want)).item()
    assert err < REL_TOL, f"relative error {err:.2e}: {what}"
    # The LSE where a row sees keys; -inf and zeros where it sees none.
    assert torch.allclose(lse[..., sees], want_lse[..., sees].float(), atol=2e-2, rtol=1e-3), what
    assert torch.isneginf(lse[..., ~sees]).all() and (out[..., ~sees, :] == 0).all(), what


def the_form(batch, heads, kv_heads, q_len, k_len, mask, input_pos, **knobs):
    """The form and split count a launch of ``knobs`` runs (the plan, without launching)."""
    p = forms.Problem(batch, heads, kv_heads, q_len, k_len, 128, "bfloat16")
    plan = forms.plan(
        p,
        launch.LaunchConfig.of(knobs),
        scale=0.1,
        mask=mask,
        input_pos=input_pos,
        window=None,
        with_lse=False,
        with_map=False,
        sm_count=lambda: torch.cuda.get_device_properties(0).multi_processor_count,
    )
    return plan.form, plan.grid[2] if plan.form == "decode" else 1


@pytest.mark.parametrize("kv_splits", [*KV_SPLIT_COUNTS, None], ids=lambda s: f"splits-{s}")
def test_every_split_count_gqa_32_8_ragged_keys(seed: int, kv_splits: int | None) -> None:
    # q_len 1, 4000 keys (31 whole 128-key blocks and one of 32): packed, every split count.
    problem = dict(batch=2, heads=32, kv_heads=8, q_len=1, k_len=4000)
    check(seed, **problem, tile_n=128, kv_splits=kv_splits, pack_gqa=True)
    form, splits = the_form(
        **problem, mask="none", input_pos=0, tile_n=128, kv_splits=kv_splits, pack_gqa=True
    )
    assert form == "decode" and splits == min(kv_splits or splits, 32)


@pytest.mark.parametrize(
    ("heads", "kv_heads", "head_dim", "dtype", "pack_gqa", "kv_splits"),
    [
        (32, 8, 128, "float16", True, 8),  # GQA, fp16
        (8, 1, 128, "bfloat16", True, 16),  # MQA: 8 heads in one tile
        (8, 8, 128, "bfloat16", True, 4),  # MHA: packing is one head a tile
        (32, 8, 64, "bfloat16", True, 8),  # D 64
        (16, 4, 64, "float16", False, 32),  # unpacked heads, split
        (32, 8, 128, "bfloat16", False, 1),  # unpacked, no split: the tile form
    ],
)
def test_heads_dims_and_dtypes(
    seed: int, heads, kv_heads, head_dim, dtype, pack_gqa, kv_splits
) -> None:
    check(
        seed,
        batch=3,
        heads=heads,
        kv_heads=kv_heads,
        q_len=1,
        k_len=3000,
        head_dim=head_dim,
        dtype=dtype,
        tile_n=64,
        kv_splits=kv_splits,
        pack_gqa=pack_gqa,
    )


@pytest.mark.parametrize("kv_splits", [1, 4, None], ids=lambda s: f"splits-{s}")
@pytest.mark.parametrize("k_split", [True, False], ids=["k-split", "one-loop"])
def test_speculative_decode_bottom_right_causal(seed: int, kv_splits, k_split: bool) -> None:
    # q_len 16 at the end of 8192 keys (k_len = q_len + input_pos), and a ragged 8000.
    for k_len in (8192, 8000):
        check(
            seed,
            batch=2,
            heads=32,
            kv_heads=8,
            q_len=16,
            k_len=k_len,
            mask="causal",
            input_pos=k_len - 16,
            tile_n=128,
            kv_splits=kv_splits,
            pack_gqa=True,
            k_split=k_split,
        )


def test_splits_and_rows_that_see_no_key(seed: int) -> None:
    # input_pos -8: positions 0-7 see no key at all (zeros, LSE -inf); the first tiles' rows
    # see only the first key block, so most of their 8 splits read nothing.
    check(
        seed,
        batch=1,
        heads=8,
        kv_heads=2,
        q_len=16,
        k_len=1000,
        mask="causal",
        input_pos=-8,
        tile_n=64,
        kv_splits=8,
        pack_gqa=True,
    )
    # Causal prefill-like: a 64-row tile of positions 0-63 reads block 0 of 2; split 1 is empty.
    check(
        seed,
        batch=1,
        heads=8,
        kv_heads=2,
        q_len=128,
        k_len=128,
        mask="causal",
        input_pos=0,
        tile_m=64,
        tile_n=64,
        kv_splits=2,
        pack_gqa=True,
        fast_math=False,
    )


MAP_CASES = [
    # (q_len, k_len, mask, input_pos, knobs): packed q_len 1 over ragged keys at three split
    # counts and auto; speculative causal in both loop forms; unpacked heads; rows that see no
    # key, whose splits read nothing.
    (1, 4000, "none", 0, dict(pack_gqa=True, kv_splits=2)),
    (1, 4000, "none", 0, dict(pack_gqa=True, kv_splits=16)),
    (1, 4000, "none", 0, dict(pack_gqa=True, kv_splits=None)),
    (16, 8000, "causal", 7984, dict(pack_gqa=True, kv_splits=4)),
    (16, 8000, "causal", 7984, dict(pack_gqa=True, kv_splits=4, k_split=False)),
    (5, 3000, "causal", 2995, dict(pack_gqa=False, kv_splits=8)),
    (16, 1000, "causal", -8, dict(pack_gqa=True, kv_splits=8, tile_n=64)),
]


@pytest.mark.parametrize(
    ("q_len", "k_len", "mask", "input_pos", "knobs"),
    MAP_CASES,
    ids=[f"q{q}-k{k}-{m}-{sorted(kn.items())}" for q, k, m, _, kn in MAP_CASES],
)
def test_the_instrumented_split_map_equals_the_schedule(
    seed: int, q_len: int, k_len: int, mask: str, input_pos: int, knobs: dict
) -> None:
    """Which split read each key block, as the split kernel's own loops recorded it, against
    kernels.schedule's split map: every visited block read by exactly one split, the split
    whose range holds it."""
    from kernels import knobs as registry
    from kernels.cutile import blockmap
    from kernels.schedule import schedule_of

    values = {**registry.defaults(), "tile_n": 128, **knobs}
    got = blockmap.gpu_block_map(
        q_len, k_len, values["tile_m"], values["tile_n"], mask, input_pos,
        batch=2, heads=8, kv_heads=2, head_dim=128, dtype="bfloat16", lib="torch", seed=seed,
        **{k: v for k, v in knobs.items() if k != "tile_n"},
    )  # fmt: skip
    # The shape a schedule reads (kernels.schedule.ProblemShape); input_pos may be negative.
    problem = SimpleNamespace(
        batch=2, heads=8, kv_heads=2, q_len=q_len, k_len=k_len, input_pos=input_pos, group_size=4
    )
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    slots = sms * forms.decode_ctas_per_sm(values)
    want = schedule_of(values, problem, mask, None, slots)
    what = f"seed {seed} {knobs} q{q_len} k{k_len} {mask} pos {input_pos}"
    assert got.launch_order is None and got.split_map is not None
    assert np.array_equal(got.map, want.block_map), (what, got.map, want.block_map)
    assert np.array_equal(got.split_map, want.split_map), (what, got.split_map, want.split_map)
    # A split that reads blocks reads a contiguous run of them, in key order.
    for row in got.split_map:
        read = row[row >= 0]
        assert (np.diff(read) >= 0).all(), what
