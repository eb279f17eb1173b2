"""A machine's measured roofline ceilings in one line (``machine`` and ``roofline`` print it)."""

from __future__ import annotations

from typing import Any


def ceilings_line(record: dict[str, Any]) -> str:
    matmul = ", ".join(f"{dtype} {tflops:g}" for dtype, tflops in record["matmul_tflops"].items())
    host = record.get("machine", {}).get("hostname", "?")
    return (
        f"#{record.get('id', '-')} {record['gpu_name']} ({host}, {record['measured_at']}): "
        f"matmul TFLOP/s {matmul}; read {record['read_gbs']:g} GB/s"
    )
