"""The streaming read by three kernels at the decode calls' sizes, interleaved in one process
(needs a GPU with CuPy):

    python3 bench/read_kernels.py --rounds 6 --json read-kernels.json

The workbench's one-launch read (``workbench.measure.stream_read``, what ``bandwidth`` times; its
checksum checked first), CuPy's ``sum`` (what ``bandwidth`` timed before) and torch's ``sum``,
each over the same float32 buffers of random bits (copies taken in turn below 256 MB, so every
call reads HBM), timed with the project's one timer (CUDA-graph replay) once a round in a
rotating order. Prints µs and GB/s a size and each reader's
fit of fixed cost + bytes / rate past 128 MB: the fixed cost is what any kernel that reads these
bytes pays at least, which is what bounds a decode call's TB/s at B=1.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The library each reader's launches are captured with.
LIBS = {"stream": "cupy", "cupy-sum": "cupy", "torch-sum": "torch"}
SIZES = (16_800_000, 33_600_000, 67_100_000, 134_200_000, 268_400_000, 536_900_000, 2 << 30)


def readers(size: int) -> dict[str, Any]:
    """Reader name -> a launch that reads ``size`` bytes once (copies in turn below 256 MB)."""
    import cupy
    import numpy as np
    import torch

    from workbench.analysis.bandwidth import rotation_copies
    from workbench.measure.stream_read import StreamRead

    elements = size // 16 * 4
    copies = rotation_copies(size)
    # Random bits (seeded in main), so that the one-launch read's checksum can fail.
    buffers = [
        cupy.random.randint(0, 2**31, size=elements, dtype=cupy.int32).view(cupy.float32)
        for _ in range(copies)
    ]
    tensors = [torch.as_tensor(b, device="cuda") for b in buffers]
    streams = [StreamRead(b) for b in buffers]
    streams[0]()
    expected = int(np.bitwise_xor.reduce(buffers[0].view(cupy.uint32).get()))
    if streams[0].checksum() != expected:
        raise SystemExit(f"the one-launch read of {size:,} bytes did not read every word once")
    out = cupy.empty((), dtype=cupy.float32)
    turns = {name: itertools.cycle(range(copies)) for name in ("stream", "cupy-sum", "torch-sum")}
    return {
        "stream": lambda: streams[next(turns["stream"])](),
        "cupy-sum": lambda: cupy.sum(buffers[next(turns["cupy-sum"])], out=out),
        "torch-sum": lambda: tensors[next(turns["torch-sum"])].sum(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    import cupy

    from kernels.measure import LaunchSampler
    from workbench.analysis.streaming import fit_streaming, summary

    gpu = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    seed = int.from_bytes(os.urandom(4), "little")
    cupy.random.seed(seed)
    print(f"seed {seed}")
    rows: list[dict[str, Any]] = []
    for size in SIZES:
        launches = readers(size)
        samplers = {name: LaunchSampler(run, LIBS[name]) for name, run in launches.items()}
        samples: dict[str, list[float]] = {name: [] for name in samplers}
        names = list(samplers)
        for round_index in range(args.rounds):
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                samples[name].extend(samplers[name].turn())
        row: dict[str, Any] = {"bytes": size}
        for name, values in samples.items():
            ms = statistics.median(values)
            row[name] = {"us": ms * 1e3, "gbs": size / (ms * 1e-3) / 1e9, "samples": len(values)}
        rows.append(row)
        cells = "  ".join(f"{n} {row[n]['us']:8.1f} µs {row[n]['gbs']:6.0f} GB/s" for n in names)
        print(f"{size / 1e6:9,.1f} MB  {cells}", flush=True)
        del launches, samplers
        cupy.get_default_memory_pool().free_all_blocks()
    fits = {}
    for name in ("stream", "cupy-sum", "torch-sum"):
        fit = fit_streaming([(r["bytes"], r[name]["us"] / 1e3) for r in rows], unit="size", of="")
        fits[name] = fit.to_dict()
        print(f"{name:10} fixed + bytes / rate past 128 MB: {summary(fit)}")
    if args.json:
        args.json.write_text(
            json.dumps({"gpu": gpu, "rounds": args.rounds, "sizes": rows, "fits": fits}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
