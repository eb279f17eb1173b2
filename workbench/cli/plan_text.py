"""What ``show`` says a run's kernel launches ran: each point's stored launch plan
(:class:`kernels.cutile.plan.LaunchPlan`) in a few words, one line per run of points alike."""

from __future__ import annotations

from collections.abc import Sequence

from kernels.cutile.plan import plan_words
from workbench.config import AXIS_LABELS, SEQ_LEN_AXIS
from workbench.store import PointRecord


def plan_lines(points: Sequence[PointRecord], axis: str = SEQ_LEN_AXIS) -> list[str]:
    """``  ran      N 1024, 2048: tile · 64×64 tiles · grid 1024×1×1``, one line per run of
    consecutive points whose plans read alike; none where no point stored a plan."""
    runs: list[tuple[str, list[int]]] = []
    for point in points:
        if not point.plan:
            continue
        words = plan_words(point.plan)
        if runs and runs[-1][0] == words:
            runs[-1][1].append(point.seq_len)
        else:
            runs.append((words, [point.seq_len]))
    label = AXIS_LABELS.get(axis, axis)
    return [
        f"  ran      {label} {', '.join(map(str, lengths))}: {words}" for words, lengths in runs
    ]
