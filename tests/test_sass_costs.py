"""kernels/sass_costs.py: finding the key loop in a disassembly and costing one key block."""

from __future__ import annotations

from kernels.sass_costs import (
    block_costs,
    consumer_warps,
    key_block_loop,
    key_block_loops,
    key_loop_costs,
    loops,
    sync_sites,
)

# A kernel's shape in nvdisasm's words: a wait loop without MMA, the unmasked key loop, the
# masked one, and a branch back over the epilogue whose range holds the masked loop (so it is
# not innermost; the two key loops are).
SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_0:
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2 ;
        /*0020*/              @!P0 BRA `(.L_x_0) ;
.L_x_1:
        /*0030*/                   HGMMA.64x128x16.F32 R24, gdesc[UR52], RZ, !UPT ;
        /*0040*/                   FMNMX R3, R24, R25, !PT ;
        /*0050*/                   MUFU.EX2 R4, R3 ;
        /*0060*/                   FFMA R5, R4, R4, R3 ;
        /*0070*/                   HGMMA.64x128x16.F32 R24, gdesc[UR52], R24 ;
        /*0080*/               @P1 BRA `(.L_x_1) ;
.L_x_2:
        /*0090*/                   HGMMA.64x128x16.F32 R24, gdesc[UR52], RZ, !UPT ;
        /*00a0*/                   FSEL R6, R24, -INF , P2 ;
        /*00b0*/                   MUFU.EX2 R4, R6 ;
        /*00c0*/               @P2 BRA `(.L_x_2) ;
        /*00d0*/                   UTMASTG.2D [UR8], [UR4] ;
        /*00e0*/               @P3 BRA `(.L_x_2) ;
        /*00f0*/                   EXIT ;
"""


def test_every_backward_branch_is_a_loop_and_its_body_is_counted() -> None:
    found = {(lp.start, lp.end): lp for lp in loops(SASS)}
    assert set(found) == {(0x10, 0x20), (0x30, 0x80), (0x90, 0xC0), (0x90, 0xE0)}
    key = found[(0x30, 0x80)].counts()
    assert key["HGMMA"] == 2 and key["MUFU"] == 1 and key["FFMA"] == 1 and key["BRA"] == 1


def test_the_key_loop_is_the_first_innermost_loop_with_tensor_core_instructions() -> None:
    inner = key_block_loops(SASS)
    assert [(lp.start, lp.end) for lp in inner] == [(0x30, 0x80), (0x90, 0xC0)]
    assert key_block_loop(SASS).start == 0x30


def test_a_block_costs_issue_mufu_and_tensor_cycles_in_proportion() -> None:
    loop = key_block_loop(SASS)  # 6 instructions, 1 MUFU a warp
    costs = block_costs(loop, consumer_warps=8, rows=128, keys=128, head_dim=128)
    assert costs["instructions"] == 6
    assert costs["issue_cycles"] == 8 * 6 / 4
    assert costs["mufu_cycles"] == 8 * 32 * 1 / 16
    assert costs["tensor_cycles"] == 2 * 2 * 128 * 128 * 128 / 4096  # 2048
    # Half the head dim halves the tensor cycles and leaves the softmax's as they were.
    half = block_costs(loop, consumer_warps=8, rows=128, keys=128, head_dim=64)
    assert half["tensor_cycles"] == costs["tensor_cycles"] / 2
    assert half["mufu_cycles"] == costs["mufu_cycles"]


def test_a_config_comes_as_json_or_as_one_entry_of_a_config_list(tmp_path) -> None:
    from bench.sass_loop import read_config

    listed = tmp_path / "probe.json"
    listed.write_text('[{"poly_exp2_cols": 0}, {"poly_exp2_cols": 32}]')
    assert read_config(f"@{listed}:1") == {"poly_exp2_cols": 32}
    assert read_config(f"@{listed}") == {"poly_exp2_cols": 0}
    assert read_config('{"poly_exp2_cols": 16}') == {"poly_exp2_cols": 16}
    # A warp-specialized kernel's producer warpgroup runs no key loop.
    assert consumer_warps("USETMAXREG.DEALLOC.CTAPOOL 0x18", 384) == 8
    assert consumer_warps("HGMMA.64x128x16.F32", 128) == 4


def test_warp_level_mma_counts_as_tensor_core_work_too() -> None:
    # The decode form's 16-row tiles run mma.sync (HMMA), not warpgroup HGMMA.
    decode = SASS.replace("HGMMA.64x128x16.F32 R24, gdesc[UR52], RZ, !UPT", "HMMA.16816.F32 R24")
    decode = decode.replace("HGMMA.64x128x16.F32 R24, gdesc[UR52], R24", "HMMA.16816.F32 R24")
    assert key_block_loop(decode).tensor_instructions() == 2
    assert key_block_loop(decode).start == 0x30


def test_costs_are_shares_of_the_tensor_cycles_and_only_where_the_rates_are_known() -> None:
    tile = dict(threads=256, rows=128, keys=128, head_dim=128)
    costs = key_loop_costs(SASS, arch="sm_90", **tile)
    assert costs is not None and costs.consumer_warps == 8 and costs.instructions == 6
    assert costs.issue_share == round(8 * 6 / 4 / 2048, 3)
    assert costs.mufu_share == round(8 * 32 * 1 / 16 / 2048, 3)
    assert costs.counts["HGMMA"] == 2
    assert costs.kv_share is None  # a prefill block's K and V come through L2: no read share
    # A decode block of 128 keys at D 128 reads 64 KB: 3,770 cycles of an SM's read share.
    decode = key_loop_costs(SASS, arch="sm_90", kv_bytes=65536, **tile)
    assert decode is not None and decode.kv_share == round(
        65536 / (4540e9 / 132 / 1980e6) / 2048, 3
    )
    assert 1.8 < decode.kv_share < 1.9
    # Blackwell's tensor instructions and rates are not modelled: no answer, not a wrong one.
    assert key_loop_costs(SASS, arch="sm_100", **tile) is None
    no_mma = "\n".join(line for line in SASS.splitlines() if "MMA" not in line)
    assert key_loop_costs(no_mma, arch="sm_90", **tile) is None


def test_waits_are_told_apart_whole_cta_named_and_mbarrier_in_and_out_of_the_key_loop() -> None:
    """FA4's sm_90 SASS: one whole-CTA barrier in its prologue, named barriers (1, 2 and one a
    warpgroup chooses by register) taking its consumer warpgroups' turns in the key loop; ours:
    the prologue's barrier and mbarrier waits only."""
    sass = """
        /*0000*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
.L_x_1:
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2 ;
        /*0020*/                   BAR.SYNC.DEFER_BLOCKING R8, 0x100 ;
        /*0030*/                   HGMMA.64x128x16.F32 R24, gdesc[UR52], RZ, !UPT ;
        /*0040*/                   BAR.ARV 0x2, 0x100 ;
        /*0044*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*0048*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*0050*/               @P1 BRA `(.L_x_1) ;
        /*0060*/              @!P2 BAR.SYNC.DEFER_BLOCKING 0x1, 0x120 ;
        /*0070*/                   SYNCS.PHASECHK.TRANS64 P0, [UR4+0x8], R2 ;
        /*0080*/                   EXIT ;
"""
    found = sync_sites(sass)
    assert found["cta_barriers"] == {"sites": 1, "in_key_loop": 0}
    named = found["named_barriers"]
    assert (named["sites"], named["in_key_loop"], named["ids"]) == (3, 2, ["0x1", "0x2", "R8"])
    assert found["mbarrier_waits"] == {"sites": 2, "in_key_loop": 1}
    # Its waits for the tensor cores: one leaves a product in flight (its softmax beside P·V).
    assert found["tensor_waits"] == {"sites": 2, "in_key_loop": 2, "partial_in_key_loop": 1}
    # Ours, from the module's SASS: no barrier at all, one mbarrier wait outside the key loop.
    ours = sync_sites(SASS)
    assert ours["cta_barriers"]["sites"] == ours["named_barriers"]["sites"] == 0
    assert ours["mbarrier_waits"] == {"sites": 1, "in_key_loop": 0}
    assert ours["tensor_waits"] == {"sites": 0, "in_key_loop": 0, "partial_in_key_loop": 0}
