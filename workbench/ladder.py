"""The optimization ladder: one preset experiment, each step one change on the previous one.

Steps are data (a preset in ``workbench/presets/``, or a user's own file in the same shape), so
a user can edit a step or add one. There is one preset per architecture family: Hopper's
(``ladder.json``, sm_90) adds the worker-warp rescue that sm_90 needs for the large tiles;
Blackwell's (``ladder-blackwell.json``) is the published study's ladder as it ran it (baseline,
256x128, fast math, K split, remap, autotune). Without a file, :func:`load_ladder` picks the
preset whose ``archs`` list the local GPU (read with ``nvidia-smi``, so no CUDA context is made
in the caller); with no GPU, or one no preset lists, it takes Hopper's, the one measured here.
A ladder is stored as a group of runs, one run per step, all on the same inputs (one seed),
with the preset's name, and :func:`ladder_table` turns the group into speed-ups against the
previous step and against the baseline.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from workbench.backends import get_backend
from workbench.config import ConfigError, KernelConfig, Problem, SweepSpec
from workbench.runner import Event, preflight, run_sweep
from workbench.store import Store
from workbench.timing import TimingSettings


@dataclass(frozen=True)
class LadderStep:
    name: str
    config: KernelConfig


@dataclass(frozen=True)
class Ladder:
    name: str
    steps: tuple[LadderStep, ...]
    published: dict[str, str]
    preset: str = ""  # the preset's file name, or the user's path
    archs: tuple[str, ...] = ()  # the architectures the preset is for ((): not said)


DEFAULT_PRESET = "ladder.json"
PRESETS = ("ladder.json", "ladder-blackwell.json")


def _preset_text(name: str) -> str:
    return resources.files("workbench.presets").joinpath(name).read_text("utf-8")


def local_gpu_arch() -> str | None:
    """``sm_XY`` of the first visible GPU, from ``nvidia-smi`` (no CUDA context), or None."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    index = first if first.isdigit() else "0"
    try:
        out = subprocess.run(
            [tool, "-i", index, "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=15,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    major, _, minor = out.stdout.strip().partition(".")
    if out.returncode != 0 or not (major.isdigit() and minor.isdigit()):
        return None
    return f"sm_{major}{minor}"


def preset_for_arch(arch: str | None) -> str:
    """The built-in preset for ``arch``: the one whose ``archs`` list it, else Hopper's."""
    if arch:
        for name in PRESETS:
            if arch in json.loads(_preset_text(name)).get("archs", []):
                return name
    return DEFAULT_PRESET


@dataclass(frozen=True)
class StepStarted:
    index: int
    total: int
    step: LadderStep


def load_ladder(
    path: str | Path | None = None,
    *,
    mask: str | None = None,
    window: int | None = None,
    arch: str | None = None,
) -> Ladder:
    """Read a ladder file (by default the built-in preset for ``arch``, or for the local GPU
    when ``arch`` is None: :func:`preset_for_arch`) and build each step's config.

    Each step's ``changes`` apply on top of the previous step's config; a bad key or value is a
    ConfigError that names the step.
    """
    if path is None:
        preset = preset_for_arch(arch or local_gpu_arch())
        text = _preset_text(preset)
        source = f"the built-in ladder {preset}"
    else:
        try:
            text = Path(path).read_text("utf-8")
        except OSError as exc:
            raise ConfigError("steps", str(path), f"a readable JSON file ({exc.strerror})") from exc
        source = preset = str(path)
    try:
        data = json.loads(text)
        raw_steps = data["steps"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError("steps", source, "a JSON object with a 'steps' list") from exc
    if not raw_steps:
        raise ConfigError("steps", source, "at least one step")
    mask = mask or data.get("mask", "causal")
    current = KernelConfig(mask=mask, window=window if mask == "window" else None)
    known = {f.name for f in dataclasses.fields(KernelConfig)}
    steps = []
    for number, raw in enumerate(raw_steps, start=1):
        name = str(raw.get("name") or f"step {number}")
        changes = raw.get("changes", {})
        unknown = set(changes) - known
        if unknown:
            raise ConfigError("steps", f"{name}: {sorted(unknown)}", f"knobs among {sorted(known)}")
        try:
            current = dataclasses.replace(current, **changes)
        except ConfigError as exc:
            raise ConfigError(
                exc.field, exc.value, f"{exc.allowed} (in ladder step {name!r})"
            ) from exc
        steps.append(LadderStep(name, current))
    return Ladder(
        str(data.get("name", "ladder")),
        tuple(steps),
        dict(data.get("published_blackwell", {})),
        preset=preset,
        archs=tuple(str(a) for a in data.get("archs", [])),
    )


def step_label(label: str, step: LadderStep) -> str:
    """A step's run label: the step's name, after the ladder's label when one was given, so
    seven runs never share one name."""
    return f"{label} · {step.name}" if label else step.name


def run_ladder(
    ladder: Ladder,
    problem: Problem,
    seq_lens: tuple[int, ...],
    backend_name: str,
    store: Store,
    *,
    label: str = "",
    timing: TimingSettings | None = None,
    cancel: Callable[[], bool] | None = None,
    seed: int | None = None,
) -> tuple[int, Iterator[StepStarted | Event]]:
    """Check every step, store the group, and return (group id, events of all steps)."""
    seed = secrets.randbits(32) if seed is None else seed
    backend = get_backend(backend_name)
    specs = [
        SweepSpec(problem, seq_lens, step.config, backend_name, step_label(label, step), seed)
        for step in ladder.steps
    ]
    for spec in specs:
        preflight(spec, backend)
    group_id = store.create_group(
        "ladder",
        label or f"{ladder.name} on {backend_name}",
        {
            "steps": [s.name for s in ladder.steps],
            # Each step's knobs, so a view can name a step that never ran (cancelled, failed).
            "configs": [s.config.summary() for s in ladder.steps],
            "published": ladder.published,
            # Which preset ran, so the view can say so (a Hopper ladder is not Blackwell's).
            "preset": ladder.preset,
            "ladder": ladder.name,
            "archs": list(ladder.archs),
        },
    )

    def events() -> Iterator[StepStarted | Event]:
        for index, (step, spec) in enumerate(zip(ladder.steps, specs)):
            if cancel is not None and cancel():
                return
            yield StepStarted(index, len(specs), step)
            yield from run_sweep(
                spec,
                store,
                timing=timing,
                backend=backend,
                cancel=cancel,
                group_id=group_id,
                step=step.name,
            )

    return group_id, events()


def ladder_table(store: Store, group_id: int) -> dict[str, Any]:
    """Per step and sequence length: TFLOP/s, latency, speed-up vs previous step and baseline."""
    runs = store.group_runs(group_id)
    if not runs:
        raise ConfigError("group", group_id, "the id of a stored ladder (see `runs`)")
    per_run = {r.id: {p.seq_len: p for p in store.points(r.id)} for r in runs}
    seq_lens = sorted({n for pts in per_run.values() for n in pts})
    rows = []
    base = per_run[runs[0].id]
    for index, run in enumerate(runs):
        previous = per_run[runs[index - 1].id] if index else None
        cells = {}
        for n in seq_lens:
            point = per_run[run.id].get(n)
            if point is None:
                cells[str(n)] = None
                continue
            prev = previous.get(n) if previous else None
            first = base.get(n)
            cells[str(n)] = {
                "latency_ms": point.latency_ms,
                "tflops": point.tflops,
                "vs_previous": prev.latency_ms / point.latency_ms if prev else None,
                "vs_baseline": first.latency_ms / point.latency_ms if first else None,
            }
        rows.append(
            {
                "run_id": run.id,
                "step": run.step or run.label,
                "status": run.status,
                "config": run.config.summary(),
                "cells": cells,
            }
        )
    return {"group_id": group_id, "seq_lens": seq_lens, "steps": rows}
