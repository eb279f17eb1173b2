"""The shared timing harness and the float64 correctness check every backend goes through."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from kernels.reference import flash_attention
from workbench.accuracy import MAX_ROWS, MAX_SLICES, TOLERANCE, check_output, sample_indices
from workbench.backends.base import host_inputs, round_to_dtype
from workbench.config import ConfigError, KernelConfig, Problem
from workbench.timing import Timer, TimingSettings, TimingStats, measure


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


class FakeTimer(Timer):
    """Each call 'takes' the next value from a list, in milliseconds."""

    def __init__(self, values: list[float]) -> None:
        self.values = list(values)

    def time_ms(self, fn: Callable[[], object]) -> float:
        fn()
        return self.values.pop(0)


def test_measure_warms_up_untimed_and_honours_the_counts() -> None:
    calls, between = [], []
    stats = measure(
        lambda: calls.append(1),
        TimingSettings(warmup=3, min_samples=5, min_time_s=0.0),
        between=lambda: between.append(1),
    )
    assert stats.count == 5
    assert len(calls) == 3 + 5  # warm-up launches are made but not sampled
    assert len(between) == 5  # the between-hook (an L2 flush) runs before every sample
    capped = measure(
        lambda: None, TimingSettings(warmup=0, min_samples=1, max_samples=7, min_time_s=60)
    )
    assert capped.count == 7  # max_samples stops a min_time that would take a minute


def test_measure_keeps_the_timer_values() -> None:
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    stats = measure(
        lambda: None, TimingSettings(warmup=0, min_samples=5, min_time_s=0), FakeTimer(values)
    )
    assert stats.samples_ms == tuple(values)
    assert stats.median_ms == 3.0 and stats.min_ms == 1.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(warmup=-1), "warmup"),
        (dict(min_samples=0), "samples"),
        (dict(min_samples=10, max_samples=5), "max_samples"),
        (dict(min_time_s=-1.0), "min_time_s"),
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
