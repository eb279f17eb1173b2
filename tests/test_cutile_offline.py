"""CPU-only checks of the cuTile FMHA module: it compiles for sm_90 without a GPU.

``export_kernel`` runs the cuTile front end and tileiras, so compile errors, and the
register/spill picture, show up here before any GPU time is spent. Skips cleanly when
cuda.tile or tileiras is not installed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

ct = pytest.importorskip("cuda.tile")

from kernels import cutile_fmha as F  # noqa: E402
from kernels.cutile import forms, tuner  # noqa: E402
from kernels.cutile.compile import offline_plan  # noqa: E402


def _need_tileiras() -> None:
    if F.tileiras_version() is None:
        pytest.skip("tileiras is not installed")


def _is_elf(blob: bytes) -> bool:
    return blob[:4] == b"\x7fELF"


# The shipped persistent entry's tile and hints, with LSE and the block map.
PERSISTENT_128 = dict(
    mask="none",
    tile_m=128,
    tile_n=128,
    num_worker_warps=8,
    poly_exp2_cols=16,
    persistent=True,
    with_lse=True,
    with_map=True,
)


# Every form compiled; the first (the production default) in the default suite, the rest in
# the slow tier with the other compiles of every form (tests/conftest.py, COMPILER_TIER).
SM90_FORMS = [
    # The production default path: causal, k-split, fast math, 64x64 at occupancy 2.
    dict(mask="causal", tile_m=64, tile_n=64, occupancy=2, head_dim=128),
    # One loop with a per-block branch, window mask, bf16, exact math, LSE + block map.
    dict(
        mask="window",
        tile_m=128,
        tile_n=64,
        k_split=False,
        fast_math=False,
        dtype="bfloat16",
        head_dim=64,
        with_lse=True,
        with_map=True,
        q_len=1000,
        num_worker_warps=8,
    ),
    # The polynomial exp2 on a quarter of the unmasked columns.
    dict(mask="none", tile_m=64, tile_n=128, occupancy=2, head_dim=128, poly_exp2_cols=32),
    # The persistent grid: a ragged last key block (EVEN_K false), LSE and block map.
    dict(PERSISTENT_128, q_len=1000),
    dict(
        mask="none",
        tile_m=64,
        tile_n=128,
        occupancy=2,
        persistent=True,
        k_split=False,
        store_tma=False,
        dtype="bfloat16",
        head_dim=64,
    ),
    # The smallest head dim: the persistent grid fetches Q in column halves of 8 values
    # (16 bytes, TMA's smallest row), here with the next tile's Q prefetched.
    dict(mask="none", tile_m=64, tile_n=64, persistent=True, q_len=256, head_dim=16),
    # Key blocks in pairs (two K and two V buffers), with LSE and the block map.
    dict(PERSISTENT_128, k_unroll=2, q_len=1024),
    # The causal persistent grid (its tile assignment as an extra array), LSE and map.
    dict(PERSISTENT_128, mask="causal", q_len=2048),
    dict(mask="causal", tile_m=64, tile_n=64, persistent=True, dtype="bfloat16", head_dim=64),
    # Decode: packed GQA heads, the key range split 16 ways (q_len 1, 32k keys).
    dict(
        mask="none",
        q_len=1,
        k_len=32768,
        tile_n=128,
        dtype="bfloat16",
        kv_splits=16,
        pack_gqa=True,
    ),
    # Head dims that are not powers of two: Phi-3's 96 in the decode form with 16 splits
    # (a padded 128 tile, every K/V load checked), StableLM's 80 in the persistent grid
    # (64 + 16 column chunks).
    dict(
        mask="none",
        q_len=1,
        k_len=32768,
        tile_n=128,
        head_dim=96,
        kv_splits=16,
        pack_gqa=True,
        dtype="bfloat16",
    ),
    dict(PERSISTENT_128, head_dim=80, q_len=1000),
    # Speculative decode, bottom-right causal, ragged keys, LSE, 4 splits, D 64.
    dict(
        mask="causal",
        q_len=16,
        k_len=1000,
        input_pos=984,
        tile_n=64,
        head_dim=64,
        kv_splits=4,
        pack_gqa=True,
        with_lse=True,
    ),
    # Unpacked heads, one loop with a per-block branch, exact math, the LSE, no split.
    dict(
        mask="causal",
        q_len=4,
        k_len=4100,
        input_pos=4096,
        tile_n=64,
        k_split=False,
        fast_math=False,
        dtype="bfloat16",
        kv_splits=1,
        pack_gqa=True,
        with_lse=True,
    ),
]
SM90_IDS = [
    "causal-64x64-occ2",
    "window-128x64-nosplit-bf16-lse-map",
    "none-64x128-poly32",
    "none-persistent-128x128-ww8-ragged-lse-map",
    "none-persistent-64x128-occ2-nosplit",
    "none-persistent-64x64-d16-prefetch",
    "none-persistent-128x128-pairs-lse-map",
    "causal-persistent-128x128-ww8-lse-map",
    "causal-persistent-64x64-bf16-d64",
    "decode-packed-split16-bf16",
    "decode-packed-split16-bf16-d96-padded",
    "none-persistent-128x128-ww8-d80-chunked",
    "decode-packed-causal-ragged-split4-lse-d64",
    "decode-packed-onesplit-nosplit-loop-exact-lse",
]


@pytest.mark.parametrize(
    "knobs",
    [
        pytest.param(knobs, id=name, marks=() if i == 0 else pytest.mark.slow)
        for i, (knobs, name) in enumerate(zip(SM90_FORMS, SM90_IDS, strict=True))
    ],
)
def test_compiles_for_sm90(knobs: dict) -> None:
    _need_tileiras()
    cubin = F.compile_cubin(arch="sm_90", batch=1, heads=4, kv_heads=2, **knobs)
    assert _is_elf(cubin)
    assert len(cubin) > 10_000


@pytest.mark.parametrize(
    "knobs",
    [
        dict(dtype="bfloat16", head_dim=128, q_len=1, k_len=32768, kv_splits=16, pack_gqa=True),
        dict(dtype="float16", head_dim=64, q_len=16, k_len=8192, kv_splits=2, with_lse=True),
    ],
    ids=["bf16-d128-packed", "fp16-d64-unpacked-lse"],
)
def test_the_decode_kernels_compile_without_spilling(knobs: dict) -> None:
    # The split kernel and the combine that merges its splits, as one decode launch runs them.
    from kernels.cubin_resources import cuobjdump_path, read_resources

    _need_tileiras()
    problem = dict(arch="sm_90", batch=1, heads=32, kv_heads=8, mask="none", tile_n=128)
    split = F.compile_cubin(**problem, **knobs)
    combine = F.compile_cubin(**problem, combine=True, **knobs)
    assert _is_elf(split) and _is_elf(combine) and split != combine
    if cuobjdump_path() is not None:
        for cubin in (split, combine):
            assert read_resources(cubin).stack == 0  # no local memory: nothing spilled
        # Several combine CTAs an SM: with one (255 registers) q_len 16's combine ran in waves;
        # without the LSE to write, 8 (0.6-1.6 µs less at q_len 16 on the H200).
        used = read_resources(combine)
        wanted = 4 if knobs.get("with_lse") else 8
        assert 65536 // (used.registers * used.threads) >= wanted, used
    with pytest.raises(ValueError, match="has no combine kernel"):
        F.compile_cubin(**{**problem, **knobs, "kv_splits": 1}, combine=True)


def test_the_workbench_cluster_knob_reaches_the_kernel() -> None:
    # The cuTile backend's launch arguments for a form/CLI config with Cluster CTAs 2: the
    # kernel's own config must see the hint, and the H200's 2-CTA cluster config must compile.
    from workbench.backends.cutile import CutileBackend, _knobs
    from workbench.config import KernelConfig, Problem

    config = KernelConfig(
        tile_m=128, tile_n=128, mask="causal", fast_math=True, k_split=True, remap=True,
        occupancy=2, num_ctas=2,
    )  # fmt: skip
    problem = Problem(heads=4, kv_heads=2, head_dim=128)
    knobs = _knobs(CutileBackend()._launch_kwargs(problem, config, ()))
    launch = F.LaunchConfig.of(knobs)
    assert (launch.tile_m, launch.occupancy, launch.num_ctas) == (128, 2, 2)
    _need_tileiras()
    cubin = F.compile_cubin(arch="sm_90", batch=1, heads=4, kv_heads=2, mask="causal", **knobs)
    assert _is_elf(cubin)


def test_the_workbench_persistent_knob_reaches_the_kernel() -> None:
    # The form's "Persistent grid" box and its key blocks in pairs: the kernel's config must
    # see both and it must compile.
    from workbench.backends.cutile import CutileBackend, _knobs
    from workbench.config import KernelConfig, Problem

    config = KernelConfig(
        tile_m=128, tile_n=128, fast_math=True, k_split=True, num_worker_warps=8,
        poly_exp2_cols=16, persistent=True, k_unroll=2,
    )  # fmt: skip
    problem = Problem(heads=4, kv_heads=2, head_dim=128)
    knobs = _knobs(CutileBackend()._launch_kwargs(problem, config, ()))
    launch = F.LaunchConfig.of(knobs)
    assert (launch.persistent, launch.k_unroll) == (True, 2)
    _need_tileiras()
    cubin = F.compile_cubin(arch="sm_90", batch=1, heads=4, kv_heads=2, mask="none", **knobs)
    assert _is_elf(cubin)


@pytest.mark.parametrize(
    ("knobs", "slices", "row_blocks"),
    [
        (dict(pack_gqa=True, kv_splits=4), 2 * 2, 1),  # 4 heads · 16 rows in one 64-row tile
        (dict(pack_gqa=False, kv_splits=8), 2 * 8, 1),  # one head a tile, 16 rows
        (dict(pack_gqa=True, kv_splits=None), 2 * 2, 1),  # auto on the offline SM count
    ],
)
def test_the_decode_forms_instrumented_launch_maps_each_key_block_to_its_split(
    knobs: dict, slices: int, row_blocks: int
) -> None:
    """The split kernel records what it read per (slice, row block, key block): BlockMap (the
    code) and Order (the split) share that shape, padded; without the map both are dummies.
    It compiles for sm_90 with the map on."""
    common = dict(
        dtype="bfloat16", head_dim=128, q_len=16, k_len=4000, heads=8, kv_heads=2, batch=2,
        mask="causal", input_pos=3984, tile_n=128, **knobs,
    )  # fmt: skip
    plan, _ = offline_plan(with_map=True, **common)
    assert plan.form == "decode"
    blocks = forms.block_map_shape(slices, row_blocks, -(-4000 // 128))
    assert plan.values["BlockMap"].shape == blocks and plan.values["Order"].shape == blocks
    assert plan.values["SWITCHES"][-1] is True  # WITH_MAP, the last of the decode switches
    plain, _ = offline_plan(with_map=False, **common)
    assert plain.values["BlockMap"].shape == plain.values["Order"].shape == (1, 1, 1)
    _need_tileiras()
    assert _is_elf(F.compile_cubin(arch="sm_90", with_map=True, **common))


def test_the_decode_forms_block_map_refuses_a_window_before_touching_a_gpu() -> None:
    with pytest.raises(ValueError, match="the decode form has no window mask"):
        F.gpu_block_map(16, 4096, 64, 128, "window", 0, 256, kv_splits=4)


def test_validation_runs_before_compiling() -> None:
    with pytest.raises(ValueError, match="tile_m"):
        F.compile_cubin(tile_m=32)
    with pytest.raises(ValueError, match="num_worker_warps"):
        F.compile_cubin(num_worker_warps=16)
    # A misspelt knob is named, with the list of real ones, instead of being ignored.
    with pytest.raises(ValueError, match=r"unknown knob\(s\) \['tile_k'\].*'tile_n'"):
        F.compile_cubin(tile_k=64)
    # The polynomial columns must split tile_n into power-of-two parts.
    with pytest.raises(ValueError, match=r"poly_exp2_cols=24.*one of 0, 4, 8, 16, 32 with tile_n"):
        F.compile_cubin(tile_n=64, poly_exp2_cols=24)
    # The persistent grid has no window kernel, takes causal key blocks one at a time, and
    # is neither a cluster launch nor hand-pipelined.
    # (The registry's words, as the workbench's: kernels.knobs.RULES.)
    with pytest.raises(ValueError, match=r"^persistent=True.*mask none or causal \(got window\)"):
        F.compile_cubin(mask="window", persistent=True)
    with pytest.raises(ValueError, match=r"^k_unroll=2.*mask none only \(got causal\)"):
        F.compile_cubin(mask="causal", persistent=True, k_unroll=2, tile_m=128, tile_n=128)
    with pytest.raises(ValueError, match="persistent grid does not run as clusters"):
        F.compile_cubin(mask="none", persistent=True, num_ctas=2, occupancy=2)
    with pytest.raises(ValueError, match="persistent grid has no software pipeline"):
        F.compile_cubin(mask="none", persistent=True, pipeline=True)
    # Wrong results on the H200: the polynomial in 2-CTA clusters over 8 worker warps.
    with pytest.raises(ValueError, match=r"^poly_exp2_cols=16.*computes wrong results"):
        F.compile_cubin(tile_m=128, tile_n=128, num_ctas=2, num_worker_warps=8, poly_exp2_cols=16)
    # Key blocks in pairs: 1 or 2 (not a bool), and for the persistent grid only.
    for bad in (3, 0):
        with pytest.raises(ValueError, match=r"^k_unroll=.*expected one of 1, 2"):
            F.compile_cubin(mask="none", persistent=True, k_unroll=bad)
    with pytest.raises(ValueError, match=r"^k_unroll=True.*expected a whole number"):
        F.compile_cubin(mask="none", persistent=True, k_unroll=True)
    with pytest.raises(ValueError, match="pairs are for the persistent grid only"):
        F.compile_cubin(mask="none", k_unroll=2)


def planned(config: F.LaunchConfig, mask: str, k_len: int, **problem: int) -> forms.KernelCall:
    """The plan of a launch of ``config``: the values it gives its kernel (``value(name)``)."""
    q_len = problem.pop("q_len", k_len)
    p = forms.Problem(1, 4, 2, q_len, k_len, 128, "float16")
    return forms.plan(
        p, config, scale=0.125, mask=mask, window=None, with_lse=False, with_map=False,
        sm_count=lambda: 132, input_pos=problem.pop("input_pos", 0),
    )  # fmt: skip


def prefetch_constants(config: F.LaunchConfig, k_len: int) -> tuple[bool, ...] | None:
    plan = planned(config, "none", k_len)
    if plan.form != "persistent":
        return None  # only the mask-free persistent grid declares them
    return tuple(plan.value(name) for name in ("EVEN_K", "Q_PREFETCH", "PAIRED_K"))


def test_the_q_prefetch_is_compiled_in_only_for_whole_key_blocks_and_the_k_split() -> None:
    # tileiras 13.4 got the carried Q wrong beside a masked key block on the H200: the
    # persistent kernel's (EVEN_K, Q_PREFETCH) constants must keep the prefetch out of any
    # launch with a ragged last key block or without the K-split.
    grid = F.LaunchConfig(tile_m=128, tile_n=128, persistent=True)
    assert prefetch_constants(grid, 4096) == (True, True, False)
    assert prefetch_constants(grid, 1024) == (True, True, False)
    assert prefetch_constants(grid, 4097) == (False, False, False)
    assert prefetch_constants(grid, 100) == (False, False, False)
    no_split = F.LaunchConfig(tile_m=128, tile_n=64, k_split=False, persistent=True)
    assert prefetch_constants(no_split, 4096) == (True, False, False)
    # Key blocks in pairs (PAIRED_K) only where the prefetch is on and the blocks pair up:
    # an odd count or a ragged last block runs the one-block loop.
    pairs = F.LaunchConfig(tile_m=128, tile_n=128, persistent=True, k_unroll=2)
    assert prefetch_constants(pairs, 4096) == (True, True, True)
    assert prefetch_constants(pairs, 256) == (True, True, True)
    assert prefetch_constants(pairs, 1152) == (True, True, False)  # 9 blocks
    assert prefetch_constants(pairs, 128) == (True, True, False)  # 1 block
    assert prefetch_constants(pairs, 4097) == (False, False, False)
    no_split_pairs = F.LaunchConfig(tile_n=64, k_split=False, persistent=True, k_unroll=2)
    assert prefetch_constants(no_split_pairs, 4096) == (True, False, False)
    # One CTA per tile has none of them.
    assert prefetch_constants(F.LaunchConfig(tile_m=128, tile_n=128), 4097) is None


def test_exp2_polynomial_is_below_fp16_resolution() -> None:
    # P is rounded to fp16 (relative half-ulp 4.9e-4) before P·V, so the polynomial that
    # replaces part of the exp2s must stay well below that on its range [-1/2, 1/2].
    f = np.linspace(-0.5, 0.5, 100_001)
    coeffs = (F.EXP2_C0, F.EXP2_C1, F.EXP2_C2, F.EXP2_C3)
    approx = sum(c * f**i for i, c in enumerate(coeffs))
    assert np.max(np.abs(approx / np.exp2(f) - 1.0)) < 1e-4
    # 1.5·2**23 is the float whose addition rounds to an integer (round-to-nearest-even).
    x = np.array([-3.4, -3.6, -0.49, -125.5], dtype=np.float32)
    magic = np.float32(F.ROUND_MAGIC)
    assert np.array_equal((x + magic) - magic, np.round(x))


def test_attention_rejects_non_gpu_arrays() -> None:
    np = pytest.importorskip("numpy")
    x = np.zeros((1, 1, 4, 64), dtype=np.float16)
    with pytest.raises(ValueError, match="torch tensors or CuPy arrays"):
        F.attention(x, x, x)


def test_probe_never_raises_and_says_why() -> None:
    res = F.probe(run_kernel=False)
    assert isinstance(res.available, bool)
    assert res.message
    if not res.available:
        assert res.cuda_tile_version == ct.__version__


def test_error_translation_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    err = F._translate(OSError("libcuda.so.1: cannot open shared object file"))
    assert isinstance(err, F.NoGpuError) and "driver" in str(err)
    err = F._translate(RuntimeError("cuInit: CUDA_ERROR_NO_DEVICE"))
    assert isinstance(err, F.NoGpuError)
    err = F._translate(FileNotFoundError("'tileiras' compiler not found"))
    assert isinstance(err, F.CompilerNotFoundError) and "pip install" in str(err)
    monkeypatch.setenv("CUDA_HOME", "/usr/local/cuda")
    tce = ct.TileCompilerExecutionError(5, "failed to compile Tile IR program", None, "", None)
    err = F._translate(tce)
    assert isinstance(err, F.CompilerFailedError)
    assert "unset CUDA_HOME" in str(err)
    err = F._translate(RuntimeError("CUDA_ERROR_OUT_OF_MEMORY: out of memory"))
    assert isinstance(err, F.DeviceOutOfMemoryError)


def test_problem_key_and_buckets() -> None:
    assert F.n_bucket(1) == 64 and F.n_bucket(64) == 64 and F.n_bucket(65) == 128
    assert F.n_bucket(4097) == 8192
    key = F.problem_key("sm_90", "float16", 128, "causal", 4, 1000, 1000)
    assert key == "sm_90|float16|d128|causal|g4|n1024"


def test_space_digest_tells_search_spaces_apart() -> None:
    a = {"tile_m": 64, "tile_n": 64, "occupancy": 2}
    b = {"tile_m": 128, "tile_n": 128, "num_worker_warps": 8, "poly_exp2_cols": 16}
    assert F.space_digest([a, b]) == F.space_digest([b, a])  # order does not matter
    assert F.space_digest([a]) != F.space_digest([a, b])
    assert F.space_digest([b]) != F.space_digest([{**b, "poly_exp2_cols": 32}])


@pytest.mark.parametrize("older", ["TUNING_METHOD", "KERNEL_REVISION"])
def test_a_new_tuning_method_or_kernel_retunes_cached_winners(
    monkeypatch: pytest.MonkeyPatch, older: str
) -> None:
    # A winner cached by an older tuner or timed on older kernels (same space) must not match:
    # autotune compares the stored digest with this one before it trusts the cache.
    space = [{"tile_m": 64, "tile_n": 128, "occupancy": 2}]
    current = tuner.space_digest(space)
    monkeypatch.setattr(tuner, older, getattr(tuner, older) - 1)
    assert tuner.space_digest(space) != current


def test_second_stage_sees_the_fastest_of_every_grid_form() -> None:
    # The H200 search ranked the persistent grid below four 64-row and cluster configs at
    # non-causal N = 2048; the second stage must still time it (and the 128-row tile).
    from kernels.tuning_spaces import search_space

    space = [F.LaunchConfig.of(c) for c in search_space("sm_90", 128, "none")]
    plain_64 = [c for c in space if F.grid_form(c) == (64, False, 1, 1)]
    cluster = [c for c in space if F.grid_form(c) == (128, False, 2, 1)]
    plain_128 = [c for c in space if F.grid_form(c) == (128, False, 1, 1)]
    persistent = [c for c in space if F.grid_form(c) == (128, True, 1, 1)]
    # Key blocks in pairs is a form of its own: it won at N <= 2048 and lost at 8192.
    pairs = [c for c in space if F.grid_form(c) == (128, True, 1, 2)]
    assert persistent and pairs
    ranked = plain_64 + cluster + plain_128[::-1] + persistent + pairs
    finalists = F.sustained_finalists(ranked)
    assert finalists[: F.SUSTAINED_FINALISTS] == ranked[: F.SUSTAINED_FINALISTS]
    # One more per form missing from the front-runners, the fastest of it, and no other.
    assert finalists[F.SUSTAINED_FINALISTS :] == [plain_128[-1], persistent[0], pairs[0]]
    assert {F.grid_form(c) for c in finalists} == {F.grid_form(c) for c in space}
    # Front-runners of four forms: only the fifth form's fastest is added, not the 64-row rest.
    one_each = [plain_64[0], cluster[0], plain_128[0], persistent[0], *plain_64[1:], pairs[0]]
    assert F.sustained_finalists(one_each) == [*one_each[: F.SUSTAINED_FINALISTS], pairs[0]]


def test_search_spaces_are_small_and_valid() -> None:
    from kernels.tuning_spaces import SEARCH_SPACES, search_space

    for arch, table in SEARCH_SPACES.items():
        assert 1 <= len(table) <= 24, arch
        for c in table:
            F.LaunchConfig.of(c)  # raises on any invalid tile, hint or latency
    assert search_space("sm_999")  # unknown archs fall back to a safe table
    assert all(c["tile_m"] * c["tile_n"] <= 128 * 64 for c in search_space("sm_90", 256))
    # The 2-CTA clusters are tried with and without a mask (the tuner keeps them where they win).
    assert any(c["num_ctas"] == 2 for c in search_space("sm_90", 128, "none"))
    assert any(c["num_ctas"] == 2 for c in search_space("sm_90", 128, "causal"))
    # The persistent grid: every form without a mask, one key block an iteration causal
    # (the causal kernel has no pairs), none with a window (no window kernel).
    assert any(c["k_unroll"] == 2 for c in search_space("sm_90", 128, "none"))
    causal = search_space("sm_90", 128, "causal")
    assert any(c["persistent"] for c in causal)
    assert all(c["k_unroll"] == 1 for c in causal)
    assert not any(c["persistent"] for c in search_space("sm_90", 128, "window"))
    assert len(search_space("sm_90", 128, "window")) == len(
        [c for c in SEARCH_SPACES["sm_90"] if not c["persistent"]]
    )
    assert search_space("sm_90", 128) == [dict(c) for c in SEARCH_SPACES["sm_90"]]


def test_the_persistent_config_picks_its_kernel_by_problem() -> None:
    # One config, the tuner's persistent entry: the mask-free persistent kernel, the causal
    # one where the problem is whole tiles, and one CTA per tile where it is not (a winner
    # cached for N = 2048 also serves N = 2000 from the same bucket).
    config = F.LaunchConfig(tile_m=128, tile_n=128, num_worker_warps=8, persistent=True)
    assert config.kernel_form("none", 2000, 2000) == "persistent"
    assert config.kernel_form("causal", 2048, 2048) == "causal-persistent"
    assert config.kernel_form("causal", 1024, 2048, input_pos=1024) == "causal-persistent"
    assert config.kernel_form("causal", 2000, 2000) == "tile"  # ragged last q-block
    assert config.kernel_form("causal", 1024, 2048, input_pos=1000) == "tile"  # mid-block
    assert config.kernel_form("causal", 2048, 1024) == "tile"  # diagonal past k_len
    rect = F.LaunchConfig(tile_m=64, tile_n=128, persistent=True)
    assert rect.kernel_form("causal", 2048, 2048) == "tile"  # no single diagonal block
    assert F.LaunchConfig(tile_m=128, tile_n=128).kernel_form("causal", 2048, 2048) == "tile"
    with pytest.raises(ValueError, match="no window kernel for it"):
        config.kernel_form("window", 2048, 2048)
    # The causal grid's single loop takes the polynomial even with the K-split off.
    poly = F.LaunchConfig(tile_m=128, tile_n=128, persistent=True, poly_exp2_cols=16,
                          k_split=False)  # fmt: skip
    aligned = planned(poly, "causal", 2048)
    assert aligned.value("POLY_COLS") == 16
    with pytest.raises(KeyError, match="declares no 'EVEN_K'"):
        aligned.value("EVEN_K")  # the mask-free grid's constants only
    assert planned(poly, "causal", 2000).value("POLY_COLS") == 0  # one CTA per tile: no K-split


def test_causal_tile_table_rows() -> None:
    # Row p: program p's tile count, then its tiles as bh * n_q + qb; every tile once.
    table = F.causal_tile_table(6, 16, 5, 2, 1)
    assert not table.flags.writeable  # cached: callers must not change it
    counts = table[:, 0]
    codes = np.concatenate([row[1 : 1 + n] for row, n in zip(table, counts, strict=True)])
    assert sorted(codes.tolist()) == list(range(6 * 16))
    # Padded to multiples of 16 (one JIT shape class for every problem): no program there.
    assert table.shape == (16, 32) and 1 + counts.max() <= 32
    assert (counts[5:] == 0).all() and (counts[:5] > 0).all()
    assert F.causal_tile_table(6, 16, 5, 2, 1) is table


def test_l2_group_size() -> None:
    assert F.l2_group_size(128, 16384, 128, 2, 1) == 2
    assert F.l2_group_size(1, 16384, 128, 2, 1) == 1
    assert math.log2(F.l2_group_size(96, 512, 64, 2, 1)).is_integer()


@pytest.mark.parametrize("mask", ["none", "causal"])
def test_the_q_halves_knob_reaches_both_persistent_kernels(mask: str) -> None:
    # The window's "Q in column halves" box, off: the persistent grids must fetch Q whole,
    # which is different machine code from the halves they fetch by default.
    from workbench.backends.cutile import CutileBackend, _knobs
    from workbench.config import KernelConfig, Problem

    problem = Problem(heads=4, kv_heads=2, head_dim=128, q_len=1024, k_len=1024)
    cubins = {}
    for halves in (True, False):
        config = KernelConfig(
            tile_m=128, tile_n=128, num_worker_warps=8, persistent=True, mask=mask,
            q_halves=halves,
        )  # fmt: skip
        knobs = _knobs(CutileBackend()._launch_kwargs(problem, config, ()))
        launch = F.LaunchConfig.of(knobs)
        assert launch.q_halves is halves
        assert launch.kernel_form(mask, 1024, 1024) != "tile"
        _need_tileiras()
        cubins[halves] = F.compile_cubin(
            arch="sm_90", batch=1, heads=4, kv_heads=2, q_len=1024, k_len=1024, mask=mask, **knobs
        )
        assert _is_elf(cubins[halves])
    assert cubins[True] != cubins[False]
