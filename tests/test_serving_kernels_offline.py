"""The serving kernels compile for sm_90 without a GPU, and their shipped configs do not spill.

``export_kernel`` runs cuTile's front end and tileiras, so a compile error or a spill (local
memory, read from the cubin with cuobjdump) shows up here before the device is used. Skips
cleanly when cuda.tile or tileiras is not installed.
"""

from __future__ import annotations

import pytest

pytest.importorskip("cuda.tile")

from kernels.cubin_resources import cuobjdump_path, read_resources
from kernels.cutile.diagnostics import tileiras_version
from kernels.cutile.paged import compile_paged_cubin, default_block_n, plan_paged
from kernels.cutile.varlen import compile_varlen_cubin


@pytest.fixture(autouse=True)
def _need_tileiras() -> None:
    if tileiras_version() is None:
        pytest.skip("tileiras is not installed")


def check_no_spill(cubin: bytes) -> None:
    assert cubin[:4] == b"\x7fELF" and len(cubin) > 10_000
    if cuobjdump_path() is not None:
        used = read_resources(cubin)
        assert not used.spills, used


@pytest.mark.parametrize(
    "knobs",
    [
        dict(causal=True),  # the default: 64×64 at occupancy 2, fp16, D 128, causal, LSE
        dict(causal=False, dtype="bfloat16", head_dim=64),
        dict(window=256, head_dim=96, dtype="bfloat16"),  # a padded head dim, window mask
        dict(causal=True, block_n=128),  # 64×128, two CTAs an SM
        dict(causal=True, with_lse=False),
        # 128-row tiles: 8 worker warps, one CTA an SM (the compiler's own choice spills).
        dict(causal=True, dtype="bfloat16", block_m=128, block_n=128, with_lse=False),
        dict(causal=True, block_m=128, block_n=64),
        # The polynomial exp2 on the unmasked blocks, with the dense prefill's load latencies.
        dict(
            causal=True,
            dtype="bfloat16",
            block_m=128,
            block_n=128,
            with_lse=False,
            poly_cols=16,
            key_latency=3,
            value_latency=6,
        ),
        dict(causal=True, dtype="bfloat16", block_m=128, block_n=128, with_lse=False, poly_cols=32),
    ],
    ids=[
        "causal-d128",
        "none-bf16-d64",
        "window-bf16-d96",
        "causal-64x128",
        "no-lse",
        "causal-bf16-128x128",
        "causal-128x64",
        "causal-bf16-128x128-poly16-lat36",
        "causal-bf16-128x128-poly32",
    ],
)
def test_the_varlen_kernel_compiles_without_spilling(knobs: dict) -> None:
    check_no_spill(compile_varlen_cubin(**knobs))


def test_the_varlen_tile_fits_two_ctas_an_sm_only_on_a_two_cta_cluster() -> None:
    """The dense prefill's fastest 128x128 form: 2 CTAs an SM of 256 threads at 128 registers.
    The varlen tile asked for it alone spills; on a 2-CTA cluster it does not."""
    if cuobjdump_path() is None:
        pytest.skip("cuobjdump is not installed")
    tile = dict(causal=True, dtype="bfloat16", block_m=128, block_n=128, ctas_per_sm=2)
    clustered = read_resources(compile_varlen_cubin(**tile, cluster_ctas=2))
    assert clustered.stack == 0 and clustered.local == 0, clustered
    assert clustered.registers * clustered.threads * 2 <= 65536, clustered  # two fit an SM
    with pytest.raises(ValueError, match="cluster_ctas must be one of"):
        compile_varlen_cubin(**tile, cluster_ctas=4)


@pytest.mark.parametrize(
    "knobs",
    [
        dict(page_size=16),  # four pages joined into a 64-key block
        dict(page_size=32, dtype="float16", head_dim=64),  # two pages a block
        dict(page_size=64),  # a page a block
        dict(page_size=256),  # two 128-key blocks a page
        dict(page_size=64, q_len=16),  # speculative decode: 16 positions × group 4
        dict(page_size=16, q_len=128),  # chunked prefill over pages, two q-blocks
        dict(page_size=128, head_dim=96),  # padded head dim
        dict(page_size=64, split=False, with_lse=False),  # one unit a sequence, no combine
    ],
    ids=["p16", "p32-fp16-d64", "p64", "p256", "p64-q16", "p16-chunk128", "p128-d96", "nosplit"],
)
def test_the_paged_kernel_compiles_without_spilling(knobs: dict) -> None:
    check_no_spill(compile_paged_cubin(**knobs))


@pytest.mark.parametrize(("q_len", "with_lse"), [(1, True), (16, True), (1, False)])
def test_the_paged_combine_compiles_without_spilling_at_several_ctas_an_sm(q_len, with_lse):
    cubin = compile_paged_cubin(page_size=64, q_len=q_len, combine=True, with_lse=with_lse)
    check_no_spill(cubin)
    if cuobjdump_path() is not None:
        used = read_resources(cubin)
        assert 65536 // (used.registers * used.threads) >= 4, used  # not one CTA an SM
    with pytest.raises(ValueError, match="not split has no combine kernel"):
        compile_paged_cubin(page_size=64, split=False, combine=True)


def test_a_page_of_16_runs_in_64_key_blocks_because_16_key_steps_spill() -> None:
    # The choice default_block_n makes, measured: one 16-key page a step spills on sm_90, and
    # so do eight pages joined into 128 keys; four joined into 64 keys do not (the p16 case).
    # From pages of 32 up the block is 128 keys, which ran as fast as the dense decode.
    assert default_block_n(16) == 64 and default_block_n(32) == 128
    assert default_block_n(64) == 128 and default_block_n(256) == 128
    # At most the decode form's 32 KB of K a block: 64 keys at D 256, whose plan says so too.
    assert default_block_n(64, head_dim=256) == 64
    assert plan_paged([300], q_len=1, heads=8, kv_heads=2, page_size=64, head_dim=256).block_n == 64
    if cuobjdump_path() is None:
        pytest.skip("cuobjdump is not installed: spills cannot be read")
    assert read_resources(compile_paged_cubin(page_size=16, block_n=16)).spills
    assert read_resources(compile_paged_cubin(page_size=16, block_n=128)).spills
    assert not read_resources(compile_paged_cubin(page_size=16, block_n=32)).spills
    for page_size in (32, 64):
        assert not read_resources(compile_paged_cubin(page_size=page_size, block_n=128)).spills
