"""Run decode cases one process each, so that a device fault (a misaligned address is sticky
for the whole CUDA context) names its case and the combine tile it ran (needs a GPU).

    python3 bench/decode_isolate.py            # every case, with the shipped combine tile
    python3 bench/decode_isolate.py --columns 32   # the combine cut into 32-column blocks

Each case prints ok (with the relative error against a float32 reference) or the error.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# (batch, heads, kv_heads, q_len, k_len, input_pos, mask, knobs)
CASES: list[list[Any]] = json.loads(
    (ROOT / "bench" / "configs" / "decode" / "isolate.json").read_text()
)

CHILD = r"""
import json, math, sys
import torch
from kernels.cutile import forms, launch, plan as launch_plan
case, columns = json.loads(sys.argv[1]), int(sys.argv[2])
b, h, hk, ql, kl, ip, mask, knobs = case
if columns:
    shipped = launch_plan.combine_tile
    def cut(splits, rows, hd):
        s, r, d = shipped(splits, rows, hd)
        return s, 16 if rows >= 16 else r, min(columns, hd)
    launch_plan.combine_tile = cut
g = torch.Generator(device="cuda").manual_seed(1)
q = torch.randn((b, h, ql, 128), generator=g, device="cuda", dtype=torch.bfloat16)
k = torch.randn((b, hk, kl, 128), generator=g, device="cuda", dtype=torch.bfloat16)
v = torch.randn((b, hk, kl, 128), generator=g, device="cuda", dtype=torch.bfloat16)
out, lse = launch.attention(q, k, v, mask=mask, input_pos=ip, return_lse=True, **knobs)
torch.cuda.synchronize()
kf = k.float().repeat_interleave(h // hk, 1); vf = v.float().repeat_interleave(h // hk, 1)
s = (q.float() @ kf.transpose(-1, -2)) / math.sqrt(128)
if mask == "causal":
    seen = torch.ones(ql, kl, dtype=torch.bool, device="cuda").tril(ip)
    s = s.masked_fill(~seen, -math.inf)
ref = torch.softmax(s, -1).nan_to_num(0.0) @ vf
err = (torch.linalg.vector_norm(out.float() - ref) / torch.linalg.vector_norm(ref)).item()
p = forms.Problem(b, h, hk, ql, kl, 128, "bfloat16")
plan = forms.plan(p, launch.LaunchConfig.of(knobs), scale=0.1, mask=mask, input_pos=ip,
                  window=None, with_lse=True, with_map=False, sm_count=lambda: 132)
tiles = {n: plan.then.value(n) for n in ("TILE_S", "TILE_R", "TILE_DC")} if plan.then else {}
print(json.dumps({"ok": err < 2e-2, "rel_err": err, "grid": plan.grid, "combine": tiles}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--columns", type=int, default=0, help="cut the combine's head dim (0: no)")
    args = ap.parse_args()
    env = {**os.environ, "CUDA_LAUNCH_BLOCKING": "1", "PYTHONPATH": f"{ROOT}:" + os.environ.get(
        "PYTHONPATH", "")}  # fmt: skip
    for case in CASES:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(case), str(args.columns)],
            capture_output=True, text=True, env=env, cwd=ROOT,
        )  # fmt: skip
        lines = (done.stdout.strip() or done.stderr.strip()).splitlines()
        print(args.columns, case, lines[-1][:300] if lines else f"rc {done.returncode}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
