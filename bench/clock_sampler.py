"""The GPU's SM clock and power draw, sampled in a background thread while configs are timed.

Read only (NVML queries; nothing here sets a clock or a limit). Under sustained load the H200
lowers its SM clock to hold its power limit, and a kernel timed right after a light one runs
at a higher clock; recording the clock inside each config's timing windows tells a kernel that
needs more cycles apart from one that ran at a lower clock
(bench/results/experiments/h200-explore-clocks.md).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

# One reading: (SM clock in MHz, power draw in W).
Reader = Callable[[], tuple[float, float]]


def nvml_reader(device_index: int = 0) -> Reader:
    """A reader of the SM clock and power draw of NVML device ``device_index``."""
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)

    def read() -> tuple[float, float]:
        mhz = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        watts = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
        return float(mhz), float(watts)

    return read


class ClockSampler:
    """Samples ``read`` every ``period_s`` seconds between ``start`` and ``stop`` (or inside a
    ``with`` block); :meth:`summary` gives the clock and power within given time windows
    (``time.perf_counter`` seconds)."""

    def __init__(self, read: Reader, period_s: float = 0.005) -> None:
        if period_s <= 0:
            raise ValueError(f"period_s must be positive, got {period_s}")
        self._read = read
        self._period_s = period_s
        self._samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    def start(self) -> ClockSampler:
        self._thread = threading.Thread(target=self._run, name="clock-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> ClockSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                mhz, watts = self._read()
            except Exception as exc:  # a failing reader ends sampling, not the timing run
                self.error = f"{type(exc).__name__}: {exc}"
                return
            self._samples.append((time.perf_counter(), mhz, watts))
            self._stop.wait(self._period_s)

    def readings(self) -> list[tuple[float, float, float]]:
        """Every sample so far: (``time.perf_counter`` seconds, MHz, W)."""
        return list(self._samples)

    def summary(self, windows: list[tuple[float, float]]) -> dict[str, Any]:
        """Median SM clock (MHz), mean power (W) and the sample count inside ``windows``;
        None for the clock and power when no sample fell inside them."""
        inside = [
            (mhz, watts)
            for t, mhz, watts in self.readings()
            if any(t0 <= t <= t1 for t0, t1 in windows)
        ]
        if not inside:
            return {"sm_mhz": None, "power_w": None, "samples": 0}
        return {
            "sm_mhz": statistics.median(m for m, _ in inside),
            "power_w": statistics.fmean(w for _, w in inside),
            "samples": len(inside),
        }
