"""``show``'s lines for a ragged batch: each point's batch (its summary, the hash of its
lengths, the key positions read and how many of them were the last pages' wasted tails)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.batch_lengths import lengths_hash, lengths_summary, tokens_read
from workbench.config import AXIS_LABELS


def batch_lines(run: Any, points: Sequence[Any]) -> list[str]:
    """The lines under ``show``'s table for a run of a ragged batch; none for a uniform one."""
    ragged = [p for p in points if p.lengths is not None]
    if run.problem.lengths is None or not ragged:
        return []
    lines = ["batch of each point (the lengths in full: show --json, export):"]
    for point in ragged:
        problem = run.point_problem(point)
        read = tokens_read(problem.k_lens, problem.page_size)
        wasted = read - sum(problem.k_lens)
        tail = f", {wasted:,} of them the last pages' wasted tails" if problem.page_size else ""
        summary = lengths_summary(problem.lengths, problem.page_size, problem.varlen)
        where = f"{AXIS_LABELS[run.axis]} {point.seq_len}"
        lines.append(
            f"  {where}  {summary}  lengths {lengths_hash(problem.lengths)}  K+V read at "
            f"{read:,} key positions a KV head{tail}"
        )
    return lines
