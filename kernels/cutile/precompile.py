"""Compile a tuning space's kernels before the tuner times them, several at once.

cuTile compiles a kernel at its first launch, one compile at a time (a process-wide lock), and
keeps each cubin in a disk cache keyed by its bytecode. A cold search of a decode class spent
two thirds of its 12.9 s on an H100 in those first launches, one after another
(docs/performance.md). The same kernels compiled offline, in child processes that
each hold their own lock, land in that cache under the key the launch looks up: the offline
signature is the one the JIT derives (:func:`kernels.cutile.compile.array_constraint`), so the
bytecode and the key are the same. A compile that fails or runs late here costs nothing but
its time: the launch compiles it then, and reports its error, as it would have anyway. On a
2-core machine this cut five candidates' compiles from 13.7 to 10.8 s; on the H100 host of
2026-12-07 each child took as long for one kernel as the set took one after another
(bench/results/h100-front-door-cold.txt), so there the gain is only in compiling each distinct
kernel once.

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


def planned_calls(spec: dict[str, Any]) -> list[Any]:
    """The kernel calls of ``spec``'s launch, planned as the device would (its SM count): the
    decode form's split kernel and its combine, or the one call of every other form."""
    from kernels.cutile import forms

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
    calls = []
    while call is not None:
        calls.append(call)
        call = call.then
    return calls


def kernel_key(call: Any) -> str:
    """What makes two calls one compile: the form, its compiler hints and the signature (the
    JIT's bytecode and cache key follow from them)."""
    from kernels.cutile.compile import signature_parameters

    return repr((call.form, sorted(call.hints.items()), signature_parameters(call)))


def compile_job(spec: dict[str, Any]) -> float:
    """Compile the calls of ``spec``'s launch (those its ``calls`` lists, every one without
    it) into cuTile's disk cache; the seconds it took."""
    from kernels.cutile.compile import compile_call

    t0 = time.perf_counter()
    calls = planned_calls(spec)
    for index in spec.get("calls", range(len(calls))):
        compile_call(calls[index], spec["arch"])
    return time.perf_counter() - t0


def distinct_kernels(jobs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One task a distinct kernel of ``jobs``: the first job that has it, ``calls`` naming
    that one of its calls, so the children share the compiles out evenly. A decode class's
    candidates share kernels: a split count is a launch argument, so auto and 4 splits run
    one split kernel."""
    seen: set[str] = set()
    out = []
    for spec in jobs:
        try:
            calls = planned_calls(spec)
        except Exception:  # the launch will meet the error and say so; compile it there
            continue
        for index, call in enumerate(calls):
            key = kernel_key(call)
            if key not in seen:
                seen.add(key)
                out.append({**spec, "calls": [index]})
    return out


def precompile(jobs: Sequence[dict[str, Any]], *, timeout_s: float = 90.0) -> dict[str, Any]:
    """Compile the distinct kernels of ``jobs`` (from :func:`job`) in up to
    :data:`MAX_WORKERS` child processes, one per core, and wait for them (at most
    ``timeout_s``; the ones still compiling then are stopped). Returns what happened: the
    jobs, the distinct kernels they need, how many compiled, failed or were cut off, the
    workers, the slowest child's own compile seconds and the wall seconds. One kernel is not
    worth a process: the launch compiles it as soon."""
    t0 = time.perf_counter()
    tasks = distinct_kernels(jobs)
    kernels = len(tasks)
    report: dict[str, Any] = {
        "jobs": len(jobs), "kernels": kernels, "compiled": 0, "failed": 0, "cut_off": 0,
    }  # fmt: skip
    if kernels < 2:
        return {**report, "workers": 0, "slowest_s": 0.0, "seconds": 0.0}
    workers = max(1, min(len(tasks), os.cpu_count() or 1, MAX_WORKERS))
    shares = [list(tasks[i::workers]) for i in range(workers)]
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
    slowest = 0.0
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
        slowest = max([slowest, *(float(line.split()[1]) for line in results if line[:3] == "ok ")])
    return {
        **report, "workers": workers, "slowest_s": round(slowest, 2),
        "seconds": round(time.perf_counter() - t0, 2),
    }  # fmt: skip


def main() -> int:
    """A child: compile the jobs of the JSON list in argv[1], one result line a job ("ok
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
