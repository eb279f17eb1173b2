"""The timing harness every backend shares, for one run and for interleaved groups.

A backend hands over a *sampler*: something that yields samples (milliseconds per call) a turn
at a time. GPU backends use :class:`kernels.measure.LaunchSampler`, the project's one GPU timing
procedure (CUDA-graph replay where the launch can be captured, CUDA events otherwise; the tuner
and the benchmark use it too); the CPU reference uses :class:`CpuSampler`. Warm-up and
compilation stay outside the timed region. :func:`measure` takes turns until a minimum count and
a minimum time are both reached; :func:`measure_interleaved` does the same for several samplers
at once, in rounds whose order is balanced (each sampler follows each other equally often), so
no backend inherits a better or worse GPU clock than another. Raw samples are kept; the summary
is median, p20, p80 and min.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kernels.measure import EVENT_BATCH, GRAPH_REPLAYS, balanced_order
from workbench.measure.noise import MIN_TURNS, median_noise_pct, turn_medians

# Warm-up launches are neither timed nor capped by max_time_s: more than this is a typo, not a plan.
MAX_WARMUP = 10_000


@dataclass(frozen=True)
class TimingSettings:
    warmup: int = 3  # untimed launches after the first (compiling) one
    min_samples: int = 10
    max_samples: int = 1000
    min_time_s: float = 0.25  # keep sampling until this much time has been spent timing
    max_time_s: float = 30.0  # ...but stop after this much, whatever min_samples says
    flush_l2: bool = False  # GPU: overwrite L2 before every sample
    graph: bool = True  # GPU: replay CUDA graphs where the launch can be captured
    rounds: int = 4  # groups: at least this many interleaved rounds per length

    def __post_init__(self) -> None:
        from workbench.config import ConfigError

        if not 0 <= self.warmup <= MAX_WARMUP:
            raise ConfigError("warmup", self.warmup, f"expected 0 to {MAX_WARMUP:,}")
        if self.min_samples < 1:
            raise ConfigError("samples", self.min_samples, "expected at least 1")
        if self.max_samples < self.min_samples:
            raise ConfigError(
                "max_samples", self.max_samples, f"expected at least samples ({self.min_samples})"
            )
        # `not x >= 0` also refuses NaN, which compares false with everything.
        if not 0 <= self.min_time_s < math.inf or not 0 < self.max_time_s < math.inf:
            raise ConfigError("min_time_s", self.min_time_s, "expected a time >= 0 seconds")
        if self.rounds < 1:
            raise ConfigError("rounds", self.rounds, "expected at least 1")


@dataclass(frozen=True)
class TimingStats:
    """Raw samples in milliseconds, how they were taken, and the summary the store keeps."""

    samples_ms: tuple[float, ...] = field(repr=False)
    method: str = "cpu"  # "graph", "events" or "cpu": which timer took the samples
    note: str | None = None  # why a GPU launch fell back from graphs to events
    turn_sizes: tuple[int, ...] = ()  # samples each turn gave, in order (empty: not recorded)

    def __post_init__(self) -> None:
        if not self.samples_ms:
            raise ValueError("a timing needs at least one sample")
        if self.turn_sizes and sum(self.turn_sizes) != len(self.samples_ms):
            raise ValueError("turn sizes must add up to the number of samples")

    @property
    def median_noise_pct(self) -> float | None:
        """One standard error of the median in percent, from the spread of the turns'
        medians (:mod:`workbench.measure.noise`); None with fewer than ``MIN_TURNS`` turns."""
        if len(self.turn_sizes) < MIN_TURNS:
            return None
        return median_noise_pct(turn_medians(self.samples_ms, self.turn_sizes))

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


class Sampler(Protocol):
    """Yields samples a turn at a time; ``method`` says which clock took them."""

    method: str

    def turn(self) -> list[float]: ...


class CpuSampler:
    """Wall-clock time of synchronous calls, ``per_turn`` of them a turn."""

    method = "cpu"

    def __init__(
        self,
        fn: Callable[[], object],
        *,
        between: Callable[[], object] | None = None,
        per_turn: int = 1,
    ) -> None:
        self.fn = fn
        self.between = between
        self.per_turn = per_turn

    def turn(self) -> list[float]:
        samples = []
        for _ in range(self.per_turn):
            if self.between is not None:
                self.between()
            start = time.perf_counter()
            self.fn()
            samples.append((time.perf_counter() - start) * 1e3)
        return samples


def timing_facts(timing: TimingStats) -> dict[str, object]:
    """What a stored point keeps about how it was timed (its ``extra``): the timer, why it fell
    back to events, its number of turns and its median's noise (Compare's threshold)."""
    facts: dict[str, object] = {"timer": timing.method}
    if timing.note:
        facts["timer_note"] = timing.note
    if timing.turn_sizes:
        facts["turns"] = len(timing.turn_sizes)
    noise = timing.median_noise_pct
    if noise is not None and noise < float("inf"):
        facts["median_noise_pct"] = round(noise, 4)
    return facts


# Samples a GPU turn gives, per timer: fixed since the one timer (4f9adfa), so points stored
# before turns were recorded get their noise from their samples.
GPU_TURN_SAMPLES = {"graph": GRAPH_REPLAYS, "events": EVENT_BATCH}


def facts_from_stored_samples(extra: dict[str, Any], samples_ms: Sequence[float]) -> dict[str, Any]:
    """``extra`` of a stored point, with its turns and median's noise worked out from its
    samples where it was timed on a GPU before they were recorded; otherwise as it is."""
    per_turn = GPU_TURN_SAMPLES.get(extra.get("timer", ""))
    if "turns" in extra or per_turn is None or not samples_ms or len(samples_ms) % per_turn:
        return extra
    turns = (per_turn,) * (len(samples_ms) // per_turn)
    facts = timing_facts(TimingStats(tuple(samples_ms), extra["timer"], None, turns))
    return {**extra, **{k: v for k, v in facts.items() if k in ("turns", "median_noise_pct")}}


def _stats(sampler: Sampler, samples: list[float], sizes: list[int]) -> TimingStats:
    note = getattr(sampler, "fallback_reason", None)
    return TimingStats(tuple(samples), sampler.method, note, tuple(sizes))


def measure(sampler: Sampler, settings: TimingSettings) -> TimingStats:
    """Take turns of ``sampler`` until ``min_samples`` and ``min_time_s`` are both met (or a
    cap is reached). Warm-up is the caller's: it knows how to launch untimed."""
    return measure_interleaved([sampler], [settings], rounds=1, warm_round=False)[0]


def measure_interleaved(
    samplers: Sequence[Sampler],
    settings: Sequence[TimingSettings],
    *,
    rounds: int | None = None,
    warm_round: bool = True,
) -> list[TimingStats]:
    """Time several samplers in rounds: each round gives every sampler one turn, in the order
    :func:`~kernels.measure.balanced_order` gives for that round. Rounds go on until every
    sampler has its ``min_samples`` and ``min_time_s`` and at least ``rounds`` rounds have run
    (default: the largest ``settings.rounds``), or until any cap is reached.

    ``warm_round``: one untimed round first, so the first timed turn finds the GPU as warm as
    the later ones (skipped for CPU samplers, whose turns can take seconds)."""
    if len(samplers) != len(settings) or not samplers:
        raise ValueError("measure_interleaved needs one settings per sampler, at least one")
    count = len(samplers)
    min_rounds = rounds if rounds is not None else max(s.rounds for s in settings)
    if warm_round:
        for i in balanced_order(count, -1):  # the cycle's last round: round 0 follows it
            if samplers[i].method != "cpu":
                samplers[i].turn()
    samples: list[list[float]] = [[] for _ in samplers]
    sizes: list[list[int]] = [[] for _ in samplers]
    spent = [0.0] * count
    started = time.perf_counter()
    round_index = 0
    while True:
        for i in balanced_order(count, round_index):
            begun = time.perf_counter()
            taken = samplers[i].turn()
            spent[i] += time.perf_counter() - begun
            samples[i].extend(taken)
            sizes[i].append(len(taken))
        round_index += 1
        enough = round_index >= min_rounds and all(
            len(samples[i]) >= s.min_samples and spent[i] >= s.min_time_s
            for i, s in enumerate(settings)
        )
        capped = any(len(samples[i]) >= s.max_samples for i, s in enumerate(settings)) or any(
            time.perf_counter() - started >= s.max_time_s * count for s in settings
        )
        if enough or capped:
            break
    return [_stats(*parts) for parts in zip(samplers, samples, sizes, strict=True)]
