"""Nsight Compute on one stored point: the hardware counters of exactly that launch.

:func:`check_ncu` says whether ``ncu`` can run here (on PATH, and allowed to read the GPU's
counters). :func:`profile_point` rebuilds the point's launch (its backend, problem at that
length, and the knobs it launched with, the tuner's own for an autotuned point) in a child
Python process run under ``ncu``, which profiles the one launch inside an NVTX range, with
``--clock-control none`` so the GPU's clocks are left as they are. The report is kept beside
the database, read back as CSV (``ncu --import … --csv --page raw``), and a dozen headline
metrics (:data:`HEADLINE`) with the top warp-stall reasons are stored with the point.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernels import knobs
from workbench.analysis.ncu_source import Waits, WaitSite, parse_source_csv, top_site
from workbench.analysis.roofline import ran_on_the_cpu
from workbench.config import KernelConfig, Problem
from workbench.reports.ncu_plugin import (
    PLUGIN_SPEC,
    plugin_config,
    plugin_env,
    plugin_spec,
    version_refusal,
)
from workbench.store import PointRecord, RunRecord

NVTX_RANGE = "fmha-workbench-profile"
SECTIONS = (
    "SpeedOfLight",
    "ComputeWorkloadAnalysis",
    "MemoryWorkloadAnalysis",
    "Occupancy",
    "LaunchStats",
    "WarpStateStats",
    "SourceCounters",  # PC samples per SASS instruction: where the warps wait (ncu_source)
)
# Headline metrics: (key, label, unit, raw metric names in the order tried: they differ by
# architecture and ncu version, so the first one the report holds is taken).
HEADLINE: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("duration_us", "duration", "us", ("gpu__time_duration.sum",)),
    ("sm_throughput_pct", "SM throughput", "%",
     ("sm__throughput.avg.pct_of_peak_sustained_elapsed",)),
    ("tensor_pipe_pct", "tensor pipe active", "%",
     ("sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
      "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
      "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
      "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active")),
    ("memory_throughput_pct", "memory throughput", "%",
     ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",)),
    # Where the SM's cycles go, beside the SASS model of `resources` (kernels.sass_costs):
    # issue slots, the MUFU (XU) pipe of exp2, and the FMA pipe that takes the polynomial.
    # The ncu on the H200 (2026-12-03) reported only the elapsed form (within 1 % of active).
    ("issue_active_pct", "issue slots busy", "%",
     ("sm__inst_issued.avg.pct_of_peak_sustained_active",
      "smsp__issue_active.avg.pct_of_peak_sustained_active",
      "sm__inst_issued.avg.pct_of_peak_sustained_elapsed")),
    ("mufu_pipe_pct", "MUFU (XU) pipe", "%",
     ("sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
      "sm__pipe_xu_cycles_active.avg.pct_of_peak_sustained_active")),
    ("fma_pipe_pct", "FMA pipe", "%",
     ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
      "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active")),
    ("dram_throughput_pct", "DRAM throughput", "%",
     ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
      "dram__throughput.avg.pct_of_peak_sustained_elapsed")),
    ("dram_gbs", "DRAM bandwidth", "GB/s", ("dram__bytes.sum.per_second",)),
    ("l2_hit_rate_pct", "L2 hit rate", "%", ("lts__t_sector_hit_rate.pct",)),
    ("achieved_occupancy_pct", "achieved occupancy", "%",
     ("sm__warps_active.avg.pct_of_peak_sustained_active",)),
    ("theoretical_occupancy_pct", "theoretical occupancy", "%",
     ("sm__maximum_warps_per_active_cycle_pct",)),
    ("registers_per_thread", "registers per thread", "",
     ("launch__registers_per_thread",)),
    ("shared_per_block_kb", "shared memory per block", "KB",
     ("launch__shared_mem_per_block",
      "launch__shared_mem_per_block_dynamic")),
    ("sm_clock_mhz", "SM clock", "MHz", ("smsp__cycles_elapsed.avg.per_second",)),
)  # fmt: skip
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
TOP_STALLS = 3
HOT_ROWS = 3  # the hottest instructions Compare shows of each profile with PC samples
# Not reasons a warp waits: "selected" is the warp issuing (1 per issue, always), "not_issued"
# the sum of the others.
NOT_REASONS = ("selected", "not_issued")
NOT_WAITING = tuple(f"_{name}{STALL_SUFFIX}" for name in NOT_REASONS)
PERMISSION_MARK = "ERR_NVGPUCTRPERM"
# ncu writes a unit beside each value, long ("Tbyte/second", "nsecond") or short ("TB/s",
# "ns", "B") and scaled to the value unless told otherwise: each is read as an SI prefix on a
# base unit and converted to the headline's own.
_PREFIXES = {
    "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "P": 1e15, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30,
}  # fmt: skip
# A count per launch unit ("byte/block": the H200's ncu gives a block's shared memory so) is the
# count itself: only a per-time suffix changes the kind.
_UNIT = re.compile(
    r"^(?P<prefix>Ki|Mi|Gi|[numKMGTP]?)(?P<base>byte|B|second|s|cycle|Hz)"
    r"(?:/(?P<per_prefix>[num]?)(?P<per>second|s)|/(?:block|thread|warp))?$"
)
_KINDS = {"byte": "byte", "B": "byte", "second": "s", "s": "s", "cycle": "Hz", "Hz": "Hz"}


def _in_base(unit: str) -> tuple[str, float] | None:
    """``unit`` as (its kind: "byte", "s", "Hz" or "byte/s", its factor to that base)."""
    found = _UNIT.match(unit.strip())
    if found is None:
        return None
    kind = _KINDS[found["base"]]
    factor = _PREFIXES[found["prefix"]]
    if found["per"]:
        if kind == "Hz":  # cycle/second is a frequency
            return "Hz", factor / _PREFIXES[found["per_prefix"] or ""]
        kind = f"{kind}/s"
        factor /= _PREFIXES[found["per_prefix"] or ""]
    return kind, factor


# The headlines' units in the same terms: KB is 1024 bytes (as the compiled resources say).
_HEADLINE_UNITS = {"us": ("s", 1e-6), "GB/s": ("byte/s", 1e9), "KB": ("byte", 1024.0),
                   "MHz": ("Hz", 1e6)}  # fmt: skip


def unit_factor(unit: str, their_unit: str) -> float:
    """The factor from a value in ncu's ``their_unit`` to ``unit`` (a headline's); 1 where
    ``unit`` has no dimension (%, a count) or ``their_unit`` is not one this reads."""
    ours, theirs = _HEADLINE_UNITS.get(unit), _in_base(their_unit)
    if ours is None or theirs is None or ours[0] != theirs[0]:
        return 1.0
    return theirs[1] / ours[1]


class ProfileRefused(Exception):
    """Nsight Compute cannot profile here, or this point: the message says why in one line."""


def ncu_path() -> str | None:
    return shutil.which("ncu")


def check_ncu() -> str | None:
    """Why Nsight Compute cannot profile on this machine (one line), or None when it can.

    Without ``ncu`` on PATH that is said at once; with it, ``ncu --query-metrics`` is asked
    nothing of the GPU, so counter permission shows only on a profile (:func:`profile_point`
    refuses then, with the same kind of line)."""
    if ncu_path() is None:
        return "Nsight Compute (ncu) is not on PATH: install NVIDIA Nsight Compute to profile"
    return None


@dataclass(frozen=True)
class ProfileMetrics:
    """The headline metrics of one profiled launch, and the report it came from."""

    metrics: dict[str, float]
    stalls: list[tuple[str, float]]  # every warp-stall reason, largest first: warps per issue
    kernel: str
    report: str
    profiled_at: str
    waits: Waits | None = None  # the PC samples by instruction (an ncu with Source Counters)

    def to_dict(self) -> dict[str, Any]:
        data = {
            "metrics": dict(self.metrics),
            "stalls": [list(s) for s in self.stalls],
            "kernel": self.kernel,
            "report": self.report,
            "profiled_at": self.profiled_at,
        }
        if self.waits is not None:
            data["waits"] = self.waits.to_dict()
        return data


def _number(text: str) -> float | None:
    cleaned = text.replace(",", "").strip()
    if not cleaned or cleaned.lower() in ("n/a", "nan"):
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


def parse_raw_csv(text: str, *, report: str = "", profiled_at: str = "") -> ProfileMetrics:
    """The headline metrics from ``ncu --import R --csv --page raw``: a header of metric
    names, a row of their units, then one row per profiled kernel (the first is taken)."""
    lines = [line for line in text.splitlines() if line.startswith('"')]  # skip ==PROF== lines
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 3:
        raise ProfileRefused("ncu reported no profiled kernel (was the launch inside the range?)")
    names, units, values = rows[0], rows[1], rows[2]
    by_name = {name: (_number(value), unit) for name, unit, value in zip(names, units, values)}
    metrics: dict[str, float] = {}
    for key, _label, unit, candidates in HEADLINE:
        for name in candidates:
            value, their_unit = by_name.get(name, (None, ""))
            if value is None:
                continue
            metrics[key] = round(value * unit_factor(unit, their_unit), 3)
            break
    stalls = [
        (name[len(STALL_PREFIX) : -len(STALL_SUFFIX)], value)
        for name, (value, _unit) in by_name.items()
        if name.startswith(STALL_PREFIX)
        and name.endswith(STALL_SUFFIX)
        and value is not None
        and not name.endswith(NOT_WAITING)
    ]
    # Every reason is kept, largest first, so that Compare can set one run's top reason beside
    # another run's value for it (FA4's barrier waits beside ours).
    stalls.sort(key=lambda item: -item[1])
    kernel = values[names.index("Kernel Name")] if "Kernel Name" in names else ""
    return ProfileMetrics(
        metrics=metrics,
        stalls=[(name, round(v, 3)) for name, v in stalls if v > 0],
        kernel=kernel,
        report=report,
        profiled_at=profiled_at,
    )


def launch_spec(run: RunRecord, point: PointRecord) -> dict[str, Any]:
    """What the child process launches: the run's backend, its problem at the point's
    lengths, and its config with the knobs the point launched with (the tuner's choice for
    an autotuned point, so the profile is of the kernel that was timed); a plugin's run also
    names its file, version and the point's own knobs (:mod:`workbench.reports.ncu_plugin`)."""
    config = run.config.to_dict()
    launch = (point.extra or {}).get("launch")
    if run.config.tuned and isinstance(launch, Mapping):
        config = knobs.untuned({**config, **launch})
    problem = {**run.problem.to_dict(), "q_len": point.q_len, "k_len": point.k_len}
    spec: dict[str, Any] = {"backend": run.backend, "problem": problem, "config": config}
    plugin = plugin_spec(run, point)
    if plugin is not None:  # the run's file and the point's own knobs (ncu_plugin)
        spec.update(config=plugin_config(config), **{PLUGIN_SPEC: plugin})
    return spec


def ncu_command(
    ncu: str, report: Path, spec: Mapping[str, Any], python: str = sys.executable
) -> list[str]:
    """The ncu command line that profiles the one launch in the child's NVTX range."""
    return [
        ncu,
        "--clock-control", "none",  # the GPU's clocks as they are: what the timing saw
        "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/",
        "--launch-count", "1",
        *[arg for section in SECTIONS for arg in ("--section", section)],
        "--metrics", f"regex:^{STALL_PREFIX}.*{STALL_SUFFIX.replace('.', '[.]')}$",
        "--export", str(report), "--force-overwrite",
        python, "-m", "workbench.reports.ncu", json.dumps(spec),
    ]  # fmt: skip


def report_path(db_path: Path, run_id: int, seq_len: int) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return db_path.parent / "profiles" / f"run{run_id}-N{seq_len}-{stamp}.ncu-rep"


def profile_point(
    run: RunRecord, point: PointRecord, db_path: Path, *, timeout_s: float = 600.0
) -> ProfileMetrics:
    """Profile the point's launch under ncu; raises :class:`ProfileRefused` (one line) when
    ncu is missing, may not read the counters or reports nothing, before anything is stored."""
    if ran_on_the_cpu(run.backend, run.machine):
        raise ProfileRefused(
            f"run {run.id} ran on the CPU ({run.backend} backend): Nsight Compute profiles GPU runs"
        )
    why = check_ncu()
    if why:
        raise ProfileRefused(why)
    ncu = ncu_path()
    assert ncu is not None
    spec = launch_spec(run, point)
    plugin = spec.get(PLUGIN_SPEC)
    refused = version_refusal(run.id, plugin) if plugin else None
    if refused:
        raise ProfileRefused(refused)
    report = report_path(db_path, run.id, point.seq_len)
    report.parent.mkdir(parents=True, exist_ok=True)
    root = str(Path(__file__).resolve().parent.parent)  # the child runs this checkout's code
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [root, *filter(None, [os.environ.get("PYTHONPATH")])]
    ), **(plugin_env(plugin) if plugin else {})}  # fmt: skip
    done = subprocess.run(
        ncu_command(ncu, report, spec),
        capture_output=True, text=True, timeout=timeout_s, env=env,
    )  # fmt: skip
    output = done.stdout + done.stderr
    if PERMISSION_MARK in output:
        _remove(report)
        raise ProfileRefused(
            "no permission to read the GPU's performance counters (ERR_NVGPUCTRPERM): run as "
            "root or set NVreg_RestrictProfilingToAdminUsers=0"
        )
    written = report if report.exists() else report.with_name(report.name + ".ncu-rep")
    if done.returncode != 0 or not written.exists():
        _remove(written)
        last = [line for line in output.splitlines() if line.strip()][-1:] or ["no output"]
        raise ProfileRefused(f"ncu failed (exit {done.returncode}): {last[0].strip()}")
    table = subprocess.run(
        # Base units (byte/second, nsecond, byte): ncu's auto scaling would pick a prefix per
        # value (3.6 "Tbyte/second" on the H200's DRAM), which a missed spelling turns into a
        # figure off by 10^12.
        [ncu, "--import", str(written), "--csv", "--page", "raw", "--print-units", "base"],
        capture_output=True, text=True, timeout=timeout_s,
    )  # fmt: skip
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    profile = parse_raw_csv(table.stdout, report=str(written), profiled_at=stamp)
    source = subprocess.run(
        [ncu, "--import", str(written), "--csv", "--page", "source", "--print-source", "sass"],
        capture_output=True, text=True, timeout=timeout_s,
    )  # fmt: skip
    # An ncu without the source page, or samples, keeps the headline metrics alone.
    waits = parse_source_csv(source.stdout, profile.kernel) if source.returncode == 0 else None
    return replace(profile, waits=waits)


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def compare_rows(profiles: Sequence[Mapping[str, Any] | None]) -> list[list[str]]:
    """Rows of label then each profile's value (``–`` where a profile lacks it): the
    headline metrics, then each profile's top stall reasons (warps stalled per issued
    instruction), each reason with every profile's value."""
    rows = []
    for key, label, unit, _names in HEADLINE:
        cells = []
        for profile in profiles:
            value = ((profile or {}).get("metrics") or {}).get(key)
            cells.append("–" if value is None else f"{value:g}{(' ' + unit) if unit else ''}")
        if any(c != "–" for c in cells):
            rows.append([label, *cells])
    # Each profile's top reasons, one row a reason with every profile's value for it ("–" where
    # a profile did not store it: profiles before 2026-12-03 kept only their top three).
    stalls = [
        {r: v for r, v in (profile or {}).get("stalls") or [] if r not in NOT_REASONS}
        for profile in profiles
    ]
    reasons: list[str] = []
    for ranked in stalls:
        reasons += [r for r in list(ranked)[:TOP_STALLS] if r not in reasons]
    # Beside each value, the instruction that holds most of the reason's PC samples.
    waits = [(profile or {}).get("waits") for profile in profiles]
    for reason in reasons:
        cells = [
            (f"{s[reason]:g}" + (f" · {at}" if (at := top_site(w, reason)) else ""))
            if reason in s
            else "–"
            for s, w in zip(stalls, waits)
        ]
        rows.append([f"stall: {reason}", *cells])
    if any(waits):
        rows.append(["samples in key loop", *[_loop_share(w) for w in waits]])
        for rank in range(HOT_ROWS):
            cells = [_hot(w, rank) for w in waits]
            if any(c != "–" for c in cells):
                rows.append([f"hottest {rank + 1}", *cells])
    return rows


def _loop_share(waits: Mapping[str, Any] | None) -> str:
    share = (waits or {}).get("key_loop_share")
    return "–" if share is None else f"{share:.0%}"


def _hot(waits: Mapping[str, Any] | None, rank: int) -> str:
    """A profile's ``rank``-th hottest instruction and its share of the samples (its reasons
    are in the stall rows above it)."""
    hottest = (waits or {}).get("hottest") or []
    if rank >= len(hottest):
        return "–"
    site = WaitSite.from_dict(hottest[rank])
    return f"{site.short_opcode}{' loop' if site.in_key_loop else ''} {site.share:.0%}"


def _launch_once(spec: Mapping[str, Any]) -> None:
    """The child under ncu: build the launch, run it once to compile, then once in the range."""
    import numpy as np

    from workbench.backends import get_backend

    backend = get_backend(str(spec["backend"]), isolated=False)  # this process is the child
    problem = Problem.from_dict(spec["problem"])
    config = KernelConfig.from_dict(spec["config"])
    inputs = backend.make_inputs(problem, np.random.default_rng())
    launch = backend.prepare(problem, config, inputs)
    launch()
    backend.synchronize()
    lib = getattr(backend, "lib", "torch")  # CuPy backends say so; the peers run on torch
    if lib == "torch":
        import torch

        torch.cuda.nvtx.range_push(NVTX_RANGE)
        launch()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    else:
        import cupy

        cupy.cuda.nvtx.RangePush(NVTX_RANGE)
        launch()
        cupy.cuda.Device().synchronize()
        cupy.cuda.nvtx.RangePop()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    _launch_once(json.loads(sys.argv[1]))
