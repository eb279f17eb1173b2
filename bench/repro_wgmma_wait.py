"""A minimal reproduction: tileiras waits for every tensor-core product it has issued, never some.

    python3 bench/repro_wgmma_wait.py            # offline: tileiras and nvdisasm, no GPU

A cuTile loop issues two independent products a block, s = a·b[j] and acc += p·c[j], then work
that needs only s (p = exp2(s)). Hopper's warpgroup MMA can keep several products in flight and
wait for the oldest alone (``wgmma.wait_group 1``, ``WARPGROUP.DEPBAR.LE gsb0, 0x1`` in SASS):
FlashAttention-4's sm_90 key loop issues the next q·Kᵀ and this block's P·V back to back and
waits for the first only. The script compiles the loop for sm_90 over 8 worker warps (as our
prefill kernel runs) and prints the loop's HGMMA groups, exp2s and waits in order, then how many
waits leave a product in flight. With tileiras 13.4.92 none does: every wait is ``0x0``, so a
product can overlap only work issued after the previous wait (here the exp2s overlap the second
product), never a product issued before it. cuTile has no way to ask for a partial wait; our
prefill kernel's consumer warpgroups spend 36 % of their samples at these waits at D 128 on the
H200 (docs/experiments.md).
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import cuda.tile as ct  # noqa: E402

from kernels.cutile.compile import array_constraint  # noqa: E402
from kernels.cutile.forms import ArraySpec  # noqa: E402
from kernels.sass_costs import (  # noqa: E402
    disassemble,
    key_block_loop,
    opcode,
    parse,
    sync_sites,
)

TILE, D, N = 128, 128, 8192


@ct.kernel
def two_products(A, B, C, Out, n_blocks: int, TILE: ct.Constant[int], D: ct.Constant[int]):
    """acc = Σ_j exp2(a · b[j-1]) · c[j] over key blocks j: two independent products a block."""
    row = ct.bid(0)
    a = ct.load(A, index=(row, 0), shape=(TILE, D))  # [TILE, D]
    acc = ct.zeros((TILE, D), dtype=ct.float32)
    p = ct.zeros((TILE, TILE), dtype=ct.float16)
    for j in range(n_blocks):
        b = ct.load(B, index=(0, j), shape=(D, TILE))  # [D, TILE]
        c = ct.load(C, index=(j, 0), shape=(TILE, D))  # [TILE, D]
        s = ct.mma(a, b, ct.zeros((TILE, TILE), dtype=ct.float32))  # product 1
        acc = ct.mma(p, c, acc)  # product 2: needs nothing of product 1
        p = ct.exp2(s, flush_to_zero=True).astype(ct.float16)  # needs product 1 only
    ct.store(Out, index=(row, 0), tile=acc.astype(ct.float16))


def worker_warps_hint() -> str:
    """The compiler hint behind ``--worker-warps``, as the knob registry names it."""
    from kernels.knobs import KNOBS

    return next(k.hint for k in KNOBS.values() if k.flag == "--worker-warps")


def compile_loop(worker_warps: int | None) -> bytes:
    from cuda.tile.compilation import (
        CallingConvention,
        KernelSignature,
        ScalarConstraint,
        export_kernel,
    )

    arrays = [ArraySpec("float16", shape) for shape in ((N, D), (D, N), (N, D), (N, D))]
    params = [*map(array_constraint, arrays), ScalarConstraint(ct.int32), TILE, D]
    kernel = two_products
    if worker_warps:
        kernel = kernel.replace_hints(**{worker_warps_hint(): worker_warps})
    buf = io.BytesIO()
    export_kernel(
        kernel,
        [KernelSignature(params, CallingConvention.cutile_python_v2())],
        buf,
        gpu_code="sm_90",
        output_format="cubin",
    )
    return buf.getvalue()


def loop_events(sass: str) -> list[str]:
    """The loop's HGMMA groups and warpgroup waits, in order (runs of HGMMA counted)."""
    loop = key_block_loop(sass)
    events: list[str] = []
    for address, text in parse(sass)[0]:
        if not loop.start <= address <= loop.end:
            continue
        op = opcode(text)
        if op.startswith("HGMMA"):
            if events and events[-1].startswith("HGMMA"):
                count = int(events[-1].split("×")[1]) + 1 if "×" in events[-1] else 2
                events[-1] = f"HGMMA×{count}"
            else:
                events.append("HGMMA")
        elif op.startswith("WARPGROUP.DEPBAR"):
            events.append(text.split(None, 1)[1] if text.startswith("@") else text)
        elif op.startswith("MUFU") and (not events or events[-1] != "MUFU…"):
            events.append("MUFU…")
    return events


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker-warps", type=int, default=8, choices=(4, 8), help="hint (8)")
    args = ap.parse_args(argv)
    sass = disassemble(compile_loop(args.worker_warps))
    print("the loop, in order:", " | ".join(loop_events(sass)))
    waits = sync_sites(sass)["tensor_waits"]
    print(
        f"{waits['in_key_loop']} waits for the tensor cores in the loop, "
        f"{waits['partial_in_key_loop']} leave a product in flight"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
