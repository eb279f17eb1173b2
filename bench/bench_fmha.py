"""Benchmark: the cuTile FMHA kernel (ladder of knobs + autotuned) against torch SDPA peers.

    python bench/bench_fmha.py --out DIR                       # full run (B=4, H=32, D=128)
    python bench/bench_fmha.py --ns 1024,2048 --steps baseline,tuned --rounds 1   # smoke

For each (causal, N): fresh random fp16 inputs; every backend is checked against a float64
reference on a slice of rows before it is timed; then all backends are timed interleaved
(``--rounds`` rounds, in an order where each backend follows each other one equally often,
``kernels.measure.balanced_order``) with CUDA-graph replay
(``triton.testing.do_bench_cudagraph``, median), and the median over rounds is reported.
TFLOP/s = 4·B·H·N²·D / time, halved for causal. Writes ``fmha-bench.json`` and
``fmha-bench.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kernels.knobs import DEFAULT_LOAD_LATENCIES  # noqa: E402  (after the path set-up)
from kernels.measure import balanced_order  # noqa: E402

T = TypeVar("T")  # what one measurement returns

# The knob ladder: each step adds one thing to the one before (the first is the plain
# baseline). "tuned" is the autotuner's pick for the problem class.
LADDER: dict[str, dict[str, Any]] = {
    "baseline": dict(tile_m=64, tile_n=64, fast_math=False, k_split=False, remap=False),
    "256x128": dict(tile_m=256, tile_n=128, fast_math=False, k_split=False, remap=False),
    "+fast_math": dict(tile_m=256, tile_n=128, fast_math=True, k_split=False, remap=False),
    "+k_split": dict(tile_m=256, tile_n=128, fast_math=True, k_split=True, remap=False),
    "+remap": dict(tile_m=256, tile_n=128, fast_math=True, k_split=True, remap=True),
    "+worker_warps": dict(
        tile_m=256, tile_n=128, fast_math=True, k_split=True, remap=True, num_worker_warps=8
    ),
}
PEERS = ("flash", "cudnn", "naive")
# --tune-space quick: (tile_m, tile_n, occupancy, num_worker_warps) of the search space kept.
QUICK_SPACE = {(64, 64, 2, None), (64, 128, 2, None), (128, 64, None, 8), (128, 128, None, 8)}


def add_shape_args(ap: argparse.ArgumentParser, ns: str) -> None:
    """--ns, --masks, --batch, --heads, --dim: the problem options of the side scripts
    (explore_configs.py, profile_kernels.py), with the benchmark's shape as the default."""
    ap.add_argument("--ns", default=ns, help="sequence lengths")
    ap.add_argument("--masks", default="causal,none", help="from causal, none")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--dim", type=int, default=128)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ns", default="1024,2048,4096,8192,16384", help="sequence lengths")
    ap.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    ap.add_argument(
        "--steps",
        default=",".join([*LADDER, "tuned"]),
        help=f"ladder steps to time, from {[*LADDER, 'tuned']}",
    )
    ap.add_argument("--peers", default=",".join(PEERS), help=f"peers to time, from {PEERS}")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    ap.add_argument("--rep-ms", type=float, default=25.0, help="do_bench rep per measurement")
    ap.add_argument("--tune-cache", default=None, help="autotune JSON (default: in --out)")
    ap.add_argument("--tune-space", default=None, help="'quick' or a JSON list of configs")
    ap.add_argument("--precompile", type=int, default=8, help="processes warming the compile cache")
    ap.add_argument("--canary-s", type=float, default=150.0, help="precompile deadline (hangs)")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench-out"))
    ap.add_argument("--label", default="h200")
    return ap.parse_args(argv)


# --------------------------------------------------------------------------------------------
# Machine metadata
# --------------------------------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    import torch

    from kernels import cutile_fmha as F

    info: dict[str, Any] = {
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "cuda_tile": F.ct.__version__,
        "tileiras": F.tileiras_version(),
        "gpu": torch.cuda.get_device_name(0),
        "capability": ".".join(map(str, torch.cuda.get_device_capability(0))),
        "sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
        "commit": os.environ.get("FMHA_COMMIT", "unknown"),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    for mod in ("triton", "cupy"):
        try:
            info[mod] = __import__(mod).__version__
        except Exception:
            info[mod] = None
    info["nvidia_smi"] = nvidia_smi()
    return info


def nvidia_smi() -> dict[str, str]:
    fields = (
        "name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,"
        "power.limit,temperature.gpu,persistence_mode,compute_mode"
    )
    try:
        line = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        ).stdout.strip().splitlines()[0]  # fmt: skip
        return dict(zip(fields.split(","), (x.strip() for x in line.split(",")), strict=False))
    except Exception as exc:
        return {"error": str(exc)}


# --------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------


def flops(b: int, h: int, n: int, d: int, causal: bool) -> float:
    f = 4.0 * b * h * n * n * d
    return f / 2 if causal else f


def sdpa(backend: str, q, k, v, causal: bool):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    which = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]

    gqa = k.shape[1] != q.shape[1]  # fewer kv heads: torch maps query head i to i // group

    def run():
        with sdpa_kernel([which]):
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=causal, enable_gqa=gqa
            )

    return run


def naive(q, k, v, causal: bool):
    import torch

    n = q.shape[2]
    scale = 1.0 / math.sqrt(q.shape[3])
    tri = torch.ones(n, n, dtype=torch.bool, device=q.device).tril() if causal else None

    def run():
        s = (q @ k.transpose(-1, -2)).float() * scale
        if tri is not None:
            s = s.masked_fill(~tri, -math.inf)
        return (torch.softmax(s, dim=-1).to(q.dtype)) @ v

    return run


def naive_fits(b: int, h: int, n: int) -> bool:
    import torch

    free, _ = torch.cuda.mem_get_info()
    need = b * h * n * n * (2 + 4 + 4 + 2)  # fp16 scores, fp32 copy, softmax, fp16 probs
    return need < 0.7 * free


def check_rows(out, q, k, v, causal: bool, rows: int = 128) -> float:
    """Relative error against float64 on batch 0, four heads, the first and last rows."""
    import torch

    n = q.shape[2]
    idx = torch.cat([torch.arange(min(rows, n)), torch.arange(max(n - rows, 0), n)]).unique()
    idx = idx.to(q.device)
    qd = q[0, :4, idx].double()
    kv_head = torch.arange(4, device=q.device) // (q.shape[1] // k.shape[1])  # GQA grouping
    kd, vd = k[0, kv_head].double(), v[0, kv_head].double()
    s = (qd @ kd.transpose(-1, -2)) / math.sqrt(q.shape[3])
    if causal:
        cols = torch.arange(n, device=q.device)
        s = s.masked_fill(cols[None, None, :] > idx[None, :, None], -math.inf)
    ref = torch.softmax(s, dim=-1) @ vd
    got = out[0, :4, idx].double()
    return (torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)).item()


def time_fn(fn, rep_ms: float) -> float:
    """Median milliseconds of ``fn`` replayed from a CUDA graph (no host launch overhead)."""
    import triton.testing

    try:
        return float(triton.testing.do_bench_cudagraph(fn, rep=rep_ms, return_mode="median"))
    except Exception as exc:  # a backend that cannot be captured: plain event timing
        print(f"  (graph capture failed: {type(exc).__name__}: {exc}; using do_bench)")
        return float(triton.testing.do_bench(fn, warmup=25, rep=rep_ms, return_mode="median"))


def timed_rounds(measures: dict[str, Callable[[], T]], rounds: int) -> dict[str, list[T]]:
    """Call every measurement once per round, the rounds in a balanced order (each one follows
    each other equally often: a backend inherits the clock its predecessor left); returns each
    name's results in round order."""
    samples: dict[str, list[T]] = {name: [] for name in measures}
    names = list(measures)
    for r in range(rounds):
        for i in balanced_order(len(names), r):
            samples[names[i]].append(measures[names[i]]())
    return samples


# --------------------------------------------------------------------------------------------
# Compile-cache warm-up in parallel processes
# --------------------------------------------------------------------------------------------


def _compile_one(job: dict[str, Any]) -> tuple[str, float, str | None]:
    """Launch one config on a tiny problem with the same shape specialisation as the real one."""
    import torch

    from kernels import cutile_fmha as F

    t0 = time.perf_counter()
    try:
        q, k, v = F.random_qkv(
            job["batch"], job["heads"], job["heads"], 128, 128, job["dim"], job["dtype"]
        )
        kw = {kk: vv for kk, vv in job.items() if kk not in ("batch", "heads", "dim", "dtype")}
        F.attention(q, k, v, **kw)
        torch.cuda.synchronize()
        return json.dumps(kw, sort_keys=True), time.perf_counter() - t0, None
    except Exception as exc:
        return json.dumps(job, sort_keys=True), time.perf_counter() - t0, repr(exc)[:300]


def compile_job(
    config: dict[str, Any], mask: str, batch: int, heads: int, dim: int, dtype: str = "float16"
) -> dict[str, Any]:
    """One :func:`precompile` job: a launch config (unset knobs dropped) on the run's shape."""
    knobs = {kk: vv for kk, vv in config.items() if vv is not None}
    return {**knobs, "mask": mask, "batch": batch, "heads": heads, "dim": dim, "dtype": dtype}


def precompile(jobs: list[dict[str, Any]], processes: int, timeout_s: float) -> set[str]:
    """Fill cuTile's on-disk cache from several processes (compiles serialise in one process).

    Sequence lengths of 128 keep the JIT's shape specialisation (multiple of 16) equal to the
    benchmark's; batch and heads are the benchmark's own. (A first H200 run warmed with batch 1
    and the main process still compiled: autotune took 13 s at the first N and 1 s after. A
    size-1 batch dimension changing the JIT signature is the likely cause; not confirmed.)
    It doubles as a canary: a variant that fails, or does not finish within ``timeout_s``
    (a hung kernel), is returned so the benchmark leaves it out instead of hanging on it.
    """
    bad: set[str] = set()
    if processes <= 1 or not jobs:
        return bad
    t0 = time.perf_counter()
    pool = mp.get_context("spawn").Pool(processes)
    try:
        pending = {
            json.dumps(j, sort_keys=True): pool.apply_async(_compile_one, (j,)) for j in jobs
        }
        deadline = time.perf_counter() + timeout_s
        for key, res in pending.items():
            try:
                _, secs, err = res.get(timeout=max(deadline - time.perf_counter(), 1.0))
            except mp.TimeoutError:
                secs, err = math.nan, f"did not finish within {timeout_s:.0f}s (hung?)"
            if err:
                bad.add(_variant_key(json.loads(key)))
            print(f"  precompile {secs:5.1f}s {key}{' FAILED ' + err if err else ''}", flush=True)
    finally:
        pool.terminate()  # kills any hung child, which frees the GPU it was holding
    print(f"precompiled {len(jobs)} variants in {time.perf_counter() - t0:.0f}s", flush=True)
    return bad


def config_label(cfg: dict[str, Any]) -> str:
    """A launch config in a few words, e.g. ``128x128 ww8 lat2/4 poly16 stg pers u2``: the tiles,
    the hints that are set, the load latencies, and the knobs that differ from their defaults."""
    parts = [f"{cfg['tile_m']}x{cfg['tile_n']}"]
    for key, short in (("occupancy", "occ"), ("num_worker_warps", "ww"), ("num_ctas", "ctas")):
        if cfg.get(key):
            parts.append(f"{short}{cfg[key]}")
    k_lat, v_lat = DEFAULT_LOAD_LATENCIES
    parts.append(f"lat{cfg.get('k_latency', k_lat)}/{cfg.get('v_latency', v_lat)}")
    if cfg.get("pipeline"):
        parts.append("pipe")
    if cfg.get("poly_exp2_cols"):
        parts.append(f"poly{cfg['poly_exp2_cols']}")
    if cfg.get("remap") is False:
        parts.append("no-remap")
    if cfg.get("store_tma") is False:
        parts.append("stg")
    if cfg.get("persistent"):
        parts.append("pers")
    if cfg.get("k_unroll", 1) != 1:
        parts.append(f"u{cfg['k_unroll']}")
    return " ".join(parts)


def _variant_key(job: dict[str, Any]) -> str:
    keep = {
        kk: vv
        for kk, vv in job.items()
        if kk not in ("batch", "heads", "dim", "dtype") and vv is not None
    }
    return json.dumps(keep, sort_keys=True)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from kernels import cutile_fmha as F
    from kernels.tuning_spaces import search_space

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    ns = [int(x) for x in args.ns.split(",") if x]
    causals = {"both": [False, True], "yes": [True], "no": [False]}[args.causal]
    steps = [s for s in args.steps.split(",") if s]
    peers = [s for s in args.peers.split(",") if s]
    for s in steps:
        if s not in LADDER and s != "tuned":
            raise SystemExit(f"unknown step {s!r}; choose from {[*LADDER, 'tuned']}")
    b, h, d, dt = args.batch, args.heads, args.dim, args.dtype
    tdt = getattr(torch, dt)
    tune_cache = Path(args.tune_cache) if args.tune_cache else out_dir / "autotune.json"
    arch = F.gpu_arch()
    space = search_space(arch, d)
    if args.tune_space == "quick":  # the likely winners only, for a short device call
        space = [
            c
            for c in space
            if (c["tile_m"], c["tile_n"], c["occupancy"], c["num_worker_warps"]) in QUICK_SPACE
        ]
    elif args.tune_space:
        space = json.loads(args.tune_space)

    # Each mask is tuned over the table's own choice for it (no clusters without a mask), as
    # the product's autotune does, unless --tune-space named the configs.
    per_mask = not args.tune_space or args.tune_space == "quick"
    tune_spaces = {
        mask: [c for c in space if c in search_space(arch, d, mask)] if per_mask else space
        for mask in ("causal", "none")
    }

    info = machine_info()
    print(json.dumps(info, indent=1), flush=True)

    # Warm the compile cache for every variant this run will launch, in parallel.
    jobs = []
    for causal in causals:
        mask = "causal" if causal else "none"
        jobs += [compile_job(LADDER[s], mask, b, h, d, dt) for s in steps if s in LADDER]
        if "tuned" in steps:
            jobs += [compile_job(c, mask, b, h, d, dt) for c in tune_spaces[mask]]
    bad = precompile(jobs, args.precompile, args.canary_s)
    tune_spaces = {
        mask: [c for c in configs if _variant_key({**c, "mask": mask}) not in bad]
        for mask, configs in tune_spaces.items()
    }

    results: list[dict[str, Any]] = []
    for causal in causals:
        mask = "causal" if causal else "none"
        for n in ns:
            torch.manual_seed(1000 * n + causal)
            q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=tdt) for _ in range(3))
            fl = flops(b, h, n, d, causal)
            runners: dict[str, Any] = {}
            configs: dict[str, Any] = {}
            for s in steps:
                if s == "tuned":
                    t0 = time.perf_counter()
                    cfg = F.autotune(
                        q, k, v, mask=mask, configs=tune_spaces[mask], cache_path=tune_cache
                    )
                    meta = cfg.pop("_tuning")
                    print(
                        f"[{mask} N={n}] autotune {time.perf_counter() - t0:.1f}s "
                        f"cached={meta['cached']} -> {cfg}",
                        flush=True,
                    )
                    configs[s] = {**cfg, "tuning": meta}
                    kw = cfg
                else:
                    kw = LADDER[s]
                    configs[s] = kw
                    if _variant_key({**kw, "mask": mask}) in bad:
                        print(f"[{mask} N={n}] {s}: left out (failed or hung in precompile)")
                        continue
                runners[s] = F.prepare(q, k, v, mask=mask, **kw)
            for peer in peers:
                if peer == "naive":
                    if naive_fits(b, h, n):
                        runners[peer] = naive(q, k, v, causal)
                else:
                    runners[peer] = sdpa(peer, q, k, v, causal)

            # Correctness first (each backend, float64 reference on a slice of rows).
            errors: dict[str, float] = {}
            for name, fn in list(runners.items()):
                try:
                    res = fn()
                    res = res[0] if isinstance(res, tuple) else res
                    torch.cuda.synchronize()
                    errors[name] = check_rows(res, q, k, v, causal)
                    if not errors[name] <= 2e-2:
                        print(f"[{mask} N={n}] {name}: rel err {errors[name]:.2e}: NOT timed")
                        runners.pop(name)
                except Exception as exc:
                    print(f"[{mask} N={n}] {name} failed: {type(exc).__name__}: {exc}")
                    errors[name] = math.nan
                    runners.pop(name)
                    torch.cuda.synchronize()

            # Interleaved timing rounds in a balanced order: a backend inherits the clock its
            # predecessor left (h200-explore-timing.md), and in a fixed or merely rotated order
            # the tuned kernel ran right after the memory-bound naive one in nearly every round.
            samples = timed_rounds(
                {name: functools.partial(time_fn, fn, args.rep_ms) for name, fn in runners.items()},
                args.rounds,
            )
            row: dict[str, Any] = {"causal": causal, "n": n, "flops": fl, "backends": {}}
            for name in [*steps, *peers]:
                if samples.get(name):
                    ms = statistics.median(samples[name])
                    row["backends"][name] = {
                        "ms": ms,
                        "ms_rounds": samples[name],
                        "tflops": fl / (ms * 1e-3) / 1e12,
                        "rel_err": errors.get(name),
                        "config": configs.get(name),
                    }
                else:
                    row["backends"][name] = {"ms": None, "rel_err": errors.get(name)}
            results.append(row)
            brief = "  ".join(
                f"{kk}={vv['tflops']:.0f}" for kk, vv in row["backends"].items() if vv.get("ms")
            )
            print(f"[{mask} N={n}] TFLOP/s: {brief}", flush=True)
            del q, k, v, runners
            torch.cuda.empty_cache()
            # Written after every problem, so a run cut short still leaves its numbers.
            doc = {
                "machine": info,
                "args": vars(args),
                "ladder": LADDER,
                "results": results,
                "left_out": sorted(bad),
            }
            (out_dir / "fmha-bench.json").write_text(json.dumps(doc, indent=1, default=str))
            (out_dir / "fmha-bench.md").write_text(to_markdown(doc, steps, peers))

    print((out_dir / "fmha-bench.md").read_text())
    return 0


def to_markdown(doc: dict[str, Any], steps: list[str], peers: list[str]) -> str:
    m = doc["machine"]
    smi = m.get("nvidia_smi", {})
    lines = [
        f"# FMHA forward on {m['gpu']} ({m['when']})",
        "",
        f"driver {smi.get('driver_version')}, SM clock {smi.get('clocks.sm')} (max "
        f"{smi.get('clocks.max.sm')}), torch {m['torch']}, cuDNN {m['cudnn']}, triton "
        f"{m['triton']}, cuda-tile {m['cuda_tile']}, tileiras {m['tileiras']}, commit "
        f"{m['commit']}.",
        "",
        f"{doc['args']['dtype']}, B={doc['args']['batch']}, H={doc['args']['heads']}, "
        f"D={doc['args']['dim']}, forward only. TFLOP/s = 4·B·H·N²·D / time, halved for "
        "causal; time = median over interleaved rounds (a balanced order: each backend follows "
        "each other one equally often) of the CUDA-graph median.",
        "",
        "## Autotuned cuTile vs peers",
        "",
        "| causal | N | cuTile tuned | flash (FA2) | cuDNN | naive | tuned/cuDNN | tuned/flash "
        "| tuned config |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def tf(row: dict[str, Any], name: str) -> float | None:
        bk = row["backends"].get(name) or {}
        return bk.get("tflops") if bk.get("ms") else None

    def fmt(x: float | None) -> str:
        return f"{x:.0f}" if x is not None else "–"

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}×" if a and b else "–"

    for row in doc["results"]:
        t = tf(row, "tuned")
        cfg = (row["backends"].get("tuned") or {}).get("config") or {}
        cfg_s = config_label(cfg) if cfg else "–"
        lines.append(
            f"| {'yes' if row['causal'] else 'no'} | {row['n']} | {fmt(t)} | "
            f"{fmt(tf(row, 'flash'))} | {fmt(tf(row, 'cudnn'))} | {fmt(tf(row, 'naive'))} | "
            f"{ratio(t, tf(row, 'cudnn'))} | {ratio(t, tf(row, 'flash'))} | {cfg_s} |"
        )
    lines += [
        "",
        "## Ladder (TFLOP/s; each step adds one knob to the previous)",
        "",
        "| causal | N | " + " | ".join(steps) + " |",
        "|---|---|" + "---|" * len(steps),
    ]
    for row in doc["results"]:
        cells = " | ".join(fmt(tf(row, s)) for s in steps)
        lines.append(f"| {'yes' if row['causal'] else 'no'} | {row['n']} | {cells} |")
    lines += [
        "",
        "Relative errors (float64 reference on rows 0–127 and the last 128, 4 heads):",
        "",
    ]
    for row in doc["results"]:
        errs = ", ".join(
            f"{kk} {vv['rel_err']:.1e}"
            for kk, vv in row["backends"].items()
            if vv.get("rel_err") is not None and not math.isnan(vv["rel_err"])
        )
        lines.append(f"- {'causal' if row['causal'] else 'none'} N={row['n']}: {errs}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
