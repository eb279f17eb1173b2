"""One ratio convention: speed-up × = base latency / run latency; its band holds 1 iff "~"."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from workbench.analysis.compare import compare_cell, format_delta, format_speedup


def point(median: float, p20: float, p80: float) -> SimpleNamespace:
    return SimpleNamespace(latency_ms=median, latency_p20_ms=p20, latency_p80_ms=p80)


@pytest.mark.parametrize(
    ("run", "significant"),
    [
        (point(0.5, 0.5, 0.5), True),  # twice as fast
        (point(2.0, 2.0, 2.0), True),  # twice as slow
        (point(1.005, 1.005, 1.005), False),  # under the 1 % floor
        (point(1.1, 0.9, 1.3), False),  # +10 % inside an 18 % spread
    ],
)
def test_speedup_is_base_over_run_and_its_band_holds_one_only_within_noise(
    run: SimpleNamespace, significant: bool
) -> None:
    base = point(1.0, 1.0, 1.0)
    cell = compare_cell(run, base)
    assert cell.speedup == pytest.approx(base.latency_ms / run.latency_ms)
    assert cell.significant is significant
    low, high = cell.speedup_band()
    assert low <= cell.speedup <= high
    assert (low <= 1.0 <= high) is not significant
    assert format_speedup(cell.speedup, cell.significant).endswith("~") is not significant


def test_formats_match_the_cli() -> None:
    assert format_speedup(1.23456, True) == "1.235×"
    assert format_speedup(0.5, False) == "0.500× ~"
    assert format_speedup(None, False) == "-"
    assert format_delta(-50.0) == "-50.0 %" and format_delta(None) == "-"
