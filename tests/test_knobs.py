"""The knob registry (kernels.knobs): its values, rules, words, and the per-architecture rules
against the offline compiles they come from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernels import knobs

REPORT = Path(__file__).resolve().parents[1] / "bench" / "results" / "blackwell-offline.json"


def test_the_registry_is_complete_and_consistent() -> None:
    names = list(knobs.KNOBS)
    assert len(set(names)) == len(names)
    assert all(k.flag.startswith("--") for k in knobs.EXPOSED)
    assert len({k.flag for k in knobs.EXPOSED}) == len(knobs.EXPOSED)
    for knob in knobs.KNOBS.values():
        assert knob.default in knob.values, knob.name
        assert knob.help and knob.label, knob.name
        for narrower in knob.narrower.values():
            assert set(narrower) <= set(knob.values), knob.name
        if knob.pair:
            assert knobs.KNOBS[knob.pair].word is None and knob.pair_label, knob.name
    # The launch knobs are LaunchConfig's fields; the tuner sets the tunable ones and keeps the
    # rest as the caller has them.
    assert set(knobs.TUNABLE) | set(knobs.FIXED_IN_TUNING) == set(knobs.LAUNCH)
    assert "autotune" not in knobs.LAUNCH
    for rule in knobs.RULES:
        assert rule.field in knobs.KNOBS
        assert all(name in knobs.KNOBS or name == "mask" for name in rule.reads)
    for rule in knobs.ARCH_RULES:
        assert rule.refuses <= set(knobs.KNOBS[rule.field].values) and rule.source


def test_the_defaults_pass_every_check() -> None:
    for mask in ("none", "causal", "window"):
        assert knobs.violations(knobs.defaults(), mask, capability=knobs.CUTILE) == []
        knobs.check_launch(knobs.LAUNCH, mask)
        for name in knobs.KNOBS:
            assert knobs.refusal(name, knobs.KNOBS[name].default, {}, mask) is None


def test_a_refusal_names_the_knob_the_value_and_why() -> None:
    (found,) = knobs.violations({"tile_n": 64, "poly_exp2_cols": 128})
    assert (found.field, found.value) == ("poly_exp2_cols", 128)
    assert str(found) == (
        "poly_exp2_cols=128: expected one of 0, 4, 8, 16, 32 with tile_n 64 "
        "(0 or tile_n/16, /8, /4, /2)"
    )
    assert str(knobs.violations({"occupancy": 0})[0]).endswith("a whole number from 1 to 32")
    assert knobs.violations({"tile_m": 32}, capability=knobs.CUTILE)[0].reason == (
        "the cuTile kernel takes 64, 128, 256"
    )
    # Values first: a rule between knobs is only checked on sound values.
    assert [v.field for v in knobs.violations({"k_unroll": 3, "persistent": False})] == ["k_unroll"]
    with pytest.raises(ValueError, match=r"^persistent=True: .*window kernel"):
        knobs.check_launch({"persistent": True}, "window")
    knobs.check_launch({"persistent": True})  # the mask's rules only with a mask
    with pytest.raises(ValueError, match="unknown knob"):
        knobs.check_launch({"autotune": True})  # the workbench's own, not a launch knob


def test_a_row_applies_only_where_its_rule_holds() -> None:
    assert knobs.applies("k_unroll", {}) is not None  # needs the persistent grid
    assert knobs.applies("k_unroll", {"persistent": True}) is None
    assert "mask none only" in (knobs.applies("k_unroll", {"persistent": True}, "causal") or "")
    assert knobs.applies("persistent", {}, "window") is not None
    assert knobs.applies("poly_exp2_cols", {"k_split": False}) is not None
    assert knobs.applies("tile_m", {}, "window") is None


def test_with_autotune_the_tuned_knobs_are_nominal() -> None:
    on_sm120 = {"capability": knobs.CUTILE, "arch": "sm_120"}
    assert knobs.violations({"tile_m": 256}, **on_sm120)
    assert not knobs.violations({"tile_m": 256, "autotune": True}, **on_sm120)
    assert knobs.violations({"tile_m": 32, "autotune": True}) == []


def test_one_vocabulary_of_label_words() -> None:
    values = {
        **knobs.defaults(),
        "tile_m": 128,
        "occupancy": 2,
        "num_worker_warps": 8,
        "num_ctas": 2,
        "poly_exp2_cols": 16,
        "k_latency": 3,
        "pipeline": True,
        "store_tma": False,
        "persistent": True,
        "k_unroll": 2,
    }
    assert " ".join(knobs.words(values)) == (
        "128×64 fast-math k-split remap occ 2 8 warps poly 16 cluster 2 persistent k-unroll 2 "
        "lat 3/4 pipe stg"
    )
    assert knobs.words(knobs.defaults(), knobs.TUNABLE) == ["64×64"]


def _fits(record: dict) -> bool:
    return record["compiled"] and not record["problems"]


@pytest.mark.parametrize("rule", knobs.ARCH_RULES, ids=lambda r: f"{r.field}-{min(r.refuses)}")
def test_every_arch_rule_is_what_the_offline_compiles_found(rule: knobs.ArchRule) -> None:
    """Each value kept off an architecture was compiled for it (or for the architecture it
    compiles alike, sm_121 as sm_120) and never fit: a spill or a limit every time. A report
    in which one fits breaks this test, and the rule has to go."""
    records = json.loads(REPORT.read_text())["results"]
    tried = [
        r
        for r in records
        if r["arch"] in rule.archs and r["config"].get(rule.field) in rule.refuses
    ]
    assert tried, f"no compile for {rule.archs} with {rule.field} in {sorted(rule.refuses)}"
    assert not [r for r in tried if _fits(r)]
    # The same values do fit elsewhere: the rule is about the architecture, not the value.
    elsewhere = [
        r
        for r in records
        if r["arch"] not in rule.archs and r["config"].get(rule.field) in rule.refuses
    ]
    assert any(_fits(r) for r in elsewhere)


@pytest.mark.parametrize("arch", ["sm_120", "sm_121"])
@pytest.mark.parametrize("name", ["tile_m", "tile_n", "occupancy"])
def test_every_value_still_offered_on_sm_12x_has_a_clean_compile(arch: str, name: str) -> None:
    """The other side of the rules: each tile size and occupancy hint the cuTile kernel is
    still offered on sm_120/sm_121 was compiled for it and fit at least once (tile_n 256:
    64x256 at D = 64, docs/blackwell.md), so nothing is offered there without evidence."""
    records = json.loads(REPORT.read_text())["results"]
    fitting = {r["config"].get(name) for r in records if r["arch"] == arch and _fits(r)}
    offered = knobs.offered(name, capability=knobs.CUTILE, arch=arch)
    assert [v for v in offered if v not in fitting] == []


def test_the_architectures_refuse_only_their_values() -> None:
    assert knobs.offered("tile_m", capability=knobs.CUTILE, arch="sm_120") == (64, 128)
    assert knobs.offered("tile_m", capability=knobs.CUTILE, arch="sm_90") == (64, 128, 256)
    assert knobs.offered("tile_m", capability=knobs.CUTILE) == (64, 128, 256)
    assert knobs.offered("tile_m") == (16, 32, 64, 128, 256)  # the CPU reference
    assert knobs.offered("occupancy", capability=knobs.CUTILE, arch="sm_121") == (None, 1)
    # The polynomial's columns the kernel's key tiles allow (1 and 2 need 16- or 32-key tiles).
    assert knobs.offered("poly_exp2_cols", capability=knobs.CUTILE) == (0, 4, 8, 16, 32, 64, 128)
    refused = knobs.refusal("tile_m", 256, {}, capability=knobs.CUTILE, arch="sm_120")
    assert refused and refused.reason.startswith("not on sm_120: 256-row tiles spill")
    assert refused.reason.endswith("see bench/results/blackwell-offline.md")
