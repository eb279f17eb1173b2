"""The timing flags of the commands that measure (``sweep``, ``ladder``) and the timing settings
they make of a backend's own (:class:`~workbench.measure.timing.TimingSettings`)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from workbench.cli.values import finite, whole


def add_timing(group: Any) -> None:
    """Warm-up, samples, time per point, the GPU's timing choices and the inputs' seed."""
    group.add_argument("--warmup", type=whole, help="untimed launches before sampling")
    group.add_argument("--samples", type=whole, help="minimum timed samples per point")
    group.add_argument("--min-time", type=finite, help="minimum seconds of samples per point")
    group.add_argument(
        "--no-graph",
        action="store_true",
        help="GPU: time plain launches with CUDA events instead of replaying CUDA graphs "
        "(the default where a backend's launch can be captured; host launch overhead then "
        "shows at small N)",
    )
    group.add_argument(
        "--rounds",
        type=whole,
        help="groups (--backends): at least this many interleaved timing rounds per length "
        "(default 4)",
    )
    group.add_argument(
        "--flush-l2",
        action="store_true",
        help="GPU: overwrite the L2 cache before each sample (a graph sample is a replay of "
        "many calls: only its first finds the L2 cold; with --no-graph every call does)",
    )
    group.add_argument("--seed", type=whole, help="random seed for the inputs (default: fresh)")


def timing_from_args(args: argparse.Namespace, backend_default: Any) -> Any:
    changes: dict[str, Any] = {}
    if args.warmup is not None:
        changes["warmup"] = args.warmup
    if args.samples is not None:
        changes["min_samples"] = args.samples
        changes["max_samples"] = max(backend_default.max_samples, args.samples)
    if args.min_time is not None:
        changes["min_time_s"] = args.min_time
    if args.no_graph:
        changes["graph"] = False
    if args.rounds is not None:
        changes["rounds"] = args.rounds
    if args.flush_l2:
        changes["flush_l2"] = True
    return dataclasses.replace(backend_default, **changes)


def planned_timings(args: argparse.Namespace, plan: Any) -> dict[str, Any]:
    """Each planned backend's own timing with the command line's changes (refused here, before
    the database is opened)."""
    return {b.name: timing_from_args(args, b.default_timing()) for b in plan.backends}
