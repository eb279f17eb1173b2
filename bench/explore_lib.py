"""What the side scripts (explore_configs.py, tuner_consistency.py, profile_kernels.py) share:
the problem options, machine metadata, torch peers, a float64 spot check, the compile-cache
warm-up, config labels, and timing through the project's one procedure
(``kernels.measure.LaunchSampler``) in interleaved rounds.

The benchmark itself is ``bench/bench_fmha.py``, a preset over the workbench's group sweeps.
"""

from __future__ import annotations

import argparse
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

from kernels.knobs import tuning_label, words  # noqa: E402  (after the path set-up)
from kernels.measure import LaunchSampler, balanced_order  # noqa: E402

T = TypeVar("T")  # what one measurement returns


def add_shape_args(ap: argparse.ArgumentParser, ns: str) -> None:
    """--ns, --masks, --batch, --heads, --dim: the problem options of the side scripts
    (explore_configs.py, profile_kernels.py), with the benchmark's shape as the default."""
    ap.add_argument("--ns", default=ns, help="sequence lengths")
    ap.add_argument("--masks", default="causal,none", help="from causal, none")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--dim", type=int, default=128)


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
    """Median milliseconds of ``fn`` over one graph turn of the project's timing procedure
    (events where ``fn`` cannot be captured)."""
    sampler = LaunchSampler(fn, "torch", target_ms=rep_ms)
    samples = sampler.turn()
    if sampler.fallback_reason:
        print(f"  (graph capture failed: {sampler.fallback_reason}; timed with events)")
    return statistics.median(samples)


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
    and the main process still compiled: the tuner took 13 s at the first N and 1 s after. A
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
    """A launch config in the registry's label words (:func:`kernels.knobs.tuning_label`)."""
    return tuning_label(cfg)


def config_labels(configs: list[dict[str, Any]]) -> list[str]:
    """A label for each config, each its own: the tuner's words, and where two configs share
    them, every knob's words (fast math or the K split off told apart), then the position
    (tables keyed by label would otherwise merge them: one row showed for two configs)."""
    short = [config_label(c) for c in configs]
    labels = [
        label if short.count(label) == 1 else " ".join(words(c)) for label, c in zip(short, configs)
    ]
    return [f"{label} #{i}" if labels.count(label) > 1 else label for i, label in enumerate(labels)]


def _variant_key(job: dict[str, Any]) -> str:
    keep = {
        kk: vv
        for kk, vv in job.items()
        if kk not in ("batch", "heads", "dim", "dtype") and vv is not None
    }
    return json.dumps(keep, sort_keys=True)
