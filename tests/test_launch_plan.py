"""From a validated config and a problem to the launch plan (issue #53 item 2): every auto value
resolved in kernels.cutile.plan.plan_launch, the kernel calls read only the plan, a plain call on
a decode shape plans the decode form, and the plan a point ran is stored, shown and exported."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kernels import knobs
from kernels.cutile.config import LaunchConfig
from kernels.cutile.plan import LaunchPlan, call_config, default_scale, plan_launch
from kernels.cutile.problem import Problem as KernelProblem
from workbench.backends.base import PointResult
from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.store import Store
from workbench.store import schema as store_schema

FORMS = ("tile", "persistent", "causal-persistent", "decode")


def test_the_launch_config_is_the_registrys_launch_knobs_in_order() -> None:
    fields = dataclasses.fields(LaunchConfig)
    assert [f.name for f in fields] == list(knobs.LAUNCH)
    for f in fields:
        knob = knobs.KNOBS[f.name]
        assert f.default == knob.default, f.name
        optional = " | None" if None in knob.values else ""
        assert f.type == f"{knob.kind.__name__}{optional}", f.name
    assert LaunchConfig().values() == knobs.LAUNCH


def _random_config(rng: np.random.Generator, mask: str) -> LaunchConfig:
    """A config the kernel launches, its knobs drawn from their offered values (auto among
    them), redrawn until the kernel's rules take it."""
    names = [n for n in knobs.LAUNCH if n not in ("poly_exp2_cols",)]
    while True:
        values: dict[str, Any] = {}
        for name in names:
            offered = knobs.offered(name, capability=knobs.CUTILE)
            values[name] = offered[int(rng.integers(len(offered)))]
        if not knobs.launch_violations(values, mask):
            return LaunchConfig.of(values)


def _assert_resolved(plan: LaunchPlan) -> None:
    """Nothing in the plan is left for a later step to decide."""
    assert plan.form in FORMS
    assert all(isinstance(n, int) and n >= 1 for n in plan.grid)
    assert isinstance(plan.kv_splits, int) and plan.kv_splits >= 1
    assert isinstance(plan.scale, float) and plan.scale > 0
    assert plan.tile_m in (16, 32, 64, 128, 256) and plan.tile_n in knobs.KERNEL_TILES
    # The head dim's tile: power-of-two column chunks, largest first, that the tile sums.
    for chunks, width in ((plan.d_chunks, plan.tile_d), (plan.dv_chunks, plan.tile_dv)):
        assert chunks and sum(chunks) == width and list(chunks) == sorted(chunks, reverse=True)
        assert all(c >= 16 and c & (c - 1) == 0 for c in chunks)
        assert len(chunks) == 1 or plan.form in ("tile", "persistent", "causal-persistent")
    assert (plan.kv_splits > 1) == (plan.combine is not None)
    if plan.form != "decode":
        assert plan.kv_splits == 1 and not plan.pack_gqa
    else:
        assert plan.grid[2] == plan.kv_splits
        assert plan.kv_splits * plan.split_blocks >= plan.n_k_blocks
        assert (plan.kv_splits - 1) * plan.split_blocks < plan.n_k_blocks


@pytest.mark.parametrize("mask", ["none", "causal"])
def test_every_auto_value_is_resolved_in_the_plan(rng: np.random.Generator, mask: str) -> None:
    seed = int(rng.integers(2**31))
    print(f"seed {seed}")
    draw = np.random.default_rng(seed)
    for _ in range(60):
        config = _random_config(draw, mask)
        heads_kv = int(draw.choice([1, 2, 8]))
        group = int(draw.choice([1, 4]))
        q_len = int(draw.choice([1, 3, 16, 200, 1024]))
        k_len = q_len + int(draw.integers(0, 40000))
        p = KernelProblem(int(draw.integers(1, 5)), heads_kv * group, heads_kv, q_len, k_len,
                          int(draw.choice([64, 80, 128])), "bfloat16")  # fmt: skip
        sms = int(draw.choice([8, 132]))
        plan = plan_launch(
            config, p, mask=mask, input_pos=k_len - q_len, sm_count=lambda sms=sms: sms
        )
        _assert_resolved(plan)
        assert plan.scale == pytest.approx(default_scale(p.head_dim))
        if plan.form in ("persistent", "causal-persistent"):
            assert plan.sm_count == sms and plan.programs <= sms * (config.occupancy or 1)
        if config.kv_splits is None and plan.form == "decode":
            assert plan.sm_count == sms  # the auto count was resolved on this GPU's SMs


def never() -> int:
    raise AssertionError("one CTA per tile and a given split count need no SM count")


def test_the_sm_count_is_asked_only_where_the_plan_needs_it() -> None:
    p = KernelProblem(1, 4, 2, 2048, 2048, 128, "float16")

    plan = plan_launch(LaunchConfig(kv_splits=4, pack_gqa=True), p, sm_count=never)
    assert plan.form == "decode" and plan.sm_count is None and plan.kv_splits == 4
    plan = plan_launch(LaunchConfig(), p, mask="causal", sm_count=never)
    assert plan.form == "tile" and plan.grid == (32 * 4, 1, 1) and plan.sm_count is None


@pytest.mark.parametrize(("batch", "k_len"), [(1, 32768), (8, 8192), (1, 131072)])
def test_a_plain_call_on_a_decode_shape_plans_the_decode_form(batch: int, k_len: int) -> None:
    # Llama-style decode: 32 query heads on 8 KV heads, one new token, D 128, on 132 SMs.
    p = KernelProblem(batch, 32, 8, 1, k_len, 128, "bfloat16")
    config = call_config({}, p, "causal")
    assert config.kv_splits is None and config.pack_gqa  # the front door's decode presets
    plan = plan_launch(config, p, mask="causal", input_pos=k_len - 1, sm_count=lambda: 132)
    _assert_resolved(plan)
    assert (plan.form, plan.pack_gqa, plan.rows, plan.tile_m) == ("decode", True, 4, 16)
    assert plan.heads == 8 and plan.tile_n == 128 and plan.sm_count == 132
    tiles = batch * 8  # one 16-row tile per (batch, KV head)
    assert plan.grid[:2] == (1, tiles)
    assert tiles * plan.kv_splits <= 132 or plan.kv_splits == 1
    if batch == 1:
        assert plan.kv_splits > 1 and plan.combine is not None
    # A prefill shape keeps the tile form; a caller's own choice of form stands.
    prefill = KernelProblem(2, 32, 8, 2048, 2048, 128, "bfloat16")
    plan = plan_launch(call_config({}, prefill, "causal"), prefill, mask="causal", sm_count=never)
    assert plan.form == "tile" and plan.kv_splits == 1
    own = call_config({"kv_splits": 1}, p, "causal")
    plan = plan_launch(own, p, mask="causal", input_pos=k_len - 1, sm_count=lambda: 132)
    assert plan.form == "tile" and not own.pack_gqa


def test_the_kernel_calls_read_their_values_from_the_plan(rng: np.random.Generator) -> None:
    pytest.importorskip("cuda.tile")
    from kernels.cutile import forms

    seed = int(rng.integers(2**31))
    print(f"seed {seed}")
    draw = np.random.default_rng(seed)
    for _ in range(20):
        mask = str(draw.choice(["none", "causal"]))
        config = _random_config(draw, mask)
        q_len = int(draw.choice([1, 4, 300]))
        p = KernelProblem(2, 8, 2, q_len, q_len + int(draw.integers(0, 5000)), 96, "float16")
        plan = plan_launch(config, p, mask=mask, input_pos=p.k_len - q_len, sm_count=lambda: 132)
        call = forms.kernel_calls(plan, p)
        assert (call.form, call.grid, call.hints) == (plan.form, plan.grid, plan.hints())
        assert call.value("TILE_M") == plan.tile_m and call.value("TILE_N") == plan.tile_n
        # D 96: 64 + 32 columns in the prefill forms, one padded 128 in the decode form.
        want = (128, True) if plan.form == "decode" else (96, False)
        assert (call.value("TILE_D"), call.value("D_PADDED")) == want
        if plan.form == "decode":
            assert call.value("split_blocks") == plan.split_blocks
            assert call.value("SPLIT") is (plan.kv_splits > 1)
        if plan.combine is not None:
            assert call.then is not None and call.then.grid == plan.combine.grid
            assert call.then.value("TILE_S") == plan.combine.tile_s
        else:
            assert call.then is None


def test_a_plan_round_trips_through_its_dict() -> None:
    p = KernelProblem(1, 32, 8, 1, 32768, 128, "bfloat16")
    plan = plan_launch(call_config({}, p, "none"), p, sm_count=lambda: 132)
    again = LaunchPlan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again == plan and again.combine is not None


# --------------------------------------------------------------------------------------------
# The store, show and the CSV
# --------------------------------------------------------------------------------------------


def _store_point_with_plan(
    db_path: Path, measure: Callable[..., PointResult], plan: LaunchPlan
) -> int:
    """A run with two points, the first carrying ``plan`` as the cuTile backend gives it (the
    reference backend measured them: no GPU here)."""
    problem = Problem(batch=1, heads=4, kv_heads=1, head_dim=32, input_pos=0)
    spec = SweepSpec(problem, (16, 32), KernelConfig(tile_m=16, tile_n=32), label="planned")
    with Store(db_path) as store:
        run_id = store.create_run(spec, {"hostname": "here"})
        for i, point in enumerate(spec.problems()):
            result = measure(point, spec.config)
            if i == 0:
                result = dataclasses.replace(result, plan=plan.to_dict())
            store.add_point(run_id, result)
        store.finish_run(run_id, "complete")
    return run_id


def test_the_plan_a_point_ran_is_stored_shown_and_exported(
    run_cli: Callable[..., Any],
    db_path: Path,
    tmp_path: Path,
    measure: Callable[..., PointResult],
) -> None:
    p = KernelProblem(1, 32, 8, 1, 32768, 128, "bfloat16")
    plan = plan_launch(call_config({}, p, "none"), p, sm_count=lambda: 132)
    run_id = _store_point_with_plan(db_path, measure, plan)
    with Store(db_path) as store:
        first, second = store.points(run_id)
    assert first.plan == json.loads(json.dumps(plan.to_dict())) and second.plan is None

    shown = run_cli("show", str(run_id))
    assert shown.code == 0
    ran = [line for line in shown.out.splitlines() if line.startswith("  ran ")]
    assert ran == [
        f"  ran      N 16: decode · 16×128 tiles · {plan.kv_splits} KV splits of "
        f"{plan.split_blocks} key blocks · heads packed · grid 1×8×{plan.kv_splits} · combine "
        f"grid {'×'.join(map(str, plan.combine.grid))}"  # type: ignore[union-attr]
    ]
    data = json.loads(run_cli("show", str(run_id), "--json").out)
    assert data["points"][0]["plan"]["kv_splits"] == plan.kv_splits
    assert data["points"][1]["plan"] is None

    target = tmp_path / "points.csv"
    assert run_cli("export", "--csv", str(target)).code == 0
    rows = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"))))
    columns = list(rows[0])
    at = columns.index("plan_form")  # after the older columns, before the ragged batch's
    assert columns[at : at + 7] == [
        "plan_form", "plan_tile_m", "plan_tile_n", "plan_kv_splits", "plan_pack_gqa",
        "plan_grid", "plan",
    ]  # fmt: skip
    assert columns.index("head_dim_v") < at
    assert (rows[0]["plan_form"], rows[0]["plan_kv_splits"]) == ("decode", str(plan.kv_splits))
    assert rows[0]["plan_grid"] == "x".join(map(str, plan.grid))
    assert json.loads(rows[0]["plan"]) == json.loads(json.dumps(plan.to_dict()))
    assert rows[1]["plan_form"] == "" and rows[1]["plan"] == ""


def test_a_database_from_before_plans_opens_read_only_and_is_left_as_it_was(
    run_cli: Callable[..., Any], db_path: Path, measure: Callable[..., PointResult]
) -> None:
    problem = Problem(batch=1, heads=2, kv_heads=1, head_dim=32, input_pos=0)
    spec = SweepSpec(problem, (16,), KernelConfig(tile_m=16, tile_n=32), label="older")
    with Store(db_path) as store:
        run_id = store.create_run(spec, {})
        store.add_point(run_id, measure(spec.problems()[0], spec.config))
        store.finish_run(run_id, "complete")
    # Take the file back to the schema before plans (5): the column gone, the version 5.
    conn = sqlite3.connect(db_path)
    conn.execute("ALTER TABLE points DROP COLUMN plan")
    conn.execute(f"PRAGMA user_version = {store_schema.SCHEMA_VERSION - 1}")
    conn.commit()
    conn.close()
    before = db_path.read_bytes()

    shown = run_cli("show", str(run_id))
    assert shown.code == 0 and "older" in shown.out and "  ran " not in shown.out
    assert json.loads(run_cli("show", str(run_id), "--json").out)["points"][0]["plan"] is None
    assert db_path.read_bytes() == before  # a reading command migrates nothing in the file
