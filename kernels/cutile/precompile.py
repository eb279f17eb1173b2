"""Compile a tuning space's kernels before the tuner times them, several at once.

cuTile compiles a kernel at its first launch, one compile at a time (a process-wide lock), and
keeps each cubin in a disk cache keyed by its bytecode. A cold search of a decode class spent
two thirds of its 12.9 s on an H100 in those first launches, one after another
(docs/performance.md). The same kernels compiled offline, in child processes that
each hold their own lock, land in that cache under the key the launch looks up: the offline
signature is the one the JIT derives (:func:`kernels.cutile.compile.array_constraint`), so the
bytecode and the key are the same. A compile that fails or runs late here costs nothing but
its time: the launch compiles it then, and reports its error, as it would have anyway.

    python -m kernels.cutile.precompile JOBS_JSON     (what each child runs)
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernels.cutile.config import LaunchConfig
from kernels.cutile.problem import Problem

# Children are Python processes of ~0.4 s start-up and ~0.5 GB each while tileiras runs; more
# than this many rarely pays on a workstation.
MAX_WORKERS = 16


def job(
    p: Problem,
    config: LaunchConfig,
    *,
    mask: str,
    input_pos: int,
    window: int | None,
    sm_count: int,
    arch: str,
) -> dict[str, Any]:
    """One config's compile, as plain JSON: what :func:`compile_job` plans and compiles."""
    problem = {f.name: getattr(p, f.name) for f in dataclasses.fields(p) if f.name != "lib"}
    return {
        "problem": problem,
        "config": dataclasses.asdict(config),
        "mask": mask,
        "input_pos": int(input_pos),
        "window": window,
        "sm_count": int(sm_count),
        "arch": arch,
    }


def compile_job(spec: dict[str, Any]) -> float:
    """Plan ``spec``'s launch as the device would (its SM count) and compile each of its kernel
    calls (the decode form's combine too) into cuTile's disk cache; the seconds it took."""
    from kernels.cutile import forms
    from kernels.cutile.compile import compile_call

    t0 = time.perf_counter()
    sms = int(spec["sm_count"])
    call: forms.KernelCall | None = forms.plan(
        Problem(**spec["problem"]),
        LaunchConfig.of(spec["config"]),
        scale=None,
        mask=spec["mask"],
        input_pos=spec["input_pos"],
        window=spec["window"],
        with_lse=False,
        with_map=False,
        sm_count=lambda: sms,
    )
    while call is not None:
        compile_call(call, spec["arch"])
        call = call.then
    return time.perf_counter() - t0


def precompile(jobs: Sequence[dict[str, Any]], *, timeout_s: float = 90.0) -> dict[str, Any]:
    """Compile ``jobs`` (from :func:`job`) in up to :data:`MAX_WORKERS` child processes, one
    per core, and wait for them (at most ``timeout_s``; the ones still compiling then are
    stopped). Returns what happened: how many compiled, failed or were cut off, the workers
    and the wall seconds. One job is not worth a process: the launch compiles it as soon."""
    t0 = time.perf_counter()
    report: dict[str, Any] = {"jobs": len(jobs), "compiled": 0, "failed": 0, "cut_off": 0}
    if len(jobs) < 2:
        return {**report, "workers": 0, "seconds": 0.0}
    workers = max(1, min(len(jobs), os.cpu_count() or 1, MAX_WORKERS))
    shares = [list(jobs[i::workers]) for i in range(workers)]
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # where the ``kernels`` package lives
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (root, env.get("PYTHONPATH"))))
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "kernels.cutile.precompile", json.dumps(share)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        for share in shares
    ]
    for child, share in zip(children, shares):
        left = max(0.1, timeout_s - (time.perf_counter() - t0))
        try:
            out = child.communicate(timeout=left)[0]
        except subprocess.TimeoutExpired:
            child.kill()
            out = child.communicate()[0]
        results = [line for line in out.splitlines() if line.startswith(("ok ", "failed "))]
        report["compiled"] += sum(line.startswith("ok ") for line in results)
        report["failed"] += sum(line.startswith("failed ") for line in results)
        report["cut_off"] += len(share) - len(results)
    return {**report, "workers": workers, "seconds": round(time.perf_counter() - t0, 2)}


def main() -> int:
    """A child: compile the jobs of the JSON list in argv[1], one result line each ("ok
    SECONDS" or "failed ERROR"), printed as each finishes."""
    for spec in json.loads(sys.argv[1]):
        try:
            seconds = compile_job(spec)
        except Exception as exc:  # the launch will meet it again and say so
            print(f"failed {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        else:
            print(f"ok {seconds:.2f}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
