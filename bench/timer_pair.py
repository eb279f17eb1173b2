"""The workbench's timer and triton's, on the same launches in one process (needs a GPU).

    python3 bench/timer_pair.py --rounds 12 --json timer-pair.json

FA4, cuDNN and FA2 at causal 1k, non-causal 1k and non-causal 4k (B=4 H=32 D=128 fp16). Every
(backend, timer) pair is one item of a balanced interleaved order; a turn is one
``LaunchSampler`` turn or one ``triton.testing.do_bench_cudagraph`` call. It prints each
backend's median under both and their ratio, which separates a difference of timers from a
difference between processes (``bench/independent_check.py`` times in a process of its own).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernels.measure import LaunchSampler, balanced_order
from workbench.backends import get_backend
from workbench.config import KernelConfig, Problem

BACKENDS = ("fa4", "torch-cudnn", "torch-flash")
SHAPES = (("causal", 1024), ("none", 1024), ("none", 4096))
TIMERS = ("sampler", "triton")


def time_shape(mask: str, n: int, rounds: int, seed: int) -> dict[str, object]:
    import triton.testing

    problem = Problem(batch=4, heads=32, q_len=n, k_len=n, head_dim=128, dtype="float16")
    config = KernelConfig(mask=mask)
    launches = {}
    for name in BACKENDS:
        backend = get_backend(name, isolated=False)
        inputs = backend.make_inputs(problem, np.random.default_rng(seed))
        launches[name] = backend.prepare(problem, config, inputs)
    items = [(name, timer) for name in BACKENDS for timer in TIMERS]
    times: dict[tuple[str, str], list[float]] = {item: [] for item in items}
    for r in range(-1, rounds):  # round -1 warms up, untimed
        for i in balanced_order(len(items), r):
            name, timer = items[i]
            if timer == "sampler":
                ms = statistics.median(LaunchSampler(launches[name], "torch").turn())
            else:
                ms = triton.testing.do_bench_cudagraph(
                    launches[name], rep=15.0, return_mode="median"
                )
            if r >= 0:
                times[(name, timer)].append(float(ms))
    row: dict[str, object] = {"mask": mask, "n": n}
    for name in BACKENDS:
        ours = statistics.median(times[(name, "sampler")])
        theirs = statistics.median(times[(name, "triton")])
        row[name] = {"sampler_ms": ours, "triton_ms": theirs, "ratio": ours / theirs}
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=16, help="timed rounds per shape")
    ap.add_argument("--json", type=Path, default=Path("timer-pair.json"), help="result file")
    args = ap.parse_args(argv)
    seed = int.from_bytes(os.urandom(4), "little")
    print("seed", seed, flush=True)
    rows = []
    for mask, n in SHAPES:
        rows.append(time_shape(mask, n, args.rounds, seed))
        print(json.dumps(rows[-1]), flush=True)
    result = {"seed": seed, "rounds": args.rounds, "rows": rows}
    args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
