"""The cuTile FMHA kernel against a float64 reference, and its block map against the schedule.

Problem sizes stay small (B=1, a few heads) because every distinct compile-time combination
costs a compile of a few seconds; the cases are a deterministic sample of the cross product
mask x GQA group x N x D x dtype x knobs that still covers every value of every knob and
every N. Outputs are poisoned with NaN before each launch, inputs are fresh random normals.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pytest.importorskip("cuda.tile")

from kernels.cutile import arrays, blockmap, forms, launch, selftest, tuner  # noqa: E402
from kernels.schedule import Schedule, block_map, visible  # noqa: E402
from tests.oracles import launched_order, program_order  # noqa: E402

REL_TOL = 1e-2


# --------------------------------------------------------------------------------------------
# Reference
# --------------------------------------------------------------------------------------------


def reference(q, k, v, scale, mask, input_pos, window):
    """float64 masked softmax attention on the GPU; rows that see no key give 0 and -inf."""
    group = q.shape[1] // k.shape[1]
    qd = q.double()
    kd = k.double().repeat_interleave(group, dim=1)
    vd = v.double().repeat_interleave(group, dim=1)
    seen = torch.from_numpy(visible(q.shape[2], k.shape[2], mask, input_pos, window)).to(q.device)
    s = (qd @ kd.transpose(-1, -2)) * scale
    s = s.masked_fill(~seen, -math.inf)
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # all -inf rows: NaN -> 0
    return p @ vd, lse, seen.any(dim=-1)


def rel_err(out, ref) -> float:
    num = torch.linalg.vector_norm(out.double() - ref).item()
    den = torch.linalg.vector_norm(ref).item()
    return num / den if den > 0 else num


# --------------------------------------------------------------------------------------------
# The sampled cases
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    mask: str
    q_len: int
    k_len: int
    input_pos: int
    window: int | None
    group: int
    head_dim: int
    dtype: str
    tile_m: int
    tile_n: int
    fast_math: bool
    k_split: bool
    remap: bool
    occupancy: int | None
    num_worker_warps: int | None
    pipeline: bool = False
    poly_exp2_cols: int = 0
    store_tma: bool = True
    num_ctas: int | None = None
    k_latency: int = 2
    v_latency: int = 4
    persistent: bool = False
    k_unroll: int = 1

    @property
    def id(self) -> str:
        w = f"w{self.window}" if self.window else ""
        return (
            f"{self.mask}{w}-ip{self.input_pos}-q{self.q_len}k{self.k_len}-g{self.group}"
            f"-d{self.head_dim}-{self.dtype[:2]}{self.dtype[-2:]}-{self.tile_m}x{self.tile_n}"
            f"-fm{int(self.fast_math)}ks{int(self.k_split)}rm{int(self.remap)}"
            f"-o{self.occupancy}w{self.num_worker_warps}{'-pipe' if self.pipeline else ''}"
            f"{f'-poly{self.poly_exp2_cols}' if self.poly_exp2_cols else ''}"
            f"{'' if self.store_tma else '-stg'}{f'-ctas{self.num_ctas}' if self.num_ctas else ''}"
            f"{'-pers' if self.persistent else ''}{'-u2' if self.k_unroll == 2 else ''}"
        )


NS = (1, 63, 64, 65, 1000, 4097)
# (mask, input_pos as a function of N, extra keys, window): chunked prefill has k_len > q_len.
MASKS = (
    ("none", 0, 0, None),
    ("causal", 0, 0, None),
    ("causal", 37, 37, None),  # input_pos > 0: the last q_len of q_len + 37 tokens
    ("window", 0, 0, 100),
    ("window", 19, 19, 1),  # the narrowest window: each row sees one key
)
TILES = (
    (64, 64),
    (128, 64),
    (64, 128),
    (128, 128),
    (256, 64),
    (256, 128),
    (64, 256),
    (128, 256),
    (256, 256),
)
GROUPS = (1, 4, 8)
HEAD_DIMS = (64, 128)
DTYPES = ("float16", "bfloat16")


def _hints(tile_m: int, tile_n: int, i: int) -> tuple[int | None, int | None]:
    # Large tiles spill without worker warps (see the offline register report); the small
    # ones alternate between no hint and occupancy 2, so both hint paths are launched.
    if tile_m * tile_n >= 128 * 128:
        return None, 8
    return (2 if i % 2 else None), None


def _cases() -> list[Case]:
    cases = []
    combos = list(itertools.product(NS, MASKS))
    for i, (n, (mask, ip, extra, window)) in enumerate(combos):
        tm, tn = TILES[i % len(TILES)]
        occ, nww = _hints(tm, tn, i)
        cases.append(
            Case(
                mask=mask,
                q_len=n,
                k_len=n + extra,
                input_pos=ip,
                window=window,
                group=GROUPS[i % 3],
                head_dim=HEAD_DIMS[(i // 3) % 2],
                dtype=DTYPES[(i // 2) % 2],
                tile_m=tm,
                tile_n=tn,
                fast_math=bool(i % 2),
                k_split=bool((i // 2) % 2) or i % 5 == 0,
                remap=bool((i // 4) % 2) or i % 7 == 0,
                occupancy=occ,
                num_worker_warps=nww,
                pipeline=i % 3 == 1,
                # exp2 of the last tile_n/8 or tile_n/4 score columns by polynomial
                poly_exp2_cols=(0, tn // 16, tn // 8, tn // 4)[(i + i // 4) % 4],
                store_tma=i % 4 != 1,  # or plain stores straight from registers
            )
        )
    # 2-CTA clusters (64 rows per CTA at occupancy 2, K/V multicast to both) under every mask,
    # at an even (1000) and an odd (4097) number of 128-row tiles; the polynomial exp2 and
    # plain stores on some, GQA and bf16 on others.
    for i, ((mask, ip, extra, window), n) in enumerate(itertools.product(MASKS, (1000, 4097))):
        cases.append(
            Case(mask, n, n + extra, ip, window, (1, 4)[i % 2], (128, 64)[(i // 2) % 2],
                 DTYPES[(i // 3) % 2], 128, 128, True, True, True, 2, None,
                 k_latency=3, v_latency=6, poly_exp2_cols=16 * (i % 3 == 2),
                 store_tma=i % 4 != 3, num_ctas=2)
        )  # fmt: skip
    # The persistent grid (mask none only) at every N, both loop forms, both dtypes and head
    # dims, ragged and whole key blocks; at N = 4097 with 8 heads there are more tiles than
    # program slots, so programs take several laps and prefetch the next tile's Q.
    for i, n in enumerate(NS):
        tm, tn, occ, nww = ((128, 128, None, 8), (64, 128, 2, None), (128, 64, None, 8))[i % 3]
        group = (8, 1, 4, 4, 1, 8)[i]
        cases.append(
            Case("none", n, n, 0, None, group, HEAD_DIMS[i % 2], DTYPES[(i // 2) % 2],
                 tm, tn, bool(i % 2 == 0), i != 3, True, occ, nww,
                 poly_exp2_cols=(tn // 8) * (i % 2), store_tma=i != 4, persistent=True)
        )  # fmt: skip
    # Whole key blocks at 4096: the Q prefetch path (K-split), two laps of 256 and 512 tiles;
    # and the one-loop form, which never prefetches.
    cases.append(
        Case("none", 4096, 4096, 0, None, 8, 128, "float16", 128, 128, True, True, True, None, 8,
             poly_exp2_cols=16, persistent=True)
    )  # fmt: skip
    cases.append(
        Case("none", 4096, 4096, 0, None, 8, 64, "bfloat16", 64, 128, False, False, True, 2, None,
             store_tma=False, persistent=True)
    )  # fmt: skip
    # Short tiles (8 key blocks) over two laps, the next Q prefetched.
    cases.append(
        Case("none", 4096, 1024, 0, None, 8, 128, "bfloat16", 128, 128, True, True, True, None, 8,
             poly_exp2_cols=16, persistent=True)
    )  # fmt: skip
    # Key blocks in pairs (k_unroll=2): paired at 4096 (32 blocks, two laps), and at 1024 keys
    # for 2048 ragged rows; an odd count (9 blocks) and a ragged last block fall back to the
    # one-block loop.
    for q_len, k_len, dtype, head_dim in (
        (4096, 4096, "float16", 128),
        (2000, 1024, "bfloat16", 64),
        (1152, 1152, "float16", 128),
        (1000, 1000, "bfloat16", 128),
    ):
        cases.append(
            Case("none", q_len, k_len, 0, None, 8, head_dim, dtype, 128, 128, True, True, True,
                 None, 8, poly_exp2_cols=16, persistent=True, k_unroll=2)
        )  # fmt: skip
    cases.append(
        Case("none", 4096, 2048, 0, None, 4, 128, "bfloat16", 64, 128, False, True, True, 2, None,
             store_tma=False, persistent=True, k_unroll=2)
    )  # fmt: skip
    # The causal persistent grid (aligned problems, tiles assigned by work on the host): 256
    # tiles over the SMs (programs take several), a chunked prefill with keys past the last
    # diagonal, a single tile, 64-row tiles in bf16 at head dim 64, plain stores, the
    # polynomial on the diagonal's masked scores. Unaligned problems with persistent=True run
    # one CTA per tile: a ragged q-block, an input_pos inside a block.
    for q_len, k_len, ip, group, head_dim, dtype, tile, poly, stg in (
        (4096, 4096, 0, 8, 128, "float16", 128, 16, True),
        (1024, 2100, 1024, 4, 128, "bfloat16", 128, 32, True),
        (128, 128, 0, 1, 128, "float16", 128, 0, False),
        (2048, 2048, 0, 4, 64, "bfloat16", 64, 8, True),
        (1024, 1088, 64, 8, 64, "float16", 64, 0, False),
        (1000, 1000, 0, 4, 128, "float16", 128, 16, True),
        (4097, 4134, 37, 1, 64, "bfloat16", 64, 8, True),
    ):
        hints = (None, 8) if tile == 128 else (2, None)
        cases.append(
            Case("causal", q_len, k_len, ip, None, group, head_dim, dtype, tile, tile,
                 q_len != 1024, ip == 0, True, *hints, poly_exp2_cols=poly, store_tma=stg,
                 persistent=True)
        )  # fmt: skip
    # Rows that see no key at all (input_pos < 0): they must come out as zeros, not NaN.
    cases.append(
        Case("causal", 65, 30, -40, None, 1, 64, "float16", 64, 64, True, True, True, 2, None)
    )
    cases.append(
        Case(
            "causal",
            200,
            150,
            -100,
            None,
            4,
            128,
            "bfloat16",
            64,
            128,
            False,
            False,
            False,
            None,
            None,
        )
    )
    return cases


CASES = _cases()


def planned(c: Case, **knobs: object) -> forms.KernelCall:
    """The plan of case ``c`` with its tiles and K-split and ``knobs`` (kernels.cutile.forms.plan,
    as the launch builds it): ``value(name)`` is what the kernel gets by that name."""
    config = launch.LaunchConfig(tile_m=c.tile_m, tile_n=c.tile_n, k_split=c.k_split, **knobs)
    p = forms.Problem(1, c.group, 1, c.q_len, c.k_len, c.head_dim, c.dtype)
    return forms.plan(
        p, config, scale=1.0, mask=c.mask, input_pos=c.input_pos, window=c.window,
        with_lse=False, with_map=False, sm_count=lambda: 132,
    )  # fmt: skip


def test_sample_covers_every_knob_and_n() -> None:
    for attr, values in (
        ("q_len", NS),
        ("group", GROUPS),
        ("head_dim", HEAD_DIMS),
        ("dtype", DTYPES),
        ("fast_math", (False, True)),
        ("k_split", (False, True)),
        ("remap", (False, True)),
        ("pipeline", (False, True)),
    ):
        assert {getattr(c, attr) for c in CASES} >= set(values), attr
    assert {(c.tile_m, c.tile_n) for c in CASES} >= set(TILES)
    assert {c.mask for c in CASES} == {"none", "causal", "window"}
    assert any(c.input_pos > 0 and c.mask == "causal" for c in CASES)
    assert {c.mask for c in CASES if c.pipeline and c.k_split} == {"none", "causal", "window"}
    poly = [c for c in CASES if c.poly_exp2_cols and c.k_split]
    assert {c.mask for c in poly} == {"none", "causal", "window"}
    assert {c.poly_exp2_cols * 16 // c.tile_n for c in poly} == {1, 2, 4}
    assert {c.dtype for c in poly} == set(DTYPES)
    plain_stores = [c for c in CASES if not c.store_tma]
    assert {c.mask for c in plain_stores} == {"none", "causal", "window"}
    assert {c.q_len for c in plain_stores} >= {1, 63, 65, 4097}  # ragged last q-blocks
    clusters = [c for c in CASES if c.num_ctas == 2]
    assert {c.mask for c in clusters} == {"none", "causal", "window"}
    assert {c.dtype for c in clusters} == set(DTYPES)
    assert {c.head_dim for c in clusters} == {64, 128}
    assert any(c.poly_exp2_cols for c in clusters) and not all(c.store_tma for c in clusters)
    persistent = [c for c in CASES if c.persistent and c.mask == "none"]
    assert {c.q_len for c in persistent} >= set(NS)
    assert {c.mask for c in CASES if c.persistent} == {"none", "causal"}
    assert any(c.q_len % c.tile_n == 0 and c.k_split and c.group == 8 for c in persistent)
    prefetching = [c for c in persistent if planned(c, persistent=True).value("Q_PREFETCH")]
    # Q comes in column halves of head_dim / 2: both head dims, and programs taking 2+ laps.
    assert {c.head_dim for c in prefetching} == {64, 128}
    assert any(c.q_len // c.tile_m * c.group > 132 for c in prefetching)
    assert {c.k_split for c in persistent} == {False, True}
    assert {c.dtype for c in persistent} == set(DTYPES)
    # Key blocks in pairs: run paired, and fallen back to one block (odd count, ragged).
    paired = {
        planned(c, persistent=True, k_unroll=2).value("PAIRED_K")
        for c in persistent
        if c.k_unroll == 2
    }
    assert paired == {False, True}
    # The causal persistent grid: run (several tiles a program, input_pos > 0, both dtypes,
    # head dims and tiles, the polynomial, plain stores) and fallen back to one CTA per tile.
    causal = [c for c in CASES if c.persistent and c.mask == "causal"]
    kernel_forms = {
        c: launch.LaunchConfig(tile_m=c.tile_m, tile_n=c.tile_n, persistent=True).kernel_form(
            "causal", c.q_len, c.k_len, c.input_pos
        )
        for c in causal
    }
    run = [c for c in causal if kernel_forms[c] == "causal-persistent"]
    assert {kernel_forms[c] for c in causal} == {"causal-persistent", "tile"}
    assert any(c.q_len // c.tile_m * c.group > 132 for c in run)
    assert any(c.input_pos > 0 and c.k_len > c.q_len + c.input_pos for c in run)
    assert {c.dtype for c in run} == set(DTYPES) and {c.head_dim for c in run} == {64, 128}
    assert {c.tile_m for c in run} == {64, 128} and not all(c.store_tma for c in run)
    assert any(c.poly_exp2_cols for c in run) and {c.k_split for c in run} == {False, True}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_matches_float64_reference(case: Case) -> None:
    kv_heads = 1
    heads = case.group * kv_heads
    q, k, v = arrays.random_qkv(
        1, heads, kv_heads, case.q_len, case.k_len, case.head_dim, case.dtype
    )
    scale = 1.0 / math.sqrt(case.head_dim)
    out = torch.full_like(q, math.nan)  # poisoned: every element must be written
    res, lse = launch.attention(
        q,
        k,
        v,
        scale=scale,
        mask=case.mask,
        input_pos=case.input_pos,
        window=case.window,
        tile_m=case.tile_m,
        tile_n=case.tile_n,
        fast_math=case.fast_math,
        k_split=case.k_split,
        remap=case.remap,
        occupancy=case.occupancy,
        num_worker_warps=case.num_worker_warps,
        pipeline=case.pipeline,
        poly_exp2_cols=case.poly_exp2_cols,
        store_tma=case.store_tma,
        num_ctas=case.num_ctas,
        k_latency=case.k_latency,
        v_latency=case.v_latency,
        persistent=case.persistent,
        k_unroll=case.k_unroll,
        return_lse=True,
        out=out,
    )
    torch.cuda.synchronize()
    assert res is out
    assert res.dtype == q.dtype
    assert not torch.isnan(res).any(), "unwritten or NaN output"
    ref, ref_lse, seen_any = reference(q, k, v, scale, case.mask, case.input_pos, case.window)
    err = rel_err(res, ref)
    assert err <= REL_TOL, f"rel err {err:.3e}"
    # Rows that see no key: exact zeros and -inf LSE.
    blind = ~seen_any
    if blind.any():
        assert (res[:, :, blind] == 0).all()
        assert torch.isneginf(lse[:, :, blind]).all()
    # Natural-log LSE where defined.
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), finite)
    lerr = (lse[finite].double() - ref_lse[finite]).abs().max().item() if finite.any() else 0.0
    assert lerr <= 2e-2, f"lse abs err {lerr:.3e}"


# The optimization ladder's large-tile steps run without compiler hints (the spill trap is what
# they show), causal, with and without the K-loop split. The single-loop form hung on the H200
# for 256x128 and 64x256 while it carried one whole block step per branch; regression check.
LADDER_LARGE = [(256, 128, False, False), (256, 128, False, True), (256, 128, True, True),
                (64, 256, False, False)]  # fmt: skip


@pytest.mark.parametrize(
    ("tile_m", "tile_n", "k_split", "fast_math"),
    LADDER_LARGE,
    ids=[f"{m}x{n}-ks{int(ks)}-fm{int(fm)}" for m, n, ks, fm in LADDER_LARGE],
)
def test_large_tiles_without_hints_finish(
    tile_m: int, tile_n: int, k_split: bool, fast_math: bool
) -> None:
    q, k, v = arrays.random_qkv(2, 4, 4, 1024, 1024, 128, "float16", seed=11 + tile_m + k_split)
    out = torch.full_like(q, math.nan)
    launch.attention(
        q, k, v, mask="causal", tile_m=tile_m, tile_n=tile_n, k_split=k_split,
        fast_math=fast_math, remap=False, out=out,
    )  # fmt: skip
    torch.cuda.synchronize()
    ref, _, _ = reference(q, k, v, 1.0 / math.sqrt(128), "causal", 0, None)
    assert rel_err(out, ref) <= REL_TOL


def test_lse_is_natural_log() -> None:
    q, k, v = arrays.random_qkv(1, 2, 2, 70, 70, 64, seed=1)
    _, lse = launch.attention(q, k, v, return_lse=True, fast_math=False)
    s = (q.double() @ k.double().transpose(-1, -2)) / 8.0
    torch.testing.assert_close(lse.double(), torch.logsumexp(s, -1), atol=1e-3, rtol=1e-4)


def test_cupy_arrays() -> None:
    cupy = pytest.importorskip("cupy")
    q, k, v = arrays.random_qkv(1, 4, 2, 129, 129, 64, lib="cupy", seed=3)
    out = launch.attention(q, k, v, mask="causal")
    assert isinstance(out, cupy.ndarray) and out.dtype == np.float16
    tq, tk, tv = (torch.from_dlpack(x) for x in (q, k, v))
    ref, _, _ = reference(tq, tk, tv, 1 / 8.0, "causal", 0, None)
    assert rel_err(torch.from_dlpack(out), ref) <= REL_TOL


def test_stream_and_repeat_are_stable() -> None:
    # Same inputs twice on a side stream: bitwise identical (a moving result means a race).
    q, k, v = arrays.random_qkv(1, 8, 2, 300, 300, 128, seed=4)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        a = launch.attention(q, k, v, mask="causal", stream=s)
        b = launch.attention(q, k, v, mask="causal", stream=s)
    s.synchronize()
    assert torch.equal(a, b)


# --------------------------------------------------------------------------------------------
# Block map: the kernel's own loops against kernels.schedule
# --------------------------------------------------------------------------------------------

# Shapes grouped so the JIT's shape specialisation (multiple of 16 or not) stays at two
# patterns: every (q_len, k_len) below is either both ragged or both multiples of 16.
MAP_SHAPES = {
    "none": [
        (1, 1, 0, None),
        (63, 63, 0, None),
        (65, 201, 0, None),
        (1000, 1000, 0, None),
        (64, 64, 0, None),
        (256, 128, 0, None),
        (4096, 4096, 0, None),
    ],
    "causal": [
        (1, 1, 0, None),
        (63, 63, 0, None),
        (65, 65, 0, None),
        (100, 301, 201, None),
        (301, 99, -202, None),
        (1000, 1000, 0, None),
        (517, 777, 260, None),
        (64, 64, 0, None),
        (128, 512, 384, None),
        (512, 128, -384, None),
        (1024, 1024, 0, None),
        (1024, 1024, 17, None),
    ],
    "window": [
        (1, 1, 0, 1),
        (63, 63, 0, 1),
        (65, 65, 0, 50),
        (1000, 1000, 0, 200),
        (517, 777, 260, 129),
        (301, 301, 0, 1000),
        (64, 64, 0, 64),
        (1024, 1024, 0, 200),
        (512, 1024, 512, 64),
        (1024, 1024, 0, 1),
    ],
}
# Every tile size on each axis and both loop structures, per mask (each entry is a compile).
# 128x128 runs as a 2-CTA cluster (64 rows per CTA, occupancy 2).
MAP_TILES = ((64, 64, True), (64, 64, False), (128, 64, True), (64, 256, False), (256, 128, True),
             (128, 128, True))  # fmt: skip
MAP_CONFIGS = [
    (mask, tm, tn, ks) for mask in ("none", "causal", "window") for tm, tn, ks in MAP_TILES
]


@pytest.mark.parametrize(
    ("mask", "tile_m", "tile_n", "k_split"),
    MAP_CONFIGS,
    ids=[f"{m}-{a}x{b}-ks{int(k)}" for m, a, b, k in MAP_CONFIGS],
)
def test_block_map_equals_schedule(mask: str, tile_m: int, tile_n: int, k_split: bool) -> None:
    for q_len, k_len, ip, window in MAP_SHAPES[mask]:
        got = blockmap.gpu_block_map(
            q_len,
            k_len,
            tile_m,
            tile_n,
            mask,
            ip,
            window,
            heads=2,
            k_split=k_split,
            remap=bool(q_len % 2),
            pipeline=(tile_m, tile_n) == (128, 64),  # the pipelined unmasked loop, K-split on
            store_tma=(tile_m, tile_n) != (64, 256),  # plain stores, one loop
            **({"num_ctas": 2, "occupancy": 2} if (tile_m, tile_n) == (128, 128) else {}),
        )
        want = block_map(q_len, k_len, tile_m, tile_n, mask, ip, window)
        assert got.map.shape == want.shape
        assert np.array_equal(got.map, want), (q_len, k_len, ip, window, got.map, want)
        # Every (q-block, batch·head) ran exactly once.
        assert sorted(got.launch_order.ravel().tolist()) == list(range(got.launch_order.size))


PERSISTENT_MAP_TILES = (
    (128, 128, True, {"num_worker_warps": 8}),
    (64, 64, False, {}),
    (128, 128, True, {"num_worker_warps": 8, "k_unroll": 2}),  # pairs at 4096, else one
)


@pytest.mark.parametrize(
    ("tile_m", "tile_n", "k_split", "hints"),
    PERSISTENT_MAP_TILES,
    ids=[f"{m}x{n}-ks{int(k)}-u{h.get('k_unroll', 1)}" for m, n, k, h in PERSISTENT_MAP_TILES],
)
def test_persistent_block_map_equals_schedule(
    tile_m: int, tile_n: int, k_split: bool, hints: dict
) -> None:
    # Batch 3, 2 heads: at 4096 rows of 64 there are 384 tiles, more than the program slots,
    # so programs loop; each tile must still be computed exactly once, in the plain order.
    for q_len, k_len, _, _ in MAP_SHAPES["none"]:
        got = blockmap.gpu_block_map(
            q_len, k_len, tile_m, tile_n, "none", batch=3, heads=2, k_split=k_split,
            persistent=True, **hints,
        )  # fmt: skip
        want = block_map(q_len, k_len, tile_m, tile_n, "none", 0, None)
        assert np.array_equal(got.map, want), (q_len, k_len, got.map, want)
        assert (got.per_head <= 2).all()  # no block visited twice
        plain = Schedule(q_len, k_len, tile_m, tile_n, "none")
        assert launched_order(got) == program_order(plain, 6, remap=False)


@pytest.mark.parametrize(
    ("q_len", "k_len", "input_pos", "tile", "hints"),
    [
        (4096, 4096, 0, 128, {"num_worker_warps": 8, "poly_exp2_cols": 16}),
        (1024, 2100, 1024, 64, {"occupancy": 2}),
        (64, 64, 0, 64, {}),
    ],
    ids=["4096-128-ww8", "prefill-64-occ2", "one-tile"],
)
def test_causal_persistent_block_map_and_order(
    q_len: int, k_len: int, input_pos: int, tile: int, hints: dict
) -> None:
    # Batch 3, 2 heads: every tile computed once, the unmasked blocks and the one diagonal
    # block as the schedule says, and each program ran the tiles the host assigned it, in
    # that order (the kernel records lap * programs + program for each tile).
    got = blockmap.gpu_block_map(
        q_len, k_len, tile, tile, "causal", input_pos, batch=3, heads=2, persistent=True,
        **hints,
    )  # fmt: skip
    want = block_map(q_len, k_len, tile, tile, "causal", input_pos, None)
    assert np.array_equal(got.map, want), (got.map, want)
    assert (got.per_head <= 2).all()  # no block visited twice
    n_q = q_len // tile
    programs = min(6 * n_q, arrays.sm_count(0, "torch") * (hints.get("occupancy") or 1))
    group = forms.l2_group_size(6, k_len, 64, 2, 1)
    table = forms.causal_tile_table(6, n_q, programs, group, input_pos // tile)
    expected = np.full((6, n_q), -1)
    for p, row in enumerate(table):
        for i, code in enumerate(row[1 : 1 + row[0]]):
            expected[code // n_q, code % n_q] = i * programs + p
    assert np.array_equal(got.launch_order, expected)


@pytest.mark.parametrize("mask", ["none", "causal"])
@pytest.mark.parametrize("remap", [False, True])
def test_program_order_matches_schedule(mask: str, remap: bool) -> None:
    # Small K/V: the whole batch·head range is one L2 group, which is the order the schedule
    # describes (heaviest q-blocks first, then every batch·head of that q-block).
    got = blockmap.gpu_block_map(700, 700, 64, 64, mask, batch=2, heads=2, remap=remap)
    want = program_order(Schedule(700, 700, 64, 64, mask), 4, remap=remap)
    assert launched_order(got) == want


def test_remap_groups_batch_heads_for_l2() -> None:
    assert forms.l2_group_size(128, 16384, 128, 2, 1) == 2  # 8 MB of K/V per head
    assert forms.l2_group_size(128, 1024, 128, 2, 1) == 32
    assert forms.l2_group_size(128, 16384, 128, 2, 8) == 16  # GQA: 8 heads share one K/V
    assert forms.l2_group_size(3, 64, 64, 2, 1) == 2


# --------------------------------------------------------------------------------------------
# Host wrapper: validation and the tuner
# --------------------------------------------------------------------------------------------


def test_validation_messages() -> None:
    q, k, v = arrays.random_qkv(1, 4, 2, 64, 64, 64, seed=5)
    with pytest.raises(ValueError, match="rank 4"):
        launch.attention(q[0], k, v)
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        launch.attention(q.float(), k, v)
    with pytest.raises(ValueError, match="CUDA device"):
        launch.attention(q.cpu(), k.cpu(), v.cpu())
    with pytest.raises(ValueError, match="multiple of k/v heads"):
        launch.attention(q[:, :3].contiguous(), k, v)
    with pytest.raises(ValueError, match="head dim"):
        launch.attention(q, k[..., :32].contiguous(), v[..., :32].contiguous())
    with pytest.raises(ValueError, match="head dim must be a multiple of 8 from 32 to 256, got 44"):
        launch.attention(
            q[..., :44].contiguous(), k[..., :44].contiguous(), v[..., :44].contiguous()
        )
    with pytest.raises(ValueError, match=r"q cannot be read in place: its last \(head-dim\)"):
        launch.attention(q.transpose(2, 3), k, v)
    with pytest.raises(ValueError, match="mask"):
        launch.attention(q, k, v, mask="diagonal")
    with pytest.raises(ValueError, match="window"):
        launch.attention(q, k, v, mask="window")
    with pytest.raises(ValueError, match="tile_m"):
        launch.attention(q, k, v, tile_m=32)
    with pytest.raises(ValueError, match="num_worker_warps"):
        launch.attention(q, k, v, num_worker_warps=16)
    with pytest.raises(ValueError, match=r"persistent grid is for mask none or causal"):
        launch.attention(q, k, v, mask="window", window=8, persistent=True)
    with pytest.raises(ValueError, match="out must"):
        launch.attention(q, k, v, out=torch.empty_like(q[:, :1]))


def test_empty_keys_give_zeros() -> None:
    q, k, v = arrays.random_qkv(1, 2, 2, 10, 0, 64, seed=6)
    out, lse = launch.attention(q, k, v, return_lse=True)
    assert (out == 0).all() and torch.isneginf(lse).all()


def test_probe_reports_available() -> None:
    res = selftest.probe()
    assert res.available, res.message
    assert res.arch and res.arch.startswith("sm_")
    assert res.cuda_tile_version and res.tileiras_version


def test_autotune_caches_winner(tmp_path) -> None:
    q, k, v = arrays.random_qkv(1, 8, 2, 512, 512, 64, seed=7)
    path = tmp_path / "autotune.json"
    space = [
        {"tile_m": 64, "tile_n": 64, "occupancy": 2},
        {"tile_m": 128, "tile_n": 64, "num_worker_warps": 8},
    ]
    first = tuner.autotune(q, k, v, mask="causal", configs=space, cache_path=path)
    assert first["_tuning"]["cached"] is False
    assert (first["tile_m"], first["tile_n"]) in {(64, 64), (128, 64)}
    assert path.exists()
    second = tuner.autotune(q, k, v, mask="causal", configs=space, cache_path=path)
    assert second["_tuning"]["cached"] is True
    assert tuner.tuned_kwargs(second) == tuner.tuned_kwargs(first)
    out = launch.attention(q, k, v, mask="causal", **tuner.tuned_kwargs(second))
    ref, _, _ = reference(q, k, v, 1 / 8.0, "causal", 0, None)
    assert rel_err(out, ref) <= REL_TOL
    # A different search space (a new release's table) is searched again, not answered from
    # the cache entry of the old one.
    wider = [*space, {"tile_m": 64, "tile_n": 128, "occupancy": 2, "poly_exp2_cols": 16}]
    third = tuner.autotune(q, k, v, mask="causal", configs=wider, cache_path=path)
    assert third["_tuning"]["cached"] is False
    assert third["_tuning"]["tried"] == 3


@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_autotune_retimes_front_runners_from_graph_replays(tmp_path, lib) -> None:
    if lib == "cupy":
        pytest.importorskip("cupy")
    # Large enough (about half a millisecond) for the sustained second stage to run; both
    # array libraries, since each captures its CUDA graphs its own way.
    q, k, v = arrays.random_qkv(2, 16, 16, 4096, 4096, 128, lib=lib, seed=11)
    space = [
        {"tile_m": 64, "tile_n": 128, "occupancy": 2},
        {"tile_m": 128, "tile_n": 128, "num_worker_warps": 8, "poly_exp2_cols": 16},
        {"tile_m": 128, "tile_n": 128, "num_ctas": 2, "occupancy": 2, "k_latency": 3,
         "v_latency": 6},
        # The persistent grid is another kernel: the search must pick it per config.
        {"tile_m": 128, "tile_n": 128, "num_worker_warps": 8, "poly_exp2_cols": 16,
         "persistent": True},
        # Key blocks in pairs: a grid form of its own, so the second stage times it too.
        {"tile_m": 128, "tile_n": 128, "num_worker_warps": 8, "poly_exp2_cols": 16,
         "persistent": True, "k_unroll": 2},
    ]  # fmt: skip
    got = tuner.autotune(q, k, v, configs=space, cache_path=tmp_path / "autotune.json")
    tuning = got["_tuning"]
    assert tuning["mean_us"] >= tuner.SUSTAINED_MIN_US
    assert tuning["failed"] == []
    times = tuning["sustained_us"]
    assert len(times) == 5 and all(t > 0 for t in times.values())
    assert any(json.loads(key)["persistent"] for key in times)
    assert any(json.loads(key)["k_unroll"] == 2 for key in times)
    # The winner is the fastest of the second stage, whatever the first stage preferred.
    # (The second stage's table names the decode knobs too: one key form for every problem.)
    shown = (*tuner.TUNED_KEYS, *tuner.DECODE_SEARCHED)
    chosen = json.dumps({kk: got[kk] for kk in shown}, sort_keys=True)
    assert times[chosen] == min(times.values())
    assert set(tuning["search_best"]) == set(tuner.TUNED_KEYS)
    out = launch.attention(q, k, v, **tuner.tuned_kwargs(got))
    if lib == "cupy":
        q, k, v, out = (torch.from_dlpack(x) for x in (q, k, v, out))
    ref, _, _ = reference(q[:, :2], k[:, :2], v[:, :2], 128**-0.5, "none", 0, None)
    assert rel_err(out[:, :2], ref) <= REL_TOL
