"""What one key block costs the kernel's consumer warps, read from its SASS (no GPU needed).

    python3 bench/sass_loop.py --head-dim 64 --config @bench/configs/d64-poly-probe.json:1

Compiles the config offline (tileiras, as :mod:`kernels.cutile.compile` does), disassembles the
cubin with ``nvdisasm`` (``pip install nvidia-cuda-nvdisasm==13.4.92``) and prints the key
loop's instructions by opcode with its issue, MUFU and tensor cycles per key block and SM
(:mod:`kernels.sass_costs` says how they are counted). ``fmha-workbench resources`` shows the
same shares beside registers and shared memory.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kernels.sass_costs import block_costs, consumer_warps, disassemble, key_block_loop  # noqa: E402


def read_config(text: str) -> dict[str, Any]:
    """A JSON object of launch knobs, or ``@FILE:INDEX`` for one entry of a config list."""
    if not text.startswith("@"):
        return json.loads(text)
    path, sep, index = text[1:].rpartition(":")
    if not sep:
        path, index = text[1:], "0"
    return json.loads(Path(path).read_text())[int(index)]


def main(argv: list[str] | None = None) -> int:
    from kernels.cubin_resources import read_resources
    from kernels.cutile.compile import compile_cubin, offline_plan

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--config", required=True, help="launch knobs as JSON, or @FILE:INDEX of a config list"
    )
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--mask", default="none")
    ap.add_argument("--seq-len", type=int, default=8192)
    ap.add_argument("--json", action="store_true", help="print JSON")
    args = ap.parse_args(argv)
    config = {"fast_math": True, "k_split": True, "remap": True, **read_config(args.config)}
    problem = dict(
        dtype=args.dtype, head_dim=args.head_dim, q_len=args.seq_len, heads=32, batch=4,
        mask=args.mask,
    )  # fmt: skip
    cubin = compile_cubin(arch="sm_90", **problem, **config)
    sass = disassemble(cubin)
    loop = key_block_loop(sass)
    warps = consumer_warps(sass, read_resources(cubin).threads)
    rows, keys, head_dim = offline_plan(**problem, **config)[0].values["TILE"]
    costs = block_costs(loop, consumer_warps=warps, rows=rows, keys=keys, head_dim=head_dim)
    counts = dict(loop.counts().most_common())
    if args.json:
        print(json.dumps({"config": config, "problem": problem, "counts": counts, **costs}))
        return 0
    print(f"key-block loop: {costs['instructions']} instructions a consumer warp, {warps} warps")
    print("  " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    tensor = costs["tensor_cycles"]
    for name in ("issue_cycles", "mufu_cycles", "tensor_cycles"):
        print(f"  {name:14s} {costs[name]:7.0f}  ({costs[name] / tensor:.2f} of tensor)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
