"""The timing harness every backend shares.

Warm-up (and compilation) stay outside the timed region; samples are taken one launch at a
time until both a minimum count and a minimum time are reached; the raw samples are kept and the
summary is median, p20, p80 and min. The clock is the backend's: ``perf_counter`` around a
synchronous call on the CPU, CUDA events on a GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class TimingSettings:
    warmup: int = 3  # untimed launches after the first (compiling) one
    min_samples: int = 10
    max_samples: int = 1000
    min_time_s: float = 0.25  # keep sampling until this much time has been measured
    max_time_s: float = 30.0  # ...but stop after this much, whatever min_samples says
    flush_l2: bool = False  # GPU: overwrite L2 between samples
    cuda_graph: bool = False  # GPU: time graph replays instead of plain launches

    def __post_init__(self) -> None:
        from workbench.config import ConfigError

        if self.warmup < 0:
            raise ConfigError("warmup", self.warmup, "expected 0 or more")
        if self.min_samples < 1:
            raise ConfigError("samples", self.min_samples, "expected at least 1")
        if self.max_samples < self.min_samples:
            raise ConfigError(
                "max_samples", self.max_samples, f"expected at least samples ({self.min_samples})"
            )
        # `not x >= 0` also refuses NaN, which compares false with everything.
        if not self.min_time_s >= 0 or not self.max_time_s > 0:
            raise ConfigError("min_time_s", self.min_time_s, "expected a time >= 0 seconds")


@dataclass(frozen=True)
class TimingStats:
    """Raw samples in milliseconds and the summary the store keeps."""

    samples_ms: tuple[float, ...] = field(repr=False)

    def __post_init__(self) -> None:
        if not self.samples_ms:
            raise ValueError("a timing needs at least one sample")

    def _percentile(self, q: float) -> float:
        return float(np.percentile(np.asarray(self.samples_ms), q))

    @property
    def count(self) -> int:
        return len(self.samples_ms)

    @property
    def median_ms(self) -> float:
        return self._percentile(50)

    @property
    def p20_ms(self) -> float:
        return self._percentile(20)

    @property
    def p80_ms(self) -> float:
        return self._percentile(80)

    @property
    def min_ms(self) -> float:
        return float(min(self.samples_ms))


class Timer:
    """Times calls of ``fn`` in milliseconds. The CPU timer: each call is synchronous."""

    batch = 1  # samples taken per round before the stopping rule is checked

    def time_ms(self, fn: Callable[[], object]) -> float:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3

    def time_many(
        self, fn: Callable[[], object], count: int, between: Callable[[], object] | None
    ) -> list[float]:
        samples = []
        for _ in range(count):
            if between is not None:
                between()
            samples.append(self.time_ms(fn))
        return samples


def measure(
    fn: Callable[[], object],
    settings: TimingSettings,
    timer: Timer | None = None,
    *,
    between: Callable[[], object] | None = None,
) -> TimingStats:
    """Warm up, then sample ``fn`` until ``min_samples`` and ``min_time_s`` are both met.

    ``between`` runs untimed before every sample (an L2 flush, say).
    """
    timer = timer or Timer()
    for _ in range(settings.warmup):
        fn()
    samples: list[float] = []
    started = time.perf_counter()
    while True:
        count = min(timer.batch, settings.max_samples - len(samples))
        samples.extend(timer.time_many(fn, count, between))
        elapsed = time.perf_counter() - started
        enough = len(samples) >= settings.min_samples and elapsed >= settings.min_time_s
        if enough or len(samples) >= settings.max_samples or elapsed >= settings.max_time_s:
            break
    return TimingStats(tuple(samples))
