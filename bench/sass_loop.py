"""What one key block costs the kernel's consumer warps, read from its SASS (no GPU needed).

    python3 bench/sass_loop.py --head-dim 64 --config @bench/configs/d64-poly-probe.json:1
    python3 bench/sass_loop.py --cubin fa4.cubin --tile 128,128,128   # another kernel's cubin

Compiles the config offline (tileiras, as :mod:`kernels.cutile.compile` does), disassembles the
cubin with ``nvdisasm`` (``pip install nvidia-cuda-nvdisasm==13.4.92``) and prints the key
loop's instructions by opcode with its issue, MUFU and tensor cycles per key block and SM
(:mod:`kernels.sass_costs` says how they are counted), and where the warps wait on each other:
whole-CTA barriers, named barriers (a subset of the warps) and mbarrier waits, in the kernel and
in the key loop; and on their own tensor-core products, with how many of those waits leave one
in flight. ``fmha-workbench resources`` shows the
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

from kernels.sass_costs import (  # noqa: E402
    block_costs,
    consumer_warps,
    disassemble,
    key_block_loop,
    sync_sites,
)


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
    ap.add_argument("--config", help="launch knobs as JSON, or @FILE:INDEX of a config list")
    ap.add_argument(
        "--cubin", type=Path,
        help="read this cubin instead of compiling ours (another kernel's: FA4's, kept by "
        "CUTE_DSL_KEEP_CUBIN=1 on the GPU host); --tile gives its rows, keys and head dim",
    )  # fmt: skip
    ap.add_argument("--tile", help="ROWS,KEYS,HEAD_DIM of a --cubin's tile (e.g. 128,128,128)")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--mask", default="none")
    ap.add_argument("--seq-len", type=int, default=8192)
    ap.add_argument("--json", action="store_true", help="print JSON")
    args = ap.parse_args(argv)
    if (args.config is None) == (args.cubin is None):
        ap.error("give one of --config (ours, compiled here) and --cubin (a kernel's cubin)")
    if args.cubin is not None:
        if not args.tile or len(args.tile.split(",")) != 3:
            ap.error("--cubin needs --tile ROWS,KEYS,HEAD_DIM")
        config: dict[str, Any] = {"cubin": str(args.cubin)}
        problem: dict[str, Any] = {"tile": args.tile}
        cubin = args.cubin.read_bytes()
        rows, keys, head_dim = (int(v) for v in args.tile.split(","))
    else:
        config = {"fast_math": True, "k_split": True, "remap": True, **read_config(args.config)}
        problem = dict(
            dtype=args.dtype, head_dim=args.head_dim, q_len=args.seq_len, heads=32, batch=4,
            mask=args.mask,
        )  # fmt: skip
        cubin = compile_cubin(arch="sm_90", **problem, **config)
        rows, keys, head_dim = offline_plan(**problem, **config)[0].values["TILE"]
    sass = disassemble(cubin)
    loop = key_block_loop(sass)
    warps = consumer_warps(sass, read_resources(cubin).threads)
    costs = block_costs(loop, consumer_warps=warps, rows=rows, keys=keys, head_dim=head_dim)
    counts = dict(loop.counts().most_common())
    syncs = sync_sites(sass)
    if args.json:
        out = {"config": config, "problem": problem, "counts": counts, "syncs": syncs, **costs}
        print(json.dumps(out))
        return 0
    print(f"key-block loop: {costs['instructions']} instructions a consumer warp, {warps} warps")
    print("  " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    tensor = costs["tensor_cycles"]
    for name in ("issue_cycles", "mufu_cycles", "tensor_cycles"):
        print(f"  {name:14s} {costs[name]:7.0f}  ({costs[name] / tensor:.2f} of tensor)")
    named = syncs["named_barriers"]
    print(
        "where warps wait on each other (sites in the kernel / in the key loop): "
        f"whole-CTA barriers {syncs['cta_barriers']['sites']} / "
        f"{syncs['cta_barriers']['in_key_loop']}, named barriers {named['sites']} / "
        f"{named['in_key_loop']} (ids {', '.join(named['ids']) or 'none'}), mbarrier waits "
        f"{syncs['mbarrier_waits']['sites']} / {syncs['mbarrier_waits']['in_key_loop']}"
    )
    tensor = syncs["tensor_waits"]
    print(
        f"waits for the tensor cores: {tensor['sites']} / {tensor['in_key_loop']}, of those in "
        f"the key loop {tensor['partial_in_key_loop']} leave a product in flight"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
