"""A plugin's report of the blocks it computed (``declare(..., block_map=...)``).

``block_map(problem, config, knobs) -> BlockReport``: for one (batch, head) slice of
``problem`` under ``config``'s mask and the plugin's ``knobs``, a 2-D grid of how many times
the plugin computed each (query block, key block) pair (counts, or a boolean grid), with the
block sizes it counts in. A report is checked at load on small trial problems and again at each
point it is stored for: not a :class:`BlockReport`, block sizes that are not positive whole
numbers, a grid that is not 2-D counts or booleans, of the wrong shape or with a negative count
is a :class:`~workbench.backends.declaration.DeclarationError` naming the file and the field.

The stored map keeps the workbench's three kinds (:class:`kernels.schedule.BlockKind`): a block
the plugin did not compute is skipped; one it computed is computed, or masked where some of its
(row, key) pairs are hidden by the mask or past the keys (work the mask throws away).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels.schedule import BlockKind, Schedule, cdiv
from workbench.backends.declaration import DeclarationError
from workbench.config import KernelConfig, Problem

FIELD = "block_map"
# The trial problems a report is checked on at load (each mask the plugin takes): a square one
# and a chunked prefill whose lengths are not whole blocks.
TRIAL_LENGTHS = ((256, 256, 0), (100, 300, 200))
TRIAL_WINDOW = 64

# (problem, config, knobs) -> BlockReport
BlockMapCall = Callable[[Problem, KernelConfig, Mapping[str, Any]], Any]


@dataclass(frozen=True)
class BlockReport:
    """The blocks a plugin computed for one (batch, head) slice: ``rows`` query rows by
    ``keys`` keys a block, and ``computed``, a (ceil(q_len / rows), ceil(k_len / keys)) grid of
    how many times each block was computed (0: skipped), or of booleans."""

    rows: int
    keys: int
    computed: Any  # np.ndarray (or anything np.asarray takes): counts or booleans


def checked_counts(report: Any, problem: Problem, where: str) -> np.ndarray:
    """``report``'s grid as non-negative int64 counts, or a DeclarationError naming ``where``
    and the field."""

    def refuse(reason: str) -> DeclarationError:
        return DeclarationError(where, FIELD, reason)

    if not isinstance(report, BlockReport):
        raise refuse(
            f"returned a {type(report).__name__}; expected workbench.backends.BlockReport("
            "rows, keys, computed)"
        )
    for name in ("rows", "keys"):
        size = getattr(report, name)
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
            raise refuse(f"{name}={size!r}: expected a whole number of at least 1")
    try:
        grid = np.asarray(report.computed)
    except (TypeError, ValueError) as exc:
        raise refuse(f"computed: not an array ({exc})") from None
    if grid.ndim != 2:
        raise refuse(f"computed: {grid.ndim}-D; expected a 2-D grid (query blocks, key blocks)")
    if grid.dtype != np.bool_ and not np.issubdtype(grid.dtype, np.integer):
        raise refuse(f"computed: {grid.dtype} values; expected counts (integers) or booleans")
    expected = (cdiv(problem.q_len, int(report.rows)), cdiv(problem.k_len, int(report.keys)))
    if grid.shape != expected:
        raise refuse(
            f"computed: {grid.shape[0]}×{grid.shape[1]} blocks for q_len {problem.q_len}, "
            f"k_len {problem.k_len} at {report.rows}×{report.keys}; expected "
            f"{expected[0]}×{expected[1]}"
        )
    counts = grid.astype(np.int64)
    if counts.size and counts.min() < 0:
        qb, kb = np.argwhere(counts < 0)[0]
        raise refuse(f"computed: a negative count ({counts[qb, kb]}) at q-block {qb}, k-block {kb}")
    return counts


def kinds_of(
    counts: np.ndarray, report: BlockReport, problem: Problem, config: KernelConfig
) -> np.ndarray:
    """The stored ``int8`` map of ``counts``: skipped where 0, else computed, or masked where
    the block has (row, key) pairs the mask hides or keys past k_len."""
    model = Schedule(
        problem.q_len, problem.k_len, int(report.rows), int(report.keys), config.mask,
        problem.input_pos, config.window,
    ).block_map  # fmt: skip
    grid = np.full(counts.shape, BlockKind.SKIPPED, dtype=np.int8)
    grid[counts > 0] = BlockKind.MASKED
    grid[(counts > 0) & (model == BlockKind.COMPUTED)] = BlockKind.COMPUTED
    return grid


@dataclass(frozen=True)
class ReportedMap:
    """A checked report as a point stores it: the kinds, and what the point's facts say."""

    grid: np.ndarray  # int8 BlockKind codes
    extra: dict[str, Any]


def reported_map(
    call: BlockMapCall,
    problem: Problem,
    config: KernelConfig,
    knobs: Mapping[str, Any],
    where: str,
) -> ReportedMap:
    """Ask the plugin for its report of ``problem``, check it and make the stored map."""
    report = call(problem, config, dict(knobs))
    counts = checked_counts(report, problem, where)
    extra: dict[str, Any] = {
        "block_map_source": "plugin",
        "block_map_tiles": [int(report.rows), int(report.keys)],
    }
    repeated = int((counts > 1).sum())
    if repeated:  # the map says which blocks; how often is kept beside it
        extra["block_map_repeated"] = repeated
    return ReportedMap(kinds_of(counts, report, problem, config), extra)


def trial_cases(
    head_dims: tuple[int, ...] | None, dtypes: tuple[str, ...], masks: tuple[str, ...]
) -> list[tuple[Problem, KernelConfig]]:
    """The problems and configs a report is checked on at load."""
    head_dim = head_dims[0] if head_dims else 64
    cases = []
    for mask in masks:
        config = KernelConfig(mask=mask, window=TRIAL_WINDOW if mask == "window" else None)
        for q_len, k_len, input_pos in TRIAL_LENGTHS:
            problem = Problem(
                batch=1, heads=1, q_len=q_len, k_len=k_len, input_pos=input_pos,
                head_dim=head_dim, dtype=dtypes[0],
            )  # fmt: skip
            cases.append((problem, config))
    return cases


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def check_at_load(
    call: Any,
    cases: list[tuple[Problem, KernelConfig]],
    knobs: Mapping[str, Any],
    where: str,
) -> None:
    """Refuse a ``block_map=`` that is not callable, raises, or reports wrongly on ``cases``."""
    if not callable(call):
        raise DeclarationError(where, FIELD, f"{type(call).__name__} is not callable")
    for problem, config in cases:
        try:
            report = call(problem, config, dict(knobs))
        except Exception as exc:
            raise DeclarationError(
                where, FIELD, f"raised {one_line(exc)} on a trial problem "
                f"(q_len {problem.q_len}, k_len {problem.k_len}, mask {config.mask})",
            ) from None  # fmt: skip
        checked_counts(report, problem, where)
