"""The shared timing harness and the float64 correctness check every backend goes through."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from kernels.reference import flash_attention
from workbench.backends.base import host_inputs, round_to_dtype
from workbench.config import ConfigError, KernelConfig, Problem
from workbench.measure.accuracy import MAX_ROWS, MAX_SLICES, TOLERANCE, check_output, sample_indices
from workbench.measure.timing import (
    CpuSampler,
    TimingSettings,
    TimingStats,
    measure,
    measure_interleaved,
)


def test_stats_summarise_the_raw_samples(rng: np.random.Generator) -> None:
    samples = tuple(float(x) for x in rng.gamma(2.0, 1.5, size=int(rng.integers(1, 200))))
    stats = TimingStats(samples)
    assert stats.samples_ms == samples  # the raw samples are kept
    assert stats.count == len(samples)
    assert stats.median_ms == pytest.approx(float(np.median(samples)))
    assert stats.p20_ms == pytest.approx(float(np.percentile(samples, 20)))
    assert stats.p80_ms == pytest.approx(float(np.percentile(samples, 80)))
    assert stats.min_ms == min(samples)
    assert stats.min_ms <= stats.p20_ms <= stats.median_ms <= stats.p80_ms
    with pytest.raises(ValueError):
        TimingStats(())


class ListSampler:
    """A sampler whose turns 'take' values from a list, ``per_turn`` at a time."""

    def __init__(self, values: list[float], per_turn: int = 1, method: str = "graph") -> None:
        self.values = list(values)
        self.per_turn = per_turn
        self.method = method
        self.turns = 0

    def turn(self) -> list[float]:
        self.turns += 1
        taken, self.values = self.values[: self.per_turn], self.values[self.per_turn :]
        return taken


def test_measure_takes_turns_until_the_counts_are_met() -> None:
    calls, between = [], []

    def launch() -> None:
        calls.append(1)

    stats = measure(
        CpuSampler(launch, between=lambda: between.append(1)),
        TimingSettings(warmup=3, min_samples=5, min_time_s=0.0),
    )
    assert stats.count == 5 and stats.method == "cpu"
    assert len(calls) == 5  # warm-up is the backend's (open_point), not the sampler's
    assert len(between) == 5  # the between-hook (an L2 flush) runs before every sample
    capped = measure(
        CpuSampler(lambda: None),
        TimingSettings(warmup=0, min_samples=1, max_samples=7, min_time_s=60),
    )
    assert capped.count == 7  # max_samples stops a min_time that would take a minute


def test_measure_keeps_the_sampler_values_and_method() -> None:
    values = [5.0, 1.0, 3.0, 2.0, 4.0, 9.0]
    sampler = ListSampler(values, per_turn=2, method="events")
    stats = measure(sampler, TimingSettings(warmup=0, min_samples=5, min_time_s=0))
    assert stats.samples_ms == tuple(values)  # three whole turns: 5 samples need the third
    assert stats.method == "events"
    assert stats.median_ms == 3.5 and stats.min_ms == 1.0


def test_interleaved_rounds_are_balanced_and_every_sampler_gets_enough() -> None:
    order: list[int] = []

    class Recording(ListSampler):
        def __init__(self, index: int) -> None:
            super().__init__([float(index + 1)] * 1000, per_turn=3)
            self.index = index

        def turn(self) -> list[float]:
            order.append(self.index)
            return super().turn()

    samplers = [Recording(i) for i in range(4)]
    settings = [
        TimingSettings(warmup=0, min_samples=s, min_time_s=0, rounds=12) for s in (3, 3, 36, 3)
    ]
    stats = measure_interleaved(samplers, settings)
    warm, timed = order[:4], order[4:]
    assert sorted(warm) == [0, 1, 2, 3]  # one untimed round first
    assert len(timed) == 12 * 4  # 36 samples at 3 a turn need twelve rounds, the floor too
    for r in range(12):
        assert sorted(timed[4 * r : 4 * r + 4]) == [0, 1, 2, 3]  # everyone once per round
    # Balanced over the twelve rounds (a cycle for four), counting where one round meets the
    # next and where the warm round's last turn meets the first: each follows each other 4 times.
    follows = Counter(itertools.pairwise(order[3:]))
    assert len(follows) == 12 and set(follows.values()) == {4}
    assert [s.count for s in stats] == [36, 36, 36, 36]
    assert [s.turn_sizes for s in stats] == [(3,) * 12] * 4
    assert [s.median_ms for s in stats] == [1.0, 2.0, 3.0, 4.0]  # nobody's samples mixed up


def test_cpu_samplers_get_no_warm_round() -> None:
    sampler = ListSampler([2.0] * 10, method="cpu")
    stats = measure_interleaved([sampler], [TimingSettings(warmup=0, min_samples=2, min_time_s=0)])
    assert stats[0].samples_ms == (2.0,) * 4  # rounds=4 by default; no turn thrown away
    assert sampler.turns == 4


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(warmup=-1), "warmup"),
        (dict(min_samples=0), "samples"),
        (dict(min_samples=10, max_samples=5), "max_samples"),
        (dict(min_time_s=-1.0), "min_time_s"),
        (dict(rounds=0), "rounds"),
    ],
)
def test_bad_timing_settings(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError) as error:
        TimingSettings(**kwargs)
    assert error.value.field == field


def test_sample_indices_keep_the_edges(rng: np.random.Generator) -> None:
    big = Problem(batch=3, heads=4, q_len=5000, k_len=5000)
    slices, rows = sample_indices(big, rng)
    assert len(slices) == MAX_SLICES and len(set(slices)) == MAX_SLICES
    assert len(rows) == MAX_ROWS and len(set(rows.tolist())) == MAX_ROWS
    assert rows[0] == 0 and rows[-1] == 4999  # the causal diagonal start and the ragged end
    small_slices, small_rows = sample_indices(Problem(batch=1, heads=2, q_len=100, k_len=100), rng)
    assert small_slices == [(0, 0), (0, 1)]
    assert small_rows.tolist() == list(range(100))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("mask", ["none", "causal", "window"])
def test_check_output_passes_right_and_fails_wrong(
    dtype: str, mask: str, rng: np.random.Generator
) -> None:
    problem = Problem(
        batch=2, heads=4, kv_heads=2, q_len=300, k_len=340, head_dim=32, dtype=dtype, input_pos=40
    )
    config = KernelConfig(tile_m=64, tile_n=32, mask=mask, window=50 if mask == "window" else None)
    q, k, v = host_inputs(problem, rng)
    out = flash_attention(
        q, k, v, mask=mask, input_pos=40, window=config.window, tile_m=64, tile_n=32
    )
    right = check_output(q, k, v, round_to_dtype(out, dtype), problem, config, rng)
    assert right.passed and right.rel_err < TOLERANCE[dtype]
    assert right.checked_rows == MAX_SLICES * MAX_ROWS

    wrong_rows = out.copy()
    wrong_rows[:, :, -1] += 1.0  # the last row, which the sample always checks
    wrong = check_output(q, k, v, wrong_rows, problem, config, rng)
    assert not wrong.passed and wrong.max_abs_err >= 0.99

    poisoned = out.copy()
    poisoned[:, :, 0, 0] = np.nan  # an element the launch never wrote
    nan = check_output(q, k, v, poisoned, problem, config, rng)
    assert not nan.passed and np.isnan(nan.rel_err)


def test_bfloat16_rounding_is_round_to_nearest_even(rng: np.random.Generator) -> None:
    x = rng.standard_normal(10_000, dtype=np.float32) * 100
    rounded = round_to_dtype(x, "bfloat16")
    bits = rounded.view(np.uint32)
    assert (bits & 0xFFFF == 0).all()  # representable in bfloat16
    # Never more than half a bfloat16 ulp (8 mantissa bits) away.
    ulp = np.abs(x) * 2.0**-7
    assert (np.abs(rounded - x) <= ulp / 2 + 1e-30).all()
    assert (round_to_dtype(x, "float16") == x.astype(np.float16).astype(np.float32)).all()
    # Exact halves go to the even neighbour; the caller's array is left as it was.
    ties = np.array([1 + 2.0**-8, 1 + 3 * 2.0**-8, -(2 + 2.0**-7)], dtype=np.float32)
    kept = ties.copy()
    assert round_to_dtype(ties, "bfloat16").tolist() == [1.0, 1 + 2.0**-6, -2.0]
    assert (ties == kept).all()
