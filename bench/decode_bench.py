"""Decode on the GPU: the decode form (packed GQA heads, split key range, auto) beside SDPA
cuDNN and flash, in one process, interleaved (needs a GPU).

    python3 bench/decode_bench.py --rounds 5 --json decode.json [--only B1-k32k] [--variants ...]

bf16 GQA 32/8, D 128, the issue's problems (#34): B=8 q_len 1 k_len 8k; B=1 q_len 1 k_len 32k
and 128k; B=8 q_len 16 k_len 8k causal bottom-right (k_len = q_len + input_pos). Every variant
is first checked against a float32 reference (relative error < 2e-2), then timed with
``triton.testing.do_bench_cudagraph`` (median) once a round in a rotating order; a variant's
time is the median over rounds. TB/s = bytes of K and V / time. Each problem's K and V are
larger than the H200's 60 MB L2, so they come from HBM every replay without a flush; a problem
whose K+V fits in L2 times over rotating copies of its inputs instead.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

L2_BYTES = 60 * 1024 * 1024
# (name, batch, heads, kv_heads, q_len, k_len, causal)
PROBLEMS = (
    ("B8-q1-k8k", 8, 32, 8, 1, 8192, False),
    ("B1-q1-k8k", 1, 32, 8, 1, 8192, False),
    ("B1-q1-k32k", 1, 32, 8, 1, 32768, False),
    ("B1-q1-k128k", 1, 32, 8, 1, 131072, False),
    ("B8-q16-k8k-causal", 8, 32, 8, 16, 8192, True),
    ("B8-q1-k4k", 8, 32, 8, 1, 4096, False),
    ("B8-q16-k4k-causal", 8, 32, 8, 16, 4096, True),
    ("B8-q16-k4k", 8, 32, 8, 16, 4096, False),
)
DECODE_CONFIGS = ROOT / "bench" / "configs" / "decode"
# Our variants: name -> launch knobs (the tile form first: what the issue measured against).
VARIANTS: dict[str, dict[str, Any]] = json.loads((DECODE_CONFIGS / "variants.json").read_text())
# Explored once (docs/experiments.md): tiles, load latencies, CTAs per SM, the SM slots auto
# fills (``_slots``: plan.DECODE_CTAS_PER_SM for that variant), the combine's CTAs an SM
# (``_combine_occupancy``: both of plan.COMBINE_OCCUPANCY's, null for none), and the split
# kernel alone (``_first_only``: no combine, output incomplete, so not checked: its cost).
EXPLORE: dict[str, dict[str, Any]] = json.loads((DECODE_CONFIGS / "explore.json").read_text())
PEERS = ("sdpa-cudnn", "sdpa-flash")


def first_launch_only(q, k, v, mask: str, input_pos: int, knobs: dict[str, Any]):
    """The decode form's split kernel alone (no combine): what the combine costs beside it."""
    import cuda.tile as ct
    import torch

    from kernels.cutile import forms, launch, launches

    p = launch.check_inputs(q, k, v)
    config = launch.LaunchConfig.of(knobs)
    arrays = {"Q": q, "K": k, "V": v, "Out": torch.empty_like(q)}
    grid, args, form = launches.launch_of(
        p, arrays, config, launches.Allocator(p.lib, q), scale=1 / math.sqrt(q.shape[-1]),
        mask=mask, input_pos=input_pos, window=None,
    )  # fmt: skip
    kern = forms.kernel_variant(form, **config.hints())
    return lambda: ct.launch(torch.cuda.current_stream(), grid, kern, args)


def sdpa(which: str, q, k, v, causal: bool):
    """SDPA with one backend; GQA through enable_gqa; bottom-right causal as torch's
    causal_lower_right bias (an explicit bool mask where the backend refuses that)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right

    backend = {"sdpa-cudnn": SDPBackend.CUDNN_ATTENTION, "sdpa-flash": SDPBackend.FLASH_ATTENTION}
    masks: list[tuple[str, Any]] = [("none", None)]
    if causal:
        q_len, k_len = q.shape[2], k.shape[2]
        dense = torch.ones(q_len, k_len, dtype=torch.bool, device=q.device).tril(k_len - q_len)
        masks = [("causal_lower_right", causal_lower_right(q_len, k_len)), ("bool mask", dense)]
    errors = []
    for how, mask in masks:

        def run(mask=mask):
            with sdpa_kernel([backend[which]]):
                return torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, enable_gqa=True
                )

        try:
            run()
            torch.cuda.synchronize()
            return run, how
        except Exception as exc:  # the backend has no kernel for this: say which
            errors.append(f"{how}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
    return None, "; ".join(errors)


def reference(q, k, v, causal: bool):
    import torch

    group = q.shape[1] // k.shape[1]
    kf = k.float().repeat_interleave(group, dim=1)
    vf = v.float().repeat_interleave(group, dim=1)
    s = (q.float() @ kf.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        q_len, k_len = q.shape[2], k.shape[2]
        seen = torch.ones(q_len, k_len, dtype=torch.bool, device=q.device).tril(k_len - q_len)
        s = s.masked_fill(~seen, -math.inf)
    return torch.softmax(s, dim=-1) @ vf


def rel_err(out, ref) -> float:
    import torch

    return (torch.linalg.vector_norm(out.float() - ref) / torch.linalg.vector_norm(ref)).item()


def run_problem(
    problem: tuple, variants: list[str], rounds: int, seed: int, head_dim: int = 128
) -> dict[str, Any]:
    import torch
    import triton.testing

    from kernels.cutile import forms, launch, plan

    name, batch, heads, kv_heads, q_len, k_len, causal = problem
    gen = torch.Generator(device="cuda").manual_seed(seed)
    shape_q, shape_kv = (batch, heads, q_len, head_dim), (batch, kv_heads, k_len, head_dim)
    kv_bytes = 2 * batch * kv_heads * k_len * head_dim * 2
    copies = 1 if kv_bytes > L2_BYTES else -(-3 * L2_BYTES // kv_bytes)
    sets = [
        tuple(
            torch.randn(s, generator=gen, device="cuda", dtype=torch.bfloat16)
            for s in (shape_q, shape_kv, shape_kv)
        )
        for _ in range(copies)
    ]
    q, k, v = sets[0]
    ref = reference(q, k, v, causal)
    mask = "causal" if causal else "none"
    input_pos = k_len - q_len if causal else 0
    row: dict[str, Any] = {"problem": name, "kv_bytes": kv_bytes, "input_copies": copies}
    fns: dict[str, Any] = {}
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    for variant in variants:
        spec = {**VARIANTS, **EXPLORE}[variant]
        knobs = {kk: vv for kk, vv in spec.items() if not kk.startswith("_")}
        slots, combine_occupancy = plan.DECODE_CTAS_PER_SM, plan.COMBINE_OCCUPANCY
        plan.DECODE_CTAS_PER_SM = spec.get("_slots", slots)
        if "_combine_occupancy" in spec:  # one hint for both combines (with and without LSE)
            plan.COMBINE_OCCUPANCY = dict.fromkeys((False, True), spec["_combine_occupancy"])
        try:
            p = forms.Problem(batch, heads, kv_heads, q_len, k_len, head_dim, "bfloat16")
            call = forms.plan(
                p, launch.LaunchConfig.of(knobs), scale=0.1, mask=mask, input_pos=input_pos,
                window=None, with_lse=False, with_map=False, sm_count=lambda: sm,
            )  # fmt: skip
            row[variant] = {"form": call.form, "grid": list(call.grid)}
            if spec.get("_first_only"):
                fns[variant] = [
                    first_launch_only(a, b, c, mask, input_pos, knobs) for a, b, c in sets
                ]
                continue
            runs = [
                launch.prepare(a, b, c, mask=mask, input_pos=input_pos, **knobs) for a, b, c in sets
            ]
            err = rel_err(runs[0](), ref)
            row[variant]["rel_err"] = err
            if not err < 2e-2:
                row[variant]["error"] = "wrong result: not timed"
                continue
        except Exception as exc:
            row[variant] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            continue
        finally:
            plan.DECODE_CTAS_PER_SM, plan.COMBINE_OCCUPANCY = slots, combine_occupancy
        fns[variant] = runs
    for peer in PEERS:
        runs, how = [], ""
        for a, b, c in sets:
            fn, how = sdpa(peer, a, b, c, causal)
            if fn is None:
                break
            runs.append(fn)
        row[peer] = {"how": how}
        if runs:
            row[peer]["rel_err"] = rel_err(runs[0](), ref)
            fns[peer] = runs
    torch.cuda.synchronize()
    names = list(fns)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(-1, rounds):  # round -1 warms up, untimed
        order = names[r % len(names) :] + names[: r % len(names)] if names else []
        for n in order:
            runs = fns[n]
            turn = [0]

            def step(runs=runs, turn=turn):  # rotate input copies where K+V fits in L2
                runs[turn[0] % len(runs)]()
                turn[0] += 1

            ms = triton.testing.do_bench_cudagraph(step, rep=20, return_mode="median")
            if r >= 0:
                samples[n].append(float(ms))
    for n in names:
        us = statistics.median(samples[n]) * 1e3
        row[n].update(us=us, tbps=kv_bytes / (us * 1e-6) / 1e12, samples_ms=samples[n])
    return row


def _names(given: list[str] | None, known: list[str], what: str, ap: Any) -> list[str]:
    """``given`` split on commas too, each checked against ``known`` (ap.error otherwise)."""
    names = [n for item in given or [] for n in item.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown:
        ap.error(f"unknown {what} {', '.join(unknown)}; expected one of {', '.join(known)}")
    return names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds per problem")
    ap.add_argument("--json", type=Path, default=Path("decode-bench.json"), help="result file")
    ap.add_argument("--only", nargs="*", help="problem names (default: all)")
    ap.add_argument("--head-dim", type=int, default=128, help="head dim of every problem")
    ap.add_argument(
        "--variants", nargs="*", help=f"ours (default: {list(VARIANTS)}; also {list(EXPLORE)})"
    )
    args = ap.parse_args(argv)
    # Names by spaces or commas; an unknown one is refused (a comma list once matched nothing
    # and the run measured nothing, exit 0).
    only = _names(args.only, [p[0] for p in PROBLEMS], "problem", ap)
    variants = _names(args.variants, [*VARIANTS, *EXPLORE], "variant", ap) or list(VARIANTS)
    seed = int.from_bytes(os.urandom(4), "little")
    print("seed", seed, flush=True)
    rows = []
    for problem in PROBLEMS:
        if only and problem[0] not in only:
            continue
        rows.append(run_problem(problem, variants, args.rounds, seed, args.head_dim))
        args.json.write_text(json.dumps({"seed": seed, "rows": rows}, indent=1))
        row = rows[-1]
        size = f"D{args.head_dim}  K+V {row['kv_bytes'] / 1e6:.0f} MB"
        print(f"\n{row['problem']} {size}", flush=True)
        cudnn = row.get("sdpa-cudnn", {}).get("us")
        for n, r in row.items():
            if not isinstance(r, dict):
                continue
            if "us" in r:
                vs = f"  {cudnn / r['us']:.2f}x cuDNN" if cudnn else ""
                extra = f" grid {r['grid']}" if "grid" in r else f" ({r.get('how', '')})"
                print(f"  {n:18s} {r['us']:8.1f} us {r['tbps']:5.2f} TB/s{vs}{extra}", flush=True)
            else:
                print(f"  {n:18s} {r}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
