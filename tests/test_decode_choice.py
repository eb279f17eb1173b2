"""The kernel's front door takes the decode form by itself on problems bound by reading K and V
(issue #52): what ``attention()``/``prepare()`` launch when the caller leaves the form out, what
``autotune()`` searches there, and that a user's own choice of form stands."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kernels import knobs
from kernels.decode_choice import (
    decode_bound,
    decode_candidates,
    decode_tile_n,
    front_door_knobs,
)
from kernels.schedule import NOMINAL_SM_SLOTS, layout_of, schedule_of

PRESETS = Path(__file__).resolve().parents[1] / "workbench" / "presets" / "decode.json"


class Shape:
    """A problem as the schedule reads it (kernels.schedule.ProblemShape)."""

    def __init__(self, batch: int, heads: int, kv_heads: int, q_len: int, k_len: int) -> None:
        self.batch, self.heads, self.kv_heads = batch, heads, kv_heads
        self.q_len, self.k_len, self.input_pos = q_len, k_len, k_len - q_len
        self.group_size = heads // kv_heads


def launched(given: dict, shape: Shape, head_dim: int, mask: str) -> dict:
    """Every launch knob of a plain call: the front door's choice over the registry defaults."""
    chosen = front_door_knobs(given, shape.group_size, shape.q_len, shape.k_len, head_dim, mask)
    return {**knobs.defaults(), **chosen}


# The three decode shapes (GQA 32/8, D 128, one new token) and the ones beyond them.
DECODE_SHAPES = [(1, 32768), (8, 8192), (32, 4096), (64, 1024), (1, 131072)]


@pytest.mark.parametrize(("batch", "k_len"), DECODE_SHAPES, ids=lambda x: str(x))
@pytest.mark.parametrize("mask", ["none", "causal"])
def test_a_plain_call_on_a_decode_shape_packs_heads_and_splits_by_the_model(
    batch: int, k_len: int, mask: str
) -> None:
    shape = Shape(batch, 32, 8, 1, k_len)
    values = launched({}, shape, 128, mask)
    assert values["pack_gqa"] is True and values["kv_splits"] is None
    assert values["tile_n"] == 128
    sched = schedule_of(values, shape, mask, None)
    assert sched.pack_gqa and sched.rows == 4
    if batch == 1:
        # 8 tiles on 132 SMs: the model splits the 256 key blocks.
        assert layout_of(values, shape, NOMINAL_SM_SLOTS).splits > 1


def test_the_b1_32k_decode_runs_a_grid_that_covers_the_gpu() -> None:
    shape = Shape(1, 32, 8, 1, 32768)
    plain = schedule_of(launched({}, shape, 128, "none"), shape, "none", None)
    # The tile form ran 32 CTAs (one a query head, 4x the K/V reads); the decode form runs one
    # tile a KV head, its key range split until the grid covers the SMs.
    assert plain.n_q_blocks == 1
    assert 8 * plain.n_splits >= NOMINAL_SM_SLOTS // 2


@pytest.mark.parametrize(
    ("q_len", "k_len", "mask", "why"),
    [
        (4096, 4096, "causal", "prefill"),
        (1, 256, "none", "a short key range"),
        (1, 32768, "window", "a sliding window"),
        (64, 32768, "causal", "512 rows per KV head"),
    ],
)
def test_a_problem_not_bound_by_kv_reads_keeps_the_tile_form(q_len, k_len, mask, why) -> None:
    shape = Shape(1, 32, 8, q_len, k_len)
    values = launched({}, shape, 128, mask)
    assert not decode_bound(4, q_len, k_len, mask), why
    assert values["pack_gqa"] is False and values["kv_splits"] == 1


@pytest.mark.parametrize(
    "given",
    [{"kv_splits": 1}, {"pack_gqa": False}, {"kv_splits": 4}, {"persistent": True}],
    ids=lambda g: json.dumps(g),
)
def test_a_form_the_caller_chose_stands(given: dict) -> None:
    shape = Shape(1, 32, 8, 1, 32768)
    values = launched(given, shape, 128, "none")
    for name, value in given.items():
        assert values[name] == value
    if "pack_gqa" in given or "kv_splits" in given or "persistent" in given:
        assert values["tile_n"] == knobs.KNOBS["tile_n"].default


def test_the_callers_other_knobs_ride_along_with_the_decode_form() -> None:
    shape = Shape(8, 32, 8, 1, 8192)
    values = launched({"k_latency": 4, "v_latency": 8, "tile_n": 64}, shape, 128, "none")
    assert values["pack_gqa"] is True and values["tile_n"] == 64 and values["k_latency"] == 4


def test_the_decode_block_width_is_the_presets_at_every_head_dim_they_list() -> None:
    by_dim = json.loads(PRESETS.read_text())["kernel"]["by_head_dim"]
    preset_knobs = json.loads(PRESETS.read_text())["kernel"]["knobs"]
    for dim, values in by_dim.items():
        assert decode_tile_n(int(dim)) == values["tile_n"], dim
    assert {k: v for k, v in decode_candidates(1, 8, 4, 1, 32768, 128, 132)[0].items()
            if k in preset_knobs} == preset_knobs  # fmt: skip


@pytest.mark.parametrize(("batch", "k_len"), DECODE_SHAPES, ids=lambda x: str(x))
def test_the_tuners_decode_space_is_small_valid_and_seeded_by_the_model(
    batch: int, k_len: int
) -> None:
    rng = np.random.default_rng()
    slots = int(rng.choice([78, 114, 132, 144]))  # whatever the GPU has
    print("sm slots", slots)
    space = decode_candidates(batch, 8, 4, 1, k_len, 128, slots)
    assert 2 <= len(space) <= 3  # the model and its neighbours: a cold class compiles in seconds
    assert space[0]["kv_splits"] is None and space[0]["tile_n"] == 128  # the preset's config
    for config in space:
        assert config["pack_gqa"] is True
        full = {**knobs.defaults(), **config}
        assert not knobs.launch_violations({n: full[n] for n in knobs.LAUNCH}, "none"), config
    counts = [c["kv_splits"] for c in space if c["kv_splits"] is not None]
    model = layout_of(space[0], Shape(batch, 32, 8, 1, k_len), slots).splits
    for count in counts:  # the explicit counts are the model's neighbours
        assert count != model and ((count <= 2 * model and 2 * count >= model) or model == 1)
    assert len({json.dumps(c, sort_keys=True) for c in space}) == len(space)


def test_the_workbench_leaves_the_decode_form_to_the_tuner_unless_a_preset_sets_it() -> None:
    from workbench.backends.cutile import tuning_fixed
    from workbench.config import KernelConfig

    plain = tuning_fixed(KernelConfig(**{knobs.TUNER.name: True}))
    assert "pack_gqa" not in plain and "kv_splits" not in plain
    preset = tuning_fixed(
        KernelConfig(**{knobs.TUNER.name: True, "pack_gqa": True, "kv_splits": None})
    )
    assert preset["pack_gqa"] is True and preset["kv_splits"] is None


def test_decode_classes_that_split_differently_are_tuned_apart() -> None:
    pytest.importorskip("cuda.tile", reason="cuda-tile is not installed")
    from kernels.cutile.tuner import decode_key

    # B=1 and B=8 at 8 KV heads, 8k keys: the model splits 16 and 2 ways apart.
    assert decode_key(1, 8, 4) != decode_key(8, 8, 4)
    assert decode_key(5, 8, 4) == decode_key(8, 8, 4)  # a power-of-two bucket of slices
    assert decode_key(8, 8, 4) != decode_key(8, 8, 64)


def test_a_decode_class_compiles_each_distinct_kernel_once_before_tuning() -> None:
    # The tuner's precompile (kernels.cutile.precompile): auto and 4 key splits of B8 k8k
    # launch one split kernel (the split count is a launch argument), so of the candidates'
    # five calls four are distinct compiles; every call is covered by exactly one task.
    pytest.importorskip("cuda.tile")
    from kernels.cutile.config import LaunchConfig
    from kernels.cutile.precompile import distinct_kernels, job, kernel_key, planned_calls
    from kernels.cutile.problem import Problem

    p = Problem(8, 32, 8, 1, 8192, 128, "bfloat16")
    where = dict(mask="causal", input_pos=8191, window=None, sm_count=132, arch="sm_90")
    jobs = [
        job(p, LaunchConfig.of(c), **where) for c in decode_candidates(8, 8, 4, 1, 8192, 128, 132)
    ]
    every = {kernel_key(call) for spec in jobs for call in planned_calls(spec)}
    tasks = distinct_kernels(jobs)
    keys = [kernel_key(planned_calls(t)[t["calls"][0]]) for t in tasks]
    assert all(len(t["calls"]) == 1 for t in tasks)
    assert sorted(keys) == sorted(every) and len(keys) == len(set(keys))
    calls = sum(len(planned_calls(spec)) for spec in jobs)
    assert (len(jobs), calls, len(tasks)) == (3, 5, 4)
