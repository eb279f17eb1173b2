"""Each architecture's tuning table still compiles, without a spill, within that GPU's limits.

CPU only: one representative entry of each table is compiled with tileiras for its
architecture (``kernels.cutile_fmha.compile_cubin``) and its cubin read with cuobjdump
(``kernels.cubin_resources``). It fails when the entry stops compiling, starts to use stack or
local memory, or outgrows the architecture's shared memory or register file. The full report
(every entry, dtype, head dim and mask: ``bench/blackwell_report.py``) is run by hand when a
table changes; this keeps CI to a few compiles.

Without cuda.tile, tileiras or cuobjdump the compile tests skip, except under ``CI=true``,
where a missing compiler is a failure (CI installs the test extra, which carries all three).
"""

from __future__ import annotations

import json
import os

import pytest

from kernels.cubin_resources import (
    ARCH_LIMITS,
    KB,
    Resources,
    check_fit,
    cuobjdump_path,
    parse_res_usage,
    parse_threads,
)
from kernels.tuning_spaces import (
    MEASURED_ARCHS,
    SEARCH_SPACES,
    VETTED_OFFLINE_ARCHS,
    _cfg,
    search_space,
    table_status,
)

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _require(ok: bool, why: str) -> None:
    if ok:
        return
    if IN_CI:
        pytest.fail(f"{why}: under CI=true the offline compile check must run, not skip")
    pytest.skip(why)


# One entry per table, (arch, dtype, head dim, mask, config): the table's heaviest kind of entry
# (the one nearest its limits), a different dtype, mask and form on each, so between them the
# plain tile, worker warps, the polynomial exp2, a cluster and the persistent grid are all
# compiled.
REPRESENTATIVE = [
    # Hopper (reference; the H200 table): the benchmark's persistent entry.
    (
        "sm_90",
        "float16",
        128,
        "none",
        _cfg(128, 128, num_worker_warps=8, poly_exp2_cols=16, persistent=True),
    ),
    # Blackwell datacenter: the 128-row tile, 8 worker warps, causal, bf16.
    ("sm_100", "bfloat16", 128, "causal", _cfg(128, 128, num_worker_warps=8, poly_exp2_cols=16)),
    # Blackwell consumer (99 KB per block): 128x64, 8 worker warps, the polynomial.
    ("sm_120", "float16", 128, "window", _cfg(128, 64, num_worker_warps=8, poly_exp2_cols=16)),
    ("sm_121", "bfloat16", 64, "causal", _cfg(64, 64, occupancy=1)),
    # sm_103's own table (sm_100's less one): the 2-CTA cluster with the polynomial.
    ("sm_103", "float16", 128, "none", _cfg(128, 128, num_ctas=2, occupancy=2, poly_exp2_cols=16)),
]


# Architectures that compile as a sibling checked here too (sm_121 as sm_120, sm_103 as sm_100,
# whose table holds sm_103's entry as well): their cold compiles run in the slow step.
SIBLING_ARCHS = ("sm_121", "sm_103")


@pytest.mark.parametrize(
    ("arch", "dtype", "head_dim", "mask", "config"),
    [
        pytest.param(
            *case,
            id="{}-{}-d{}-{}".format(*case[:4]),
            marks=[pytest.mark.slow] if case[0] in SIBLING_ARCHS else [],
        )
        for case in REPRESENTATIVE
    ],
)
def test_a_representative_table_entry_compiles_without_spilling(
    arch: str, dtype: str, head_dim: int, mask: str, config: dict
) -> None:
    # The entry must be one the tuner really tries here: a table change that drops it must
    # pick another representative, not leave this test compiling something unused.
    assert config in search_space(arch, head_dim, mask), (arch, config)
    try:
        import cuda.tile  # noqa: F401
    except ImportError:
        _require(False, "cuda.tile is not installed")
    from kernels import cutile_fmha as F
    from kernels.cubin_resources import read_resources

    _require(F.tileiras_version() is not None, "tileiras is not installed")
    _require(cuobjdump_path() is not None, "cuobjdump is not installed (nvidia-cuda-cuobjdump)")
    cubin = F.compile_cubin(
        arch=arch, dtype=dtype, head_dim=head_dim, mask=mask, batch=1, heads=4, q_len=2048,
        **config,
    )  # fmt: skip
    res = read_resources(cubin)
    limits = ARCH_LIMITS[arch]
    assert res.stack == 0 and res.local == 0, f"{arch} {config}: spills ({res})"
    assert res.shared <= limits.shared_per_block, f"{arch}: {res.shared} B shared"
    assert check_fit(res, limits, occupancy=config["occupancy"], num_ctas=config["num_ctas"]) == []
    assert res.registers <= 255 and res.threads >= 128


def test_the_blackwell_tables_are_their_own_and_say_how_far_they_were_checked() -> None:
    # Consumer Blackwell gets a table of its own (less shared memory than sm_90/sm_100), the
    # sm_103/sm_121 variants share their family's, and the words the backends line shows.
    assert SEARCH_SPACES["sm_120"] is SEARCH_SPACES["sm_121"]
    # sm_103: sm_100's less the one entry that outgrew the SM there (64x64 occ2, window).
    sm103 = set(map(str, SEARCH_SPACES["sm_103"]))
    assert sm103 < set(map(str, SEARCH_SPACES["sm_100"]))
    assert str(_cfg(64, 64, occupancy=2)) not in sm103
    assert SEARCH_SPACES["sm_120"] != SEARCH_SPACES["sm_100"] != SEARCH_SPACES["sm_90"]
    assert {"sm_100", "sm_103", "sm_120", "sm_121"} <= VETTED_OFFLINE_ARCHS
    assert not VETTED_OFFLINE_ARCHS & MEASURED_ARCHS
    assert table_status("sm_120") == (
        "tuning table vetted offline, not yet measured on this architecture"
    )
    assert table_status("sm_90") == "tuning table measured on this architecture"
    assert "not checked" in table_status("sm_86")
    # The Hopper-style knobs are offered where they compiled cleanly: worker warps and the
    # polynomial on both, clusters on sm_100, the persistent grid on sm_120 (on sm_100 every
    # persistent form tried spills without a mask, docs/blackwell.md).
    for arch in ("sm_100", "sm_120"):
        table = SEARCH_SPACES[arch]
        assert any(c["num_worker_warps"] == 8 for c in table), arch
        assert any(c["poly_exp2_cols"] for c in table), arch
    assert any((c["num_ctas"] or 1) > 1 for c in SEARCH_SPACES["sm_100"])
    assert any(c["persistent"] for c in SEARCH_SPACES["sm_120"])
    # Every head dim and mask still gets a non-empty space.
    for arch in ("sm_100", "sm_120"):
        for head_dim in (64, 128, 256):
            for mask in ("none", "causal", "window"):
                assert search_space(arch, head_dim, mask), (arch, head_dim, mask)


def test_the_committed_report_backs_every_blackwell_table_entry() -> None:
    # Every sm_100/sm_103/sm_120/sm_121 table entry appears in the committed offline report
    # at fp16 and bf16, D = 64 and 128, every mask it is offered for, and fits there (no
    # spill, within the limits). The report is regenerated by hand; this catches a table
    # edited without it.
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "results" / "blackwell-offline.json"
    results = json.loads(path.read_text())["results"]
    seen = {
        (r["arch"], r["dtype"], r["head_dim"], r["mask"], json.dumps(r["config"], sort_keys=True)):
        r for r in results
    }  # fmt: skip
    for arch in ("sm_100", "sm_103", "sm_120", "sm_121"):
        for dtype in ("float16", "bfloat16"):
            for head_dim in (64, 128):
                for mask in ("none", "causal", "window"):
                    for cfg in search_space(arch, head_dim, mask):
                        key = (arch, dtype, head_dim, mask, json.dumps(cfg, sort_keys=True))
                        assert key in seen, f"not in the report: {key}"
                        record = seen[key]
                        assert record["compiled"] and record["problems"] == [], (key, record)
                        assert record["resources"]["stack"] == 0
                        limit = ARCH_LIMITS[arch].shared_per_block
                        assert record["resources"]["shared"] <= limit


RES_USAGE = """
Resource usage:
 Common:
  GLOBAL:64 CONSTANT[4]:8
 Function fmha_fwd_kernel_Kt2_A4f16:
  REG:255 STACK:1776 SHARED:99596 LOCAL:0 CONSTANT[0]:1728 TEXTURE:0 SURFACE:0 SAMPLER:0
"""
ELF_ATTR = """
	Attribute:	EIATTR_REQNTID
	Format:	EIFMT_SVAL
	Value:	0x100 0x1 0x1
"""


def test_cuobjdump_output_is_parsed() -> None:
    assert parse_res_usage(RES_USAGE) == [{"reg": 255, "stack": 1776, "shared": 99596, "local": 0}]
    assert parse_threads(".reqntid 384\n.minnctapersm 1\n") == 384
    assert parse_threads(".reqntid 128, 2, 1\n") == 256
    assert parse_threads(ELF_ATTR) == 256
    assert parse_threads("no block size here") is None


def test_check_fit_names_each_limit_it_breaks() -> None:
    sm120, sm100 = ARCH_LIMITS["sm_120"], ARCH_LIMITS["sm_100"]
    assert sm120.shared_per_block == 99 * KB and sm100.shared_per_block == 227 * KB
    ok = Resources(registers=168, stack=0, local=0, shared=91_844, threads=384)
    assert check_fit(ok, sm120) == []
    # Spills (stack or local memory), too much shared memory for the block.
    spill = Resources(registers=255, stack=1776, local=0, shared=99_596, threads=256)
    assert check_fit(spill, sm120) == ["stack 1776 B per thread (register spill)"]
    local = Resources(registers=255, stack=0, local=16, shared=1024, threads=256)
    assert "local memory 16 B per thread (register spill)" in check_fit(local, sm120)
    big = Resources(registers=168, stack=0, local=0, shared=158_000, threads=384)
    assert check_fit(big, sm100) == []
    assert any("per block (99 KB)" in p for p in check_fit(big, sm120))
    # Registers per block: 255 (256 after rounding) x 384 threads > 64K.
    fat = Resources(registers=255, stack=0, local=0, shared=1024, threads=384)
    assert any("registers per block" in p for p in check_fit(fat, sm100))
    # An occupancy hint the SM cannot keep: two 49.2 KB blocks plus their 1 KB system
    # reserve are more than sm_120's 100 KB (TileGym's 64x64 occupancy 2 there).
    half = Resources(registers=128, stack=0, local=0, shared=50_380, threads=256)
    assert check_fit(half, sm120, occupancy=1) == []
    assert check_fit(half, sm120, occupancy=2) == ["occupancy 2: 102808 B shared > 102400 B per SM"]
    assert check_fit(half, sm100, occupancy=2) == []
    assert any("threads" in p for p in check_fit(half, sm120, occupancy=8))
    assert any("cluster" in p for p in check_fit(ok, sm120, num_ctas=16))


@pytest.mark.parametrize(
    ("major", "minor", "words"),
    [
        (12, 0, "tuning table vetted offline, not yet measured on this architecture"),
        (10, 0, "tuning table vetted offline, not yet measured on this architecture"),
        (9, 0, "tuning table measured on this architecture"),
        (8, 6, "tuning table from published guidance, not checked on this architecture"),
    ],
)
def test_the_backends_line_says_how_far_the_gpus_table_was_checked(
    monkeypatch: pytest.MonkeyPatch, major: int, minor: int, words: str
) -> None:
    # `fmha-workbench backends` prints this reason; on a Blackwell GPU it must say the table
    # was vetted offline only. CuPy and the GPU are stood in for (this runs on a CPU).
    import sys
    import types

    import workbench.backends.cutile as cutile
    import workbench.backends.gpu as gpu
    from workbench.backends.base import Availability

    runtime = types.SimpleNamespace(getDeviceProperties=lambda i: {"major": major, "minor": minor})
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(
        runtime=runtime)))  # fmt: skip
    if "cuda.tile" not in sys.modules:
        try:
            import cuda.tile  # noqa: F401
        except ImportError:
            monkeypatch.setitem(sys.modules, "cuda", types.ModuleType("cuda"))
            monkeypatch.setitem(sys.modules, "cuda.tile", types.ModuleType("cuda.tile"))
    name = f"NVIDIA RTX PRO 6000 Blackwell (sm_{major}{minor})"
    monkeypatch.setattr(cutile, "cupy_device", lambda: Availability(True, name))
    monkeypatch.setattr(cutile, "cuda_home_problem", lambda: None)
    monkeypatch.setattr(gpu, "tileiras_version", lambda: "tileiras 13.4.92")
    available = cutile.CutileBackend().availability()
    assert available.available
    assert available.reason == f"cuTile on {name}, {words}, tileiras 13.4.92"
