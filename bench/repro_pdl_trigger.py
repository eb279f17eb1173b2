"""A minimal reproduction: asking cuTile to launch the dependent grid early grows the kernel's
shared memory by tens of KB.

    python3 bench/repro_pdl_trigger.py            # offline: tileiras, no GPU

A programmatic dependent launch lets the next kernel (the decode form's combine) start its CTAs
while this one still runs; the early start needs this kernel to say when
(``ct.grid_dependency_control_launch_dependents()``, PTX ``griddepcontrol.launch_dependents``).
The script compiles one attention-like key loop (a 16-row q·Kᵀ, exp2, P·V over 128-key blocks,
bf16, D 128) for sm_90 three ways: without the call, with it first in the kernel, and with it
after the loop, and prints each cubin's registers, stack and shared memory. With tileiras
13.4.92 the call adds 48 KB (first) and 64 KB (after the loop) to the 113 KB of the plain loop
(KB of 1,024 bytes). In the decode split kernel it adds 61 KB (150 → 210 KB), and on the H200
the whole call at B=1 k_len 32k went from 37.3 to 40.2 µs (first) and 45.1 µs (at the end), so
the combine cannot be started early through cuTile (docs/experiments.md).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import cuda.tile as ct  # noqa: E402

from kernels.cubin_resources import read_resources  # noqa: E402
from kernels.cutile.compile import array_constraint  # noqa: E402
from kernels.cutile.forms import ArraySpec  # noqa: E402

ROWS, TILE, D, N = 16, 128, 128, 32768
PLACES = ("none", "first", "after-loop")


def key_loop(trigger_at: str):
    """The loop as a kernel, with the early-launch call at ``trigger_at`` (one of PLACES)."""

    @ct.kernel
    def attention_loop(K, V, Out, n_blocks: int, TILE: ct.Constant[int], D: ct.Constant[int]):
        row = ct.bid(0)
        if trigger_at == "first":
            ct.grid_dependency_control_launch_dependents()
        q = ct.load(K, index=(row, 0), shape=(ROWS, D))
        acc = ct.zeros((ROWS, D), dtype=ct.float32)
        for j in range(n_blocks):
            k = ct.load(K, index=(j, 0), shape=(TILE, D), latency=2)
            v = ct.load(V, index=(j, 0), shape=(TILE, D), latency=4)
            s = ct.mma(q, ct.transpose(k), ct.zeros((ROWS, TILE), dtype=ct.float32))
            p = ct.exp2(s, flush_to_zero=True).astype(ct.bfloat16)
            acc = ct.mma(p, v, acc)
        if trigger_at == "after-loop":
            ct.grid_dependency_control_launch_dependents()
        ct.store(Out, index=(row, 0), tile=acc)

    return attention_loop


def compile_loop(trigger_at: str) -> bytes:
    from cuda.tile.compilation import (
        CallingConvention,
        KernelSignature,
        ScalarConstraint,
        export_kernel,
    )

    arrays = [ArraySpec("bfloat16", (N, D)), ArraySpec("bfloat16", (N, D))]
    arrays.append(ArraySpec("float32", (N, D)))
    params = [*map(array_constraint, arrays), ScalarConstraint(ct.int32), TILE, D]
    buf = io.BytesIO()
    export_kernel(
        key_loop(trigger_at),
        [KernelSignature(params, CallingConvention.cutile_python_v2())],
        buf,
        gpu_code="sm_90",
        output_format="cubin",
    )
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    args = ap.parse_args(argv)
    found = {place: read_resources(compile_loop(place)) for place in PLACES}
    if args.json:
        print(json.dumps({place: vars(res) for place, res in found.items()}))
        return 0
    plain = found["none"].shared
    for place, res in found.items():
        grown = f"  (+{(res.shared - plain) / 1024:.0f} KB)" if res.shared != plain else ""
        print(
            f"{place:10}  {res.registers} registers, {res.stack} B stack, "
            f"{res.shared / 1024:.0f} KB shared{grown}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
