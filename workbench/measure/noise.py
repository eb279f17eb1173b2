"""How sure a point's median is, and how sure a difference between two medians is.

A GPU holding its power limit steps its clock: samples 15 ms apart move together, samples a
turn apart hardly at all (docs/performance.md). So a point's noise is counted in turns, not in
samples: one median per turn, and the standard error of the point's median from their spread.
That spread is a robust one (the median absolute deviation): a turn that lost its time slice to
another process (one sample 80 times the rest) moves it by one rank, not by its size.
The p20–p80 spread of the samples says how much single launches vary, which is much more than
how well their median is known once there are many rounds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

# The median's standard error is about 1.2533·σ/√n for a near-normal spread.
MEDIAN_SE_FACTOR = 1.2533
# σ of a normal spread from its median absolute deviation (1/Φ⁻¹(3/4)); from its mean absolute
# deviation, √(π/2), the fallback where more than half the turns agree exactly (MAD 0).
MAD_TO_SIGMA = 1.4826
MEAN_ABS_TO_SIGMA = 1.2533
# The MAD of a few values is too small on average (a group's default of 4 turns read its noise
# about a quarter low): Croux and Rousseeuw's (1992) finite-sample factors for n = 2..9, and
# n / (n - 0.8) beyond.
MAD_SMALL_SAMPLE = {2: 1.196, 3: 1.495, 4: 1.363, 5: 1.206, 6: 1.200, 7: 1.140, 8: 1.129, 9: 1.107}
# Fewer turns than this give no usable spread: the point's noise is then unknown.
MIN_TURNS = 4


def turn_medians(samples: Sequence[float], sizes: Sequence[int]) -> list[float]:
    """One median per turn: ``sizes`` holds how many of ``samples`` (in order) each turn took."""
    if sum(sizes) != len(samples):
        raise ValueError(f"turn sizes add up to {sum(sizes)}, not the {len(samples)} samples")
    medians, start = [], 0
    for size in sizes:
        if size:
            medians.append(statistics.median(samples[start : start + size]))
        start += size
    return medians


def robust_sigma(values: Sequence[float]) -> float:
    """σ of ``values`` from their median absolute deviation: one value far out (a preempted
    turn) cannot blow it up, as it blows up a standard deviation."""
    middle = statistics.median(values)
    deviations = [abs(v - middle) for v in values]
    n = len(values)
    small_sample = MAD_SMALL_SAMPLE.get(n, n / (n - 0.8) if n > 1 else 1.0)
    spread = small_sample * MAD_TO_SIGMA * statistics.median(deviations)
    if spread == 0:  # most turns identical: the mean deviation still sees the rest
        spread = MEAN_ABS_TO_SIGMA * statistics.fmean(deviations)
    return spread


def median_noise_pct(per_turn: Sequence[float]) -> float:
    """One standard error of the median of per-turn values, in percent of that median
    (infinite for fewer than two turns), from their robust spread."""
    if len(per_turn) < 2:
        return math.inf
    middle = statistics.median(per_turn)
    if middle <= 0:
        return math.inf
    return 100 * MEDIAN_SE_FACTOR * robust_sigma(per_turn) / middle / len(per_turn) ** 0.5


def ratio_noise_pct(*noises_pct: float) -> float:
    """The noise of a ratio (or of a difference of ratios) from its independent parts."""
    return math.sqrt(sum(x * x for x in noises_pct))
