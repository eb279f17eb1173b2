"""Problem, KernelConfig, SweepSpec, parse_seq_lens: checked once, errors name the field."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.knobs import KNOBS
from workbench.config import (
    HEAD_DIMS,
    MAX_SEQ_LEN,
    ConfigError,
    KernelConfig,
    Problem,
    SweepSpec,
    parse_seq_lens,
)

TILE_SIZES = KNOBS["tile_m"].values
WORKER_WARPS = tuple(w for w in KNOBS["num_worker_warps"].values if w is not None)
CLUSTER_CTAS = tuple(c for c in KNOBS["num_ctas"].values if c is not None)
PLAIN = dict(fast_math=False, k_split=False, remap=False)  # the ladder's baseline


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("128,256,512", (128, 256, 512)),
        ("512, 128,128", (128, 512)),  # sorted, without repeats
        ("1k-16k", (1024, 2048, 4096, 8192, 16384)),
        ("1024..16384", (1024, 2048, 4096, 8192, 16384)),
        (" 1K - 4K ", (1024, 2048, 4096)),
        ("2k", (2048,)),
        ("1", (1,)),
        ("64-64", (64,)),
        ("7,5,3,", (3, 5, 7)),
    ],
)
def test_parse_seq_lens(text: str, expected: tuple[int, ...]) -> None:
    assert parse_seq_lens(text) == expected


@pytest.mark.parametrize(
    "text", ["", " ", "abc", "0", "1k-3k", "4k-1k", "1.5k", "-16", "16;32", "1k-", "99999999"]
)
def test_bad_seq_lens_name_the_field(text: str) -> None:
    with pytest.raises(ConfigError) as error:
        SweepSpec(Problem(), parse_seq_lens(text), KernelConfig())
    assert error.value.field == "seq_lens"
    assert "seq_lens" in str(error.value)


def test_problem_defaults_and_derived_values() -> None:
    p = Problem(heads=8, kv_heads=2, head_dim=128, input_pos=100)
    assert Problem(heads=6).kv_heads == 6  # no GQA by default
    assert p.group_size == 4
    n = p.with_seq_len(1000)
    assert (n.q_len, n.k_len, n.input_pos) == (1000, 1100, 100)
    assert n.tensor_bytes() == (2 * 8 * 1000 + 2 * 2 * 1100) * 128 * 2
    assert Problem.from_dict(n.to_dict()) == n
    # A newer file may carry fields this version does not know: they are ignored.
    assert Problem.from_dict({**n.to_dict(), "future_field": 1}) == n
    n.check_fits(None)
    n.check_fits(n.tensor_bytes())
    with pytest.raises(ConfigError) as error:
        n.check_fits(n.tensor_bytes() - 1)
    assert error.value.field == "q_len" and "GiB" in str(error.value)


def test_kernel_config_round_trip_and_summary() -> None:
    c = KernelConfig(tile_m=128, tile_n=32, mask="window", window=256, k_split=False, occupancy=2)
    assert KernelConfig.from_dict(c.to_dict()) == c
    assert c.causal and not KernelConfig().causal
    assert c.summary() == "128×32 window 256 fast-math remap occ 2"
    # The kernel's defaults: fast math, the K-loop split and remap on, everything else off.
    assert KernelConfig().summary() == "64×64 none fast-math k-split remap"
    assert KernelConfig(**PLAIN).summary() == "64×64 none"
    poly = KernelConfig(tile_n=128, poly_exp2_cols=16, **PLAIN | {"k_split": True})
    assert KernelConfig.from_dict(poly.to_dict()) == poly
    assert poly.summary() == "64×128 none k-split poly 16"
    launch = KernelConfig(k_latency=3, v_latency=6, store_tma=False, **PLAIN)
    assert launch.summary() == "64×64 none lat 3/6 stg"
    piped = KernelConfig(pipeline=True, **PLAIN | {"k_split": True})
    assert piped.summary() == "64×64 none k-split pipe"
    # Columns of exported CSVs keep their order; the knobs added since come last.
    assert list(KernelConfig().to_dict())[:14] == [
        "tile_m", "tile_n", "fast_math", "k_split", "remap", "mask", "window", "autotune",
        "occupancy", "num_worker_warps", "poly_exp2_cols", "num_ctas", "persistent", "k_unroll",
    ]  # fmt: skip


def test_poly_exp2_columns_follow_the_key_tile_and_need_the_split() -> None:
    assert KernelConfig(tile_n=256, k_split=True, poly_exp2_cols=128).poly_exp2_cols == 128
    with pytest.raises(ConfigError, match=r"poly_exp2_cols=128.*expected one of 0, 4, 8"):
        KernelConfig(tile_n=64, k_split=True, poly_exp2_cols=128)
    with pytest.raises(ConfigError, match=r"poly_exp2_cols=16.*needs the K-loop split"):
        KernelConfig(tile_n=128, k_split=False, poly_exp2_cols=16)
    # Runs stored before the knob existed load with it off.
    old = {k: v for k, v in KernelConfig().to_dict().items() if k != "poly_exp2_cols"}
    assert KernelConfig.from_dict(old).poly_exp2_cols == 0


def test_cluster_ctas_take_a_power_of_two_up_to_16() -> None:
    for ctas in (1, 2, 4, 8, 16):
        assert KernelConfig(num_ctas=ctas).num_ctas == ctas
    assert KernelConfig().num_ctas is None  # the compiler's choice
    for bad in (3, 0, -2, 32):
        with pytest.raises(ConfigError, match=r"^num_ctas=.*expected one of 1, 2, 4, 8, 16$"):
            KernelConfig(num_ctas=bad)
    with pytest.raises(ConfigError, match=r"^num_ctas=True.*expected a whole number$"):
        KernelConfig(num_ctas=True)
    cluster = KernelConfig(tile_m=128, tile_n=128, mask="causal", occupancy=2, num_ctas=2, **PLAIN)
    assert KernelConfig.from_dict(cluster.to_dict()) == cluster
    assert cluster.summary() == "128×128 causal occ 2 cluster 2"
    assert "cluster" not in KernelConfig(occupancy=2).summary()
    # Runs stored before the knob existed load with it unset.
    old = {k: v for k, v in cluster.to_dict().items() if k != "num_ctas"}
    assert KernelConfig.from_dict(old) == KernelConfig(
        tile_m=128, tile_n=128, mask="causal", occupancy=2, **PLAIN
    )


def test_persistent_grid_is_for_no_mask_or_causal_without_clusters() -> None:
    grid = KernelConfig(tile_m=128, tile_n=128, num_worker_warps=8, persistent=True)
    assert grid.summary() == "128×128 none fast-math k-split remap 8 warps persistent"
    assert KernelConfig.from_dict(grid.to_dict()) == grid
    assert "persistent" not in KernelConfig().summary()
    causal = KernelConfig(tile_m=128, tile_n=128, mask="causal", persistent=True, **PLAIN)
    assert causal.summary() == "128×128 causal persistent"
    with pytest.raises(ConfigError, match=r"^persistent=.*mask none or causal \(got window\)"):
        KernelConfig(mask="window", window=64, persistent=True)
    with pytest.raises(ConfigError, match=r"^persistent=.*does not run as clusters"):
        KernelConfig(num_ctas=2, occupancy=2, persistent=True)
    with pytest.raises(ConfigError, match=r"^persistent=.*no software pipeline"):
        KernelConfig(pipeline=True, persistent=True)
    assert KernelConfig(num_ctas=1, persistent=True).persistent  # a cluster of one is no cluster
    with pytest.raises(ConfigError, match=r"^persistent=.*expected true or false"):
        KernelConfig(persistent=1)
    # Runs stored before the knob existed load with it off.
    old = {k: v for k, v in grid.to_dict().items() if k != "persistent"}
    assert KernelConfig.from_dict(old).persistent is False


def test_key_blocks_in_pairs_are_for_the_persistent_grid() -> None:
    pairs = KernelConfig(tile_m=128, tile_n=128, persistent=True, k_unroll=2, fast_math=False)
    assert pairs.summary() == "128×128 none k-split remap persistent k-unroll 2"
    assert KernelConfig.from_dict(pairs.to_dict()) == pairs
    with pytest.raises(ConfigError, match=r"^k_unroll=.*persistent grid only"):
        KernelConfig(k_unroll=2)
    with pytest.raises(ConfigError, match=r"^k_unroll=.*mask none only \(got causal\)"):
        KernelConfig(mask="causal", persistent=True, k_unroll=2)
    for bad in (3, 0):
        with pytest.raises(ConfigError, match=r"^k_unroll=.*expected one of 1, 2"):
            KernelConfig(persistent=True, k_unroll=bad)
    with pytest.raises(ConfigError, match=r"^k_unroll=True.*expected a whole number"):
        KernelConfig(persistent=True, k_unroll=True)
    # Runs stored before the knob existed take one key block an iteration.
    old = {k: v for k, v in pairs.to_dict().items() if k != "k_unroll"}
    assert KernelConfig.from_dict(old).k_unroll == 1


BAD_PROBLEM = {
    "batch": st.one_of(st.integers(max_value=0), st.integers(4097, 10**9), st.just(True)),
    "heads": st.one_of(st.integers(max_value=0), st.integers(1025, 10**9), st.just(2.0)),
    "kv_heads": st.integers(max_value=0),
    "q_len": st.one_of(st.integers(max_value=0), st.integers(MAX_SEQ_LEN + 1, 10**9)),
    "k_len": st.one_of(st.integers(max_value=0), st.integers(MAX_SEQ_LEN + 1, 10**9)),
    "head_dim": st.integers(-5, 1000).filter(lambda d: d not in HEAD_DIMS),
    "dtype": st.text(max_size=12).filter(lambda t: t not in ("float16", "bfloat16")),
    "input_pos": st.one_of(st.integers(max_value=-1), st.integers(MAX_SEQ_LEN + 1, 10**9)),
}

BAD_CONFIG = {
    "tile_m": st.integers(-5, 1000).filter(lambda t: t not in TILE_SIZES),
    "tile_n": st.one_of(st.integers(-5, 1000).filter(lambda t: t not in TILE_SIZES), st.just("64")),
    "fast_math": st.sampled_from([1, 0, "yes", None]),
    "k_split": st.sampled_from([1, "true"]),
    "remap": st.sampled_from([0, "no"]),
    "autotune": st.sampled_from([1, None]),
    "mask": st.text(max_size=10).filter(lambda t: t not in ("none", "causal", "window")),
    "occupancy": st.one_of(st.integers(max_value=0), st.integers(33, 1000), st.just(True)),
    "num_worker_warps": st.integers(-3, 100).filter(lambda w: w not in WORKER_WARPS),
    # the default 64-column key tile allows 4, 8, 16, 32 (and 0, off)
    "poly_exp2_cols": st.one_of(
        st.integers(-5, 300).filter(lambda c: c not in (0, 4, 8, 16, 32)), st.just(True)
    ),
    "num_ctas": st.one_of(
        st.integers(-3, 100).filter(lambda c: c not in CLUSTER_CTAS), st.just(True)
    ),
    "k_unroll": st.one_of(st.integers(-3, 10).filter(lambda u: u not in (1, 2)), st.just(None)),
    "k_latency": st.one_of(st.integers(max_value=0), st.integers(11, 100), st.just(True)),
    "v_latency": st.one_of(st.integers(max_value=0), st.integers(11, 100), st.just(2.0)),
    "pipeline": st.sampled_from([1, "on", None]),
    "persistent": st.sampled_from([1, "yes"]),
    "store_tma": st.sampled_from([0, "off"]),
    "q_halves": st.sampled_from([1, "on"]),
    # powers of two up to 128, or None (auto): 3, 0, 256, a bool and the word are refused
    "kv_splits": st.one_of(
        st.integers(-3, 300).filter(lambda s: s not in (1, 2, 4, 8, 16, 32, 64, 128)),
        st.sampled_from([True, "auto", 2.0]),
    ),
    "pack_gqa": st.sampled_from([1, "yes", None]),
    "bnhd_inputs": st.sampled_from([1, "bnhd"]),
    "one_shot": st.sampled_from([0, "once"]),
}


def test_every_knob_of_the_registry_is_a_field_with_its_default() -> None:
    fields = KernelConfig().to_dict()
    assert {name: fields[name] for name in KNOBS} == {k.name: k.default for k in KNOBS.values()}
    assert set(BAD_CONFIG) >= set(KNOBS)  # every knob is in the bad-value walk below


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_every_bad_problem_field_is_named(data: st.DataObject) -> None:
    field = data.draw(st.sampled_from(sorted(BAD_PROBLEM)))
    value = data.draw(BAD_PROBLEM[field])
    kwargs = {"heads": 4, "kv_heads": 2, "q_len": 64, "k_len": 64, field: value}
    with pytest.raises(ConfigError) as error:
        Problem(**kwargs)
    assert error.value.field == field
    assert str(error.value).startswith(f"{field}=")


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_every_bad_config_field_is_named(data: st.DataObject) -> None:
    field = data.draw(st.sampled_from(sorted(BAD_CONFIG)))
    value = data.draw(BAD_CONFIG[field])
    with pytest.raises(ConfigError) as error:
        KernelConfig(**{field: value})
    assert error.value.field == field


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(mask="window"), "window"),
        (dict(mask="window", window=0), "window"),
        (dict(mask="causal", window=8), "window"),
        (dict(window=8), "window"),
        (dict(heads=8, kv_heads=3), "kv_heads"),
    ],
)
def test_combinations_are_checked(kwargs: dict, field: str) -> None:
    problem_keys = {"heads", "kv_heads"}
    with pytest.raises(ConfigError) as error:
        if problem_keys & set(kwargs):
            Problem(**kwargs)
        else:
            KernelConfig(**kwargs)
    assert error.value.field == field


@given(st.integers(0, 64), st.lists(st.integers(1, 4096), min_size=1, max_size=6, unique=True))
def test_sweep_spec_points(input_pos: int, seq_lens: list[int]) -> None:
    spec = SweepSpec(Problem(heads=2, input_pos=input_pos), tuple(seq_lens), KernelConfig())
    problems = spec.problems()
    assert [p.q_len for p in problems] == seq_lens
    assert all(p.k_len == p.q_len + input_pos for p in problems)


def test_sweep_spec_refuses_bad_points_up_front() -> None:
    with pytest.raises(ConfigError) as error:
        SweepSpec(Problem(), (), KernelConfig())
    assert error.value.field == "seq_lens"
    with pytest.raises(ConfigError) as error:
        # Every length is checked before anything runs: the last one is too long with the offset.
        SweepSpec(Problem(input_pos=10), (16, MAX_SEQ_LEN), KernelConfig())
    assert error.value.field == "k_len"
    with pytest.raises(ConfigError) as error:
        SweepSpec(Problem(), (16,), KernelConfig(), label="x" * 201)
    assert error.value.field == "label"
    with pytest.raises(ConfigError) as error:
        SweepSpec(Problem(), (16,), KernelConfig(), seed=-1)
    assert error.value.field == "seed"
