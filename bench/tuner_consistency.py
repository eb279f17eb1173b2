"""Does the autotuner pick the config the benchmark finds fastest, and the same one every time?

    python bench/tuner_consistency.py --ns 2048 --masks causal,none --repeats 3 --out DIR

For each problem it runs ``autotune(force=True)`` ``--repeats`` times on the same inputs (a
throw-away cache file), recording the search's pick, the second stage's pick and the second
stage's microseconds for each finalist. Then it times every finalist any repeat saw, the
benchmark's way (CUDA-graph replay, median, ``--rounds`` interleaved rounds in a balanced order,
cuDNN in the same rounds), so the tuner's figures and picks can be set against the
benchmark's. ``--space all`` tunes over the whole sm_90 table, 2-CTA clusters included for
``mask=none`` too. Writes ``tuner.json`` and ``tuner.md``. On the H200 it is why the second
stage times the benchmark's way (bench/results/experiments/h200-tuner-consistency.md).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.explore_lib import (  # noqa: E402
    add_shape_args,
    compile_job,
    config_label,
    flops,
    machine_info,
    precompile,
    sdpa,
    time_fn,
    timed_rounds,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_shape_args(ap, ns="2048")
    ap.add_argument("--repeats", type=int, default=3, help="autotune runs per problem")
    ap.add_argument("--rounds", type=int, default=6, help="benchmark rounds of the finalists")
    ap.add_argument("--rep-ms", type=float, default=15.0)
    ap.add_argument(
        "--space",
        choices=("default", "all"),
        default="default",
        help="the tuner's own space per mask, or the whole sm_90 table for every mask",
    )
    ap.add_argument("--precompile", type=int, default=8)
    ap.add_argument("--out", default="tuner-out")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from kernels import cutile_fmha as F
    from kernels.tuning_spaces import SEARCH_SPACES, search_space

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    b, h, d = args.batch, args.heads, args.dim
    masks = [m for m in args.masks.split(",") if m]

    def space_of(mask: str) -> list[dict[str, Any]]:
        if args.space == "all":
            return [dict(c) for c in SEARCH_SPACES["sm_90"]]
        return search_space("sm_90", d, mask)

    jobs = [compile_job(c, m, b, h, d) for m in masks for c in space_of(m)]
    precompile(jobs, args.precompile, 150.0)
    rows: list[dict[str, Any]] = []
    cache = Path(tempfile.mkdtemp()) / "autotune.json"
    for mask in masks:
        causal = mask == "causal"
        for n in (int(x) for x in args.ns.split(",") if x):
            torch.manual_seed(11 * n + causal)
            q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in "qkv")
            picks = []
            for _ in range(args.repeats):
                got = F.autotune(q, k, v, mask=mask, configs=space_of(mask), cache_path=cache,
                                 force=True)  # fmt: skip
                tuning = got["_tuning"]
                picks.append({
                    "search": tuning["search_best"],
                    "pick": {kk: got[kk] for kk in F.TUNED_KEYS},
                    "stage2_us": tuning["sustained_us"],
                    "seconds": tuning["seconds"],
                })  # fmt: skip
                print(f"[{mask} N={n}] pick {config_label(picks[-1]['pick'])}: "
                      f"{tuning['sustained_us']}", flush=True)  # fmt: skip
            finalists = sorted({key for p in picks for key in p["stage2_us"]})
            runners = {"cudnn": sdpa("cudnn", q, k, v, causal)}
            for key in finalists:
                runners[key] = F.prepare(q, k, v, mask=mask, **json.loads(key))
            samples = timed_rounds(
                {name: functools.partial(time_fn, fn, args.rep_ms) for name, fn in runners.items()},
                args.rounds,
            )
            bench_us = {name: statistics.median(s) * 1000.0 for name, s in samples.items()}
            rows.append({
                "mask": mask, "n": n, "picks": picks, "bench_us": bench_us,
                "tflops": {name: flops(b, h, n, d, causal) / (us * 1e-6) / 1e12
                           for name, us in bench_us.items()},
                "ms_rounds": samples,
            })  # fmt: skip
            del q, k, v, runners
            torch.cuda.empty_cache()
            doc = {"machine": machine_info(), "args": vars(args), "rows": rows}
            (out_dir / "tuner.json").write_text(json.dumps(doc, indent=1, default=str))
            (out_dir / "tuner.md").write_text(to_markdown(rows))
    print((out_dir / "tuner.md").read_text())
    return 0


def to_markdown(rows: list[dict[str, Any]]) -> str:
    """Per problem: each finalist's second-stage time in every repeat beside its benchmark
    time and ratio to cuDNN, and which config each repeat picked."""
    lines = []
    for row in rows:
        picks, bench = row["picks"], row["bench_us"]
        lines.append(f"### {row['mask']} N = {row['n']}\n")
        head = " | ".join(f"tuner run {i + 1} (µs)" for i in range(len(picks)))
        lines.append(f"| config | {head} | benchmark (µs) | ×cuDNN |")
        lines.append("|---" * (len(picks) + 3) + "|")
        ordered = sorted((kk for kk in bench if kk != "cudnn"), key=lambda kk: bench[kk])
        for key in ordered:
            label = config_label(json.loads(key))
            tuner = []
            for p in picks:
                us = p["stage2_us"].get(key)
                mark = " **picked**" if json.dumps(p["pick"], sort_keys=True) == key else ""
                tuner.append("–" if us is None else f"{us:.1f}{mark}")
            ratio = bench["cudnn"] / bench[key]
            lines.append(f"| {label} | {' | '.join(tuner)} | {bench[key]:.1f} | {ratio:.2f} |")
        blank = " | ".join("" for _ in picks)
        lines.append(f"| cuDNN | {blank} | {bench['cudnn']:.1f} | 1.00 |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
