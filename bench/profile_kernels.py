"""Launch the cuTile kernel and torch SDPA cuDNN once each per problem, for Nsight Compute.

    ncu --clock-control none --nvtx --nvtx-include "profile/" --set full -o OUT/prof \\
        python3 bench/profile_kernels.py --ns 2048,8192 --masks none,causal

Each measured launch runs inside an NVTX range named ``profile`` after warm-up launches outside
it (the cuTile JIT compile, cuDNN's plan build), so ``--nvtx-include "profile/"`` profiles exactly
one launch of each. The order of the profiled launches is printed, so the report's rows can be
told apart (``scripts/gpu_check.sh profile`` runs this and writes the report's details). The
H200's findings: bench/results/experiments/h200-profile.md and h200-profile-source.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.explore_lib import add_shape_args, config_label, sdpa  # noqa: E402

# The configs the sm_90 autotuner picks for N = 2048 (64x128, two CTAs per SM) and from 4096 up
# (128x128, 8 worker warps, polynomial exp2): bench/configs/sm90-picks.json.
DEFAULT_CONFIGS: list[dict[str, Any]] = json.loads(
    (ROOT / "bench" / "configs" / "sm90-picks.json").read_text()
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_shape_args(ap, ns="2048,8192")
    ap.add_argument("--configs", default=None, help="JSON list of launch configs")
    args = ap.parse_args(argv)

    import torch

    from kernels import cutile_fmha as F

    configs = json.loads(args.configs) if args.configs else DEFAULT_CONFIGS
    order = []
    for mask in [m for m in args.masks.split(",") if m]:
        causal = mask == "causal"
        for n in [int(x) for x in args.ns.split(",") if x]:
            torch.manual_seed(n + causal)
            q, k, v = (
                torch.randn(args.batch, args.heads, n, args.dim, device="cuda", dtype=torch.float16)
                for _ in "qkv"
            )
            runners = {"cudnn": sdpa("cudnn", q, k, v, causal)}
            for cfg in configs:
                runners[config_label(cfg)] = F.prepare(q, k, v, mask=mask, **cfg)
            for name, fn in runners.items():
                for _ in range(3):  # compile / plan outside the profiled range
                    fn()
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_push("profile")
                fn()
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()
                order.append(f"{len(order)}: {name} {mask} N={n}")
                print(order[-1], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
