"""The serving kernels' speed on the GPU, one table (needs a GPU; under 3 minutes on an H100).

    python3 bench/serving_speed.py [--reps 50] [--json serving.json]

- **Paged decode vs our contiguous decode** on the same lengths: bf16, GQA 32/8, D 128, q_len 1,
  B=16 × 8192 keys; the paged cache at P = 16, 64, 256 (pages shuffled; P 16 also in 32-key
  blocks, P 64 also in 128-key blocks, beside the defaults), the contiguous one
  through a plain ``kernels.cutile.launch.prepare`` (the front door's decode form: packed
  GQA, auto splits). GB/s =
  K+V bytes read (whole pages) / time.
- **Ragged paged decode**: 1 × 32k + 63 × 1k at P = 64 with the ragged splits
  (``kernels.serving_schedule.plan_splits``) and with one unit per sequence: what the scheduler
  buys.
- **Varlen prefill vs torch SDPA on the padded batch**: fp16, GQA 32/8, D 128, causal, 16
  sequences of lognormal lengths (128-4096, seed 0); TFLOP/s counted on the real lengths only
  (4·D·H per visible (query, key) pair), for SDPA too.

Each case is checked against a torch fp32 reference first (relative error < 2e-2), then timed:
``triton.testing.do_bench_cudagraph`` median where triton is installed, else the median of
CUDA-event-timed loops.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
DECODE_BATCH, DECODE_KEYS = 16, 8192
# (page size, key block: None for the kernel's default, kernels.cutile.paged.default_block_n)
PAGED_VARIANTS = ((16, None), (16, 32), (64, None), (64, 128), (256, None))
RAGGED = [32768] + [1024] * 63
VARLEN_SEQS, VARLEN_MIN, VARLEN_MAX = 16, 128, 4096


def time_ms(fn: Callable[[], Any], reps: int) -> float:
    """Median milliseconds of one call of ``fn`` (already warmed up)."""
    import torch

    try:
        from triton.testing import do_bench_cudagraph

        return float(do_bench_cudagraph(fn, rep=reps, return_mode="median"))
    except ImportError:
        pass
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / reps)
    return statistics.median(times)


def rel_err(got: Any, want: Any) -> float:
    import torch

    return float(torch.linalg.vector_norm(got.float() - want) / torch.linalg.vector_norm(want))


def decode_reference(q, k, v):
    """q (B, 1, Hq, D), k/v (B, N, Hkv, D) contiguous per sequence: fp32 attention."""
    import torch

    group = q.shape[2] // k.shape[2]
    qf = q.float().transpose(1, 2)
    kf = k.float().transpose(1, 2).repeat_interleave(group, dim=1)
    vf = v.float().transpose(1, 2).repeat_interleave(group, dim=1)
    p = torch.softmax((qf @ kf.transpose(-1, -2)) / math.sqrt(q.shape[-1]), dim=-1)
    return (p @ vf).transpose(1, 2)


def paged_from(k, v, page_size: int, gen):
    """The contiguous (B, N, Hkv, D) k and v laid into shuffled pages, and the block table."""
    import torch

    batch, n, hkv, d = k.shape
    per_seq = -(-n // page_size)
    order = torch.randperm(batch * per_seq, generator=gen, device="cpu").to(k.device)
    table = order.view(batch, per_seq).to(torch.int32)
    pad = per_seq * page_size - n
    kp = torch.nn.functional.pad(k, (0, 0, 0, 0, 0, pad)).view(batch * per_seq, page_size, hkv, d)
    vp = torch.nn.functional.pad(v, (0, 0, 0, 0, 0, pad)).view(batch * per_seq, page_size, hkv, d)
    k_cache, v_cache = torch.empty_like(kp), torch.empty_like(vp)
    k_cache[order] = kp
    v_cache[order] = vp
    return k_cache, v_cache, table


def decode_rows(reps: int) -> list[dict[str, Any]]:
    import torch

    from kernels.cutile import launch
    from kernels.cutile.paged import plan_paged, prepare_paged

    gen = torch.Generator(device="cpu").manual_seed(0)  # the page order
    cuda_gen = torch.Generator(device="cuda").manual_seed(0)
    shape_q = (DECODE_BATCH, 1, HEADS, HEAD_DIM)
    shape_kv = (DECODE_BATCH, DECODE_KEYS, KV_HEADS, HEAD_DIM)
    q, k, v = (
        torch.randn(shape, generator=cuda_gen, device="cuda", dtype=torch.bfloat16)
        for shape in (shape_q, shape_kv, shape_kv)
    )
    want = decode_reference(q, k, v)
    rows = []
    # Ours, contiguous: the decode form reads (B, H, N, D) views of the (B, N, H, D) tensors.
    # A plain call on a decode shape takes the decode form (kernels.decode_choice).
    contiguous = launch.prepare(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    out = contiguous().transpose(1, 2)
    torch.cuda.synchronize()
    kv_bytes = 2 * k.numel() * k.element_size()
    problem = f"decode B{DECODE_BATCH} x {DECODE_KEYS} keys"
    rows.append(_row(problem, "ours contiguous", rel_err(out, want), time_ms(contiguous, reps),
                     kv_bytes))  # fmt: skip
    lens = torch.full((DECODE_BATCH,), DECODE_KEYS, dtype=torch.int32, device="cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for page, block_n in PAGED_VARIANTS:
        k_cache, v_cache, table = paged_from(k, v, page, gen)
        plan = plan_paged(lens.tolist(), q_len=1, heads=HEADS, kv_heads=KV_HEADS,
                          page_size=page, block_n=block_n, sm_count=sms)  # fmt: skip
        run, out, _ = prepare_paged(q, k_cache, v_cache, table, lens, plan=plan)
        run()
        torch.cuda.synchronize()
        pages_bytes = 2 * DECODE_BATCH * table.shape[1] * page * KV_HEADS * HEAD_DIM * 2
        name = f"ours paged P={page} (block_n {plan.block_n})"
        rows.append(_row(problem, name, rel_err(out, want), time_ms(run, reps), pages_bytes))
    return rows


def ragged_rows(reps: int) -> list[dict[str, Any]]:
    import torch

    from kernels.cutile.paged import plan_paged, prepare_paged
    from kernels.serving_schedule import one_unit_per_sequence

    gen = torch.Generator(device="cpu").manual_seed(1)  # the page order
    cuda_gen = torch.Generator(device="cuda").manual_seed(1)
    page = 64
    need = [-(-n // page) for n in RAGGED]
    pages = sum(need)
    shape = (pages, page, KV_HEADS, HEAD_DIM)
    k_cache = torch.randn(shape, generator=cuda_gen, device="cuda", dtype=torch.bfloat16)
    v_cache = torch.randn(shape, generator=cuda_gen, device="cuda", dtype=torch.bfloat16)
    order = torch.randperm(pages, generator=gen).to(torch.int32)
    table = torch.zeros((len(RAGGED), max(need)), dtype=torch.int32)
    at = 0
    for b, n in enumerate(need):
        table[b, :n] = order[at : at + n]
        at += n
    table = table.cuda()
    q = torch.randn((len(RAGGED), 1, HEADS, HEAD_DIM), generator=cuda_gen, device="cuda",
                    dtype=torch.bfloat16)  # fmt: skip
    lens = torch.tensor(RAGGED, dtype=torch.int32, device="cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    ragged = plan_paged(RAGGED, q_len=1, heads=HEADS, kv_heads=KV_HEADS, page_size=page,
                        sm_count=sms)  # fmt: skip
    unsplit = dataclasses.replace(ragged, schedule=one_unit_per_sequence(RAGGED, ragged.block_n))
    want = torch.cat([
        decode_reference(
            q[b : b + 1],
            k_cache[table[b, :n].long()].flatten(0, 1)[None, : RAGGED[b]],
            v_cache[table[b, :n].long()].flatten(0, 1)[None, : RAGGED[b]],
        )
        for b, n in enumerate(need)
    ])  # fmt: skip
    kv_bytes = 2 * pages * page * KV_HEADS * HEAD_DIM * 2
    rows = []
    for name, plan in (("ragged splits", ragged), ("one unit a sequence", unsplit)):
        run, out, _ = prepare_paged(q, k_cache, v_cache, table, lens, plan=plan)
        run()
        torch.cuda.synchronize()
        problem = f"ragged 1x32k+63x1k P={page}"
        span = plan.schedule.makespan(sms, KV_HEADS) / plan.schedule.ideal_span(sms, KV_HEADS)
        label = f"ours paged, {name} ({plan.schedule.slots} units, est. span {span:.2f}x ideal)"
        rows.append(_row(problem, label,
                         rel_err(out, want), time_ms(run, reps), kv_bytes))  # fmt: skip
    return rows


def varlen_rows(reps: int) -> list[dict[str, Any]]:
    import numpy as np
    import torch
    import torch.nn.functional as F

    from kernels.cutile.varlen import prepare_varlen

    rng = np.random.default_rng(0)
    mu = math.log(math.sqrt(VARLEN_MIN * VARLEN_MAX))
    lengths = np.clip(rng.lognormal(mu, 0.8, VARLEN_SEQS), VARLEN_MIN, VARLEN_MAX).astype(int)
    total, longest = int(lengths.sum()), int(lengths.max())
    cu = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int32, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(2)
    q = torch.randn((total, HEADS, HEAD_DIM), generator=gen, device="cuda", dtype=torch.float16)
    k = torch.randn((total, KV_HEADS, HEAD_DIM), generator=gen, device="cuda", dtype=torch.float16)
    v = torch.randn((total, KV_HEADS, HEAD_DIM), generator=gen, device="cuda", dtype=torch.float16)
    # The padded batch a user would hand SDPA: (B, H, longest, D), GQA heads repeated.
    group = HEADS // KV_HEADS
    qp = torch.zeros((VARLEN_SEQS, HEADS, longest, HEAD_DIM), device="cuda", dtype=torch.float16)
    kp = torch.zeros((VARLEN_SEQS, HEADS, longest, HEAD_DIM), device="cuda", dtype=torch.float16)
    vp = torch.zeros_like(kp)
    offs = np.concatenate([[0], np.cumsum(lengths)])
    for b, n in enumerate(lengths):
        s = slice(offs[b], offs[b + 1])
        qp[b, :, :n] = q[s].transpose(0, 1)
        kp[b, :, :n] = k[s].transpose(0, 1).repeat_interleave(group, dim=0)
        vp[b, :, :n] = v[s].transpose(0, 1).repeat_interleave(group, dim=0)
    flops = sum(4 * HEAD_DIM * HEADS * n * (n + 1) // 2 for n in lengths.tolist())
    run, out, _ = prepare_varlen(q, k, v, cu, cu, causal=True)
    run()

    def sdpa() -> Any:
        return F.scaled_dot_product_attention(qp, kp, vp, is_causal=True)

    padded = sdpa()
    torch.cuda.synchronize()
    want = torch.cat([padded[b, :, :n].transpose(0, 1) for b, n in enumerate(lengths)]).float()
    problem = f"varlen {VARLEN_SEQS} seqs {total} tokens (max {longest}) causal"
    return [
        _row(problem, "ours varlen", rel_err(out, want), time_ms(run, reps), None, flops),
        _row(problem, "torch SDPA padded", 0.0, time_ms(sdpa, reps), None, flops),
    ]


def _row(problem: str, variant: str, err: float, ms: float, kv_bytes: int | None,
         flops: int | None = None) -> dict[str, Any]:  # fmt: skip
    if err > 2e-2:
        raise SystemExit(f"{variant} on {problem}: relative error {err:.2e} against the reference")
    row: dict[str, Any] = {"problem": problem, "variant": variant, "rel_err": err, "ms": ms}
    if kv_bytes is not None:
        row["GB/s"] = kv_bytes / (ms * 1e-3) / 1e9
    if flops is not None:
        row["TFLOP/s"] = flops / (ms * 1e-3) / 1e12
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=50, help="ms of replays (cudagraph) or loops")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("serving_speed: needs torch (and a CUDA device)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("serving_speed: no CUDA device", file=sys.stderr)
        return 2
    rows = decode_rows(args.reps) + ragged_rows(args.reps) + varlen_rows(args.reps)
    device = torch.cuda.get_device_name(0)
    print(f"{device}")
    print(f"{'problem':44} {'variant':60} {'ms':>9} {'GB/s':>8} {'TFLOP/s':>8} {'rel err':>8}")
    for r in rows:
        gbs = f"{r['GB/s']:8.0f}" if "GB/s" in r else " " * 8
        tfs = f"{r['TFLOP/s']:8.1f}" if "TFLOP/s" in r else " " * 8
        print(f"{r['problem']:44} {r['variant']:60} {r['ms']:9.4f} {gbs} {tfs} {r['rel_err']:8.1e}")
    if args.json:
        args.json.write_text(json.dumps({"device": device, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
