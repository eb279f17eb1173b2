"""The local GPU's streaming read, as ``bandwidth`` and ``machine --measure`` measure it: the
2 GiB figure with its fixed cost and rate, or the read at each of several sizes."""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING

from workbench.cli.exit_codes import EXIT_OK
from workbench.cli.output import emit_json, printable
from workbench.cli.values import UsageError

if TYPE_CHECKING:
    from workbench.analysis.bandwidth import ReadBandwidth


def local_gpu_name() -> str:
    """The GPU's name as its runs' machine records give it, or a refusal without one."""
    from workbench.backends.gpu import cupy_device, gpu_machine_info, torch_device

    if not (cupy_device().available or torch_device().available):
        raise UsageError(
            "bandwidth: no GPU here (the read bandwidth is measured on a GPU with CuPy or "
            f"torch: {cupy_device().reason})"
        )
    name = gpu_machine_info().get("gpu_name")
    if not name:
        raise UsageError("bandwidth: the GPU did not give its name; check nvidia-smi")
    return str(name)


def measured_read(gpu: str) -> ReadBandwidth:
    """This GPU's read: the 2 GiB figure, then the same read at ``READ_LINE_SIZES`` fitted as
    fixed + bytes / rate (kept without the line where the sizes give none)."""
    from workbench.analysis import bandwidth
    from workbench.analysis.streaming import fit_streaming

    measured = bandwidth.measure_gpu_read_bandwidth(gpu)
    sizes = [bandwidth.measure_gpu_read_bandwidth(gpu, n) for n in bandwidth.READ_LINE_SIZES]
    try:
        fit = fit_streaming([(m.bytes_read, m.bytes_read / m.gbs / 1e6) for m in sizes])
    except ValueError as exc:
        print(f"no fixed cost for the read: {exc}", file=sys.stderr)
        return measured
    return dataclasses.replace(
        measured, fixed_us=round(fit.fixed_us, 2), line_rate_gbs=round(fit.rate_gbs, 1)
    )


def bandwidth_by_size(gpu: str, sizes: list[int], as_json: bool) -> int:
    """The streaming read at each size, beside the stored (2 GiB) figure: below some size the
    launch and the first bytes' latency, not the memory, set what a kernel can read."""
    from workbench.analysis import bandwidth
    from workbench.analysis.streaming import COLD_KV_BYTES, fit_streaming
    from workbench.analysis.streaming import summary as streaming_summary

    stored = bandwidth.stored_measurements().get(gpu, {}).get("gbs")
    rows = []
    for size in sizes:
        measured = bandwidth.measure_gpu_read_bandwidth(gpu, size)
        us = measured.bytes_read / measured.gbs / 1e3
        share = 100.0 * measured.gbs / stored if stored else None
        rows.append({**dataclasses.asdict(measured), "us": us, "pct_of_stored": share})
        if not as_json:
            of = f"  {share:5.1f} % of {stored:.0f}" if share is not None else ""
            print(
                f"{measured.bytes_read / 1e6:10,.1f} MB  {us:9.1f} µs  {measured.gbs:7.0f} GB/s{of}"
            )
    # The plain read's own fixed cost and rate: the least any kernel reading these bytes pays.
    fit, no_fit = None, ""
    try:
        points = [(r["bytes_read"], r["us"] / 1e3) for r in rows]
        machine = {bandwidth.READ_BANDWIDTH_KEY: stored} if stored else {}
        fit = fit_streaming(points, machine, unit="size", of="")
    except ValueError as exc:
        no_fit = str(exc)
    if as_json:
        emit_json(
            {
                "gpu": gpu,
                "stored_gbs": stored,
                "sizes": rows,
                "fit": fit.to_dict() if fit else None,
                **({"no_fit": no_fit} if no_fit else {}),
            }
        )
        return EXIT_OK
    said = f"{streaming_summary(fit)} a call" if fit else f"no fit ({no_fit})"
    print(f"fixed + bytes / rate over the sizes past {COLD_KV_BYTES // 10**6} MB: {said}")
    print(f"{printable(gpu)}: {printable(rows[-1]['method'])}", file=sys.stderr)
    return EXIT_OK
