"""Issue #52 item 6: one noise rule for the shading, the marks and the words of Compare and the
ladder. Random runs (the seed is printed on failure) against a baseline, some within their
noise and some beyond it, read back from what the window paints and writes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gui_helpers import seed_run
from PySide6.QtCore import Qt
from readouts import cell_colored, cell_text, length_cell, run_band_edges

from workbench.gui.compare import FASTER, SLOWER
from workbench.gui.ladder import GAIN, LOSS, VERDICT_ROLE
from workbench.store import Store

pytestmark = pytest.mark.gui

LENGTHS = (64, 128, 256, 512, 1024, 2048)
TURNS = (3,) * 6  # six turns of three samples: each point stores its median's noise


def noisy_samples(rng: np.random.Generator, centre: float, spread: float) -> tuple[float, ...]:
    """Eighteen samples around ``centre``, each turn moved together by ``spread`` (relative)."""
    out = []
    for _ in TURNS:
        level = centre * max(0.05, 1 + spread * rng.standard_normal())
        out += [level * (1 + 0.002 * rng.standard_normal()) for _ in range(3)]
    return tuple(out)


def seed_pair(store: Store, rng: np.random.Generator, **step: Any) -> tuple[int, int]:
    """A baseline and a run whose ratio per length is drawn from 0.4-1.6 (some near 1), each
    point's turn noise from 0.2-25 %: differences both within and beyond the noise."""
    ratios = rng.choice([0.4, 0.7, 0.97, 1.0, 1.03, 1.3, 1.6], size=len(LENGTHS))
    spreads = rng.uniform(0.002, 0.25, size=(2, len(LENGTHS)))
    base_ms = {n: (n / 64) ** 2 * rng.uniform(0.5, 2.0) for n in LENGTHS}
    made = []
    for which, label in enumerate(("base", "other")):
        samples = {
            n: noisy_samples(rng, base_ms[n] * (ratios[i] if which else 1.0), spreads[which, i])
            for i, n in enumerate(LENGTHS)
        }
        made.append(
            seed_run(
                store,
                label=label,
                seq_lens=LENGTHS,
                samples_ms=samples,
                turn_sizes={n: TURNS for n in LENGTHS},
                **({"step": label, **step} if step else {}),
            )
        )
    return made[0], made[1]


def test_compare_shades_marks_and_words_each_cell_by_one_rule(
    qtbot: Any, make_window: Any, db_path: Path, rng: np.random.Generator
) -> None:
    with Store(db_path) as store:
        base, other = seed_pair(store, rng)
    window = make_window(probe_backends=False)
    panel = window.compare
    window.history.select_runs([base, other])
    qtbot.waitUntil(lambda: panel.table.rowCount() == len(LENGTHS))
    lows, highs = run_band_edges(panel.chart.plot, other)
    seen = set()
    for row in range(len(LENGTHS)):
        delta, speedup = cell_text(panel.table, row, 3), cell_text(panel.table, row, 4)
        tip = panel.table.item(row, 3).toolTip()
        within = speedup.endswith("~")
        seen.add(within)
        # The shading, the "~" mark, the tooltip's words and the chart's band agree.
        assert cell_colored(panel.table, row, 3) is (not within), (row, delta, speedup, tip)
        assert tip.startswith("within the noise") is within, (row, tip)
        assert bool(lows[row] <= 1.0 <= highs[row]) is within, (row, lows[row], highs[row])
        if not within:
            colour = panel.table.item(row, 3).background().color()
            assert colour == (FASTER if delta.startswith("-") else SLOWER), (row, delta)
            # A difference beyond the noise is larger than the threshold the tooltip names.
            threshold = float(tip.rsplit("±", 1)[1].split()[0])
            assert abs(float(delta.split()[0])) > threshold
    print(f"rows within the noise: {seen}")


def test_the_ladder_paints_a_step_only_beyond_its_noise(
    qtbot: Any, make_window: Any, db_path: Path, rng: np.random.Generator
) -> None:
    with Store(db_path) as store:
        group = store.create_group("ladder", "random", {"steps": ["base", "other"]})
        seed_pair(store, rng, group_id=group)
    window = make_window(probe_backends=False)
    panel = window.ladder
    window.tabs.setCurrentWidget(panel)
    qtbot.waitUntil(lambda: panel.data is not None and panel.table.rowCount() == 2)
    for n in LENGTHS:
        item = length_cell(panel.table, 1, n)
        text, verdict = item.text(), item.data(VERDICT_ROLE)
        within = text.endswith("~")
        assert (verdict == "neutral") is within, (n, text, verdict)
        brushed = item.background().style() != Qt.BrushStyle.NoBrush
        painted = item.background().color() if brushed else None
        if within:
            assert painted is None, (n, text)
            assert "within the noise" in item.toolTip()
        else:
            ratio = float(text.split("×")[1])
            assert painted == (GAIN if ratio > 1 else LOSS), (n, text)
            assert math.isfinite(ratio)
