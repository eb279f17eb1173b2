"""Time many launch configs of the cuTile FMHA kernel side by side with torch SDPA cuDNN.

    python bench/explore_configs.py --out DIR                    # sm_90 space + candidates
    python bench/explore_configs.py --ns 2048 --masks causal --configs "$(cat my-configs.json)"
    python bench/explore_configs.py --configs @bench/configs/pipeline-probe.json
    python bench/explore_configs.py --masks none --q-len 2048 --ns 1024,4096,16384  # key lengths
    python bench/explore_configs.py --ns 2048 --kv-heads 8   # GQA: 32 query heads over 8 kv heads
    python bench/explore_configs.py --ns 2048 --clocks       # with the SM clock during each timing

This is how the autotuner's search space is vetted: every config is timed on the same fresh
fp16 inputs as cuDNN, interleaved over ``--rounds`` (CUDA-graph replay, median), after a
correctness check against float64 on a slice of rows. Configs that fail to compile or hang in
the parallel precompile are reported and left out. Writes ``explore.json`` and ``explore.md``.
The H200's runs are in bench/results/experiments/h200-explore-*.md, one line each in
docs/experiments.md; the config lists they ran are bench/configs/*.json.

``--timing eager`` (or ``both``) also times each config the way the autotuner's second stage
did before it replayed graphs: launches from Python back to back for about ``--rep-ms``, CUDA
events around them, no graph. Those rows are labelled ``[eager]`` and record the host's
microseconds per launch, so a gap between the two methods can be told apart from host-bound
launching.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.clock_sampler import ClockSampler, nvml_reader  # noqa: E402
from bench.explore_lib import (  # noqa: E402
    _variant_key,
    add_shape_args,
    check_rows,
    compile_job,
    config_labels,
    flops,
    machine_info,
    precompile,
    sdpa,
    time_fn,
    timed_rounds,
)

# A config whose output differs from float64 by more than this (fp16 kernels land near 3e-4)
# is reported as wrong and not timed.
MAX_REL_ERR = 2e-2

CONFIG_LISTS = ROOT / "bench" / "configs"
# Beyond the shipped sm_90 table (bench/configs/sm90-candidates.json): the 128-row tile without
# the polynomial exp2 at the default latencies, its program-id remapping switched off (the L2
# grouping is a guess), and the 64-row tile with the polynomial (it lost there in
# bench/results/experiments/h200-explore-poly.md).
CANDIDATES: list[dict[str, Any]] = json.loads((CONFIG_LISTS / "sm90-candidates.json").read_text())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_shape_args(ap, ns="2048,8192")
    ap.add_argument(
        "--configs",
        default=None,
        help="JSON list, or @FILE holding one (default: the sm_90 space + candidates)",
    )
    ap.add_argument(
        "--q-len",
        type=int,
        default=None,
        help="non-causal only: a fixed query length, with --ns as the key lengths (separates "
        "a kernel's cost per query tile from its cost per key block)",
    )
    ap.add_argument(
        "--kv-heads",
        type=int,
        default=None,
        help="key/value heads (GQA: a divisor of --heads; default: as many as --heads)",
    )
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rep-ms", type=float, default=15.0)
    ap.add_argument(
        "--timing",
        choices=("graph", "eager", "both"),
        default="graph",
        help="CUDA-graph replay (the benchmark's and the tuner's method), eager back-to-back "
        "launches from Python, or both",
    )
    ap.add_argument(
        "--clocks",
        action="store_true",
        help="sample the SM clock and power draw (NVML, read only) while each config is timed",
    )
    ap.add_argument("--precompile", type=int, default=8)
    ap.add_argument("--canary-s", type=float, default=150.0)
    ap.add_argument("--out", default="explore-out")
    args = ap.parse_args(argv)
    if args.q_len is not None and (args.q_len < 1 or args.masks != "none"):
        ap.error("--q-len takes a positive length and needs --masks none")
    if args.kv_heads is not None and (args.kv_heads < 1 or args.heads % args.kv_heads):
        ap.error(f"--kv-heads must divide --heads ({args.heads}), got {args.kv_heads}")
    return args


def load_configs(spec: str) -> list[dict[str, Any]]:
    """The launch configs ``--configs`` names: a JSON list, or ``@FILE`` holding one (the live
    lists are ``bench/configs/*.json``). Knobs set to null keep the kernel's default."""
    text = Path(spec[1:]).read_text() if spec.startswith("@") else spec
    return [_set_knobs(c) for c in json.loads(text)]


def default_configs(head_dim: int) -> list[dict[str, Any]]:
    """Without ``--configs``: the shipped sm_90 table and :data:`CANDIDATES`."""
    from kernels.tuning_spaces import search_space

    return [_set_knobs(c) for c in search_space("sm_90", head_dim) + CANDIDATES]


def _set_knobs(config: dict[str, Any]) -> dict[str, Any]:
    return {kk: vv for kk, vv in config.items() if vv is not None}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    ns = [int(x) for x in args.ns.split(",") if x]
    masks = [m for m in args.masks.split(",") if m]
    b, h, d = args.batch, args.heads, args.dim
    configs = load_configs(args.configs) if args.configs else default_configs(d)
    info = machine_info()
    jobs = [compile_job(c, m, b, h, d) for m in masks for c in configs]
    sampler = None
    if args.clocks:
        try:
            sampler = ClockSampler(nvml_reader())
        except Exception as exc:  # no NVML library, or no device behind index 0
            raise SystemExit(f"--clocks needs NVML (pip install nvidia-ml-py): {exc}") from exc
    bad = precompile(jobs, args.precompile, args.canary_s)
    if sampler is not None:
        sampler.start()
    try:
        _time_all(args, configs, (masks, ns), bad, sampler, info)
    finally:
        if sampler is not None:
            sampler.stop()
    print((out_dir / "explore.md").read_text())
    return 0


def _time_all(
    args: argparse.Namespace,
    configs: list[dict[str, Any]],
    problems: tuple[list[str], list[int]],
    bad: set[str],
    sampler: ClockSampler | None,
    info: dict[str, Any],
) -> None:
    """Check and time every config on every (mask, N) of ``problems``; writes the JSON and
    markdown after each problem, so a run cut short keeps what it finished."""
    masks, ns = problems
    import torch

    from kernels import cutile_fmha as F

    out_dir = Path(args.out)
    b, h, d = args.batch, args.heads, args.dim
    rows: list[dict[str, Any]] = []
    for mask in masks:
        causal = mask == "causal"
        for n in ns:
            torch.manual_seed(7 * n + causal)
            q_len = args.q_len or n
            q = torch.randn(b, h, q_len, d, device="cuda", dtype=torch.float16)
            kv_h = args.kv_heads or h
            k, v = (torch.randn(b, kv_h, n, d, device="cuda", dtype=torch.float16) for _ in "kv")
            runners: dict[str, Any] = {"cudnn": sdpa("cudnn", q, k, v, causal)}
            for c, label in zip(configs, config_labels(configs)):
                if _variant_key({**c, "mask": mask}) in bad:
                    continue
                runners[label] = F.prepare(q, k, v, mask=mask, **c)
            errors = {}
            for name, fn in list(runners.items()):
                try:
                    res = fn()
                    torch.cuda.synchronize()
                    errors[name] = check_rows(res, q, k, v, causal)
                    if not errors[name] <= MAX_REL_ERR:
                        # Kept in the row's rel_err and shown as "wrong" in the table: a
                        # miscompiled variant must not look like one that was never run.
                        print(f"[{mask} N={n}] {name}: wrong result, relative error "
                              f"{errors[name]:.2g}; not timed", flush=True)  # fmt: skip
                        runners.pop(name)
                except Exception as exc:  # report, keep going with the other configs
                    print(f"[{mask} N={n}] {name}: {type(exc).__name__}: {exc}", flush=True)
                    runners.pop(name)
            timers = []
            if args.timing in ("graph", "both"):
                timers += [(name, fn, time_fn) for name, fn in runners.items()]
            if args.timing in ("eager", "both"):
                timers += [(f"{name} [eager]", fn, time_eager) for name, fn in runners.items()]
            windows: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in timers}
            # Each config follows each other one equally often (a config inherits the clock
            # its predecessor left); every turn's time span is kept for the clock readings.
            results = timed_rounds(
                {
                    name: _windowed(functools.partial(timer, fn, args.rep_ms), windows[name])
                    for name, fn, timer in timers
                },
                args.rounds,
            )
            # The eager timer also returns the host's microseconds per launch.
            samples = {name: [_first(got) for got in r] for name, r in results.items()}
            host_us = {
                name: [got[1] for got in r]
                for name, r in results.items()
                if r and isinstance(r[0], tuple)
            }
            fl = flops(b, h, n, d, causal) * q_len / n
            tf = {name: fl / (statistics.median(s) * 1e-3) / 1e12 for name, s in samples.items()}
            row = {
                "mask": mask,
                "n": n,
                "q_len": q_len,
                "tflops": tf,
                "rel_err": errors,
                "ms_rounds": samples,
                "host_us_per_launch": {kk: statistics.median(vv) for kk, vv in host_us.items()},
            }
            if sampler is not None:
                row["clocks"] = {name: sampler.summary(w) for name, w in windows.items()}
                if sampler.error:
                    print(f"clock sampling stopped: {sampler.error}", flush=True)
            rows.append(row)
            ranked = sorted(tf.items(), key=lambda kv: -kv[1])
            print(f"[{mask} N={n}] " + "  ".join(f"{k_}={v_:.0f}" for k_, v_ in ranked[:8]),
                  flush=True)  # fmt: skip
            del q, k, v, runners
            torch.cuda.empty_cache()
            doc = {"machine": info, "args": vars(args), "left_out": sorted(bad), "rows": rows}
            (out_dir / "explore.json").write_text(json.dumps(doc, indent=1, default=str))
            (out_dir / "explore.md").write_text(to_markdown(rows))


def _windowed(measure: Callable[[], Any], windows: list[tuple[float, float]]) -> Callable[[], Any]:
    """``measure``, appending the (start, end) of every call to ``windows``."""

    def run() -> Any:
        t0 = time.perf_counter()
        try:
            return measure()
        finally:
            windows.append((t0, time.perf_counter()))

    return run


def _first(got: float | tuple[float, float]) -> float:
    return got[0] if isinstance(got, tuple) else got


def time_eager(fn: Any, rep_ms: float) -> tuple[float, float]:
    """(GPU ms per launch, host µs per launch) of back-to-back launches from Python for about
    ``rep_ms``, timed with CUDA events and no graph: how the tuner's second stage timed before
    it replayed graphs, which ranked configs up to 10 % differently (h200-explore-timing.md)."""
    import torch

    fn()
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    for _ in range(3):
        fn()
    end.record()
    end.synchronize()
    count = max(3, min(1000, math.ceil(rep_ms / max(start.elapsed_time(end) / 3, 1e-3))))
    t0 = time.perf_counter()
    start.record()
    for _ in range(count):
        fn()
    end.record()
    host_us = (time.perf_counter() - t0) * 1e6 / count
    end.synchronize()
    return start.elapsed_time(end) / count, host_us


def to_markdown(rows: list[dict[str, Any]]) -> str:
    """One row per config, one column per (mask, N): TFLOP/s and the ratio to cuDNN."""
    cols = [
        f"{r['mask']} {r['n']}"
        if r.get("q_len", r["n"]) == r["n"]
        else f"{r['mask']} q{r['q_len']} k{r['n']}"
        for r in rows
    ]
    names = sorted({name for r in rows for name in (*r["tflops"], *r["rel_err"])} - {"cudnn"})
    head = "| config | " + " | ".join(cols) + " |"
    lines = [head, "|---" * (len(cols) + 1) + "|"]

    def cell(r: dict[str, Any], name: str) -> str:
        val, ref = r["tflops"].get(name), r["tflops"].get("cudnn")
        err = r["rel_err"].get(name)
        if val is None and err is not None and not err <= MAX_REL_ERR:
            return f"wrong (rel. err {err:.2g})"
        if val is None:
            return "–"
        return f"{val:.0f}" + (f" ({val / ref:.2f}×)" if ref and not math.isnan(ref) else "")

    lines.append("| cuDNN | " + " | ".join(cell(r, "cudnn") for r in rows) + " |")
    for name in names:
        lines.append(f"| {name} | " + " | ".join(cell(r, name) for r in rows) + " |")
    clocked = sorted({name for r in rows for name in r.get("clocks", {})})
    if clocked:
        note = (
            "SM clock (median MHz) and power draw (mean W; NVML averages power over a longer "
            "period than one turn) while each config was timed:"
        )
        lines += ["", note, ""]
        lines += [head, "|---" * (len(cols) + 1) + "|"]
        for name in clocked:
            vals = [r.get("clocks", {}).get(name) or {} for r in rows]
            cells = " | ".join(
                "–" if c.get("sm_mhz") is None else f"{c['sm_mhz']:.0f} MHz, {c['power_w']:.0f} W"
                for c in vals
            )
            lines.append(f"| {'cuDNN' if name == 'cudnn' else name} | {cells} |")
    hosts = sorted({name for r in rows for name in r.get("host_us_per_launch", {})})
    if hosts:
        note = "Host µs per eager launch (below the GPU's time per launch, the GPU is the bound):"
        lines += ["", note, ""]
        lines += [head, "|---" * (len(cols) + 1) + "|"]
        for name in hosts:
            vals = [r.get("host_us_per_launch", {}).get(name) for r in rows]
            cells = " | ".join("–" if x is None else f"{x:.0f}" for x in vals)
            lines.append(f"| {name} | {cells} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
