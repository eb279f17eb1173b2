"""The optimization ladder: one preset experiment, each step one change on the previous one.

Steps are data (a preset in ``workbench/presets/``, or a user's own file in the same shape), so
a user can edit a step or add one. Each architecture's default is a ladder whose every step
compiles to a kernel that fits it without spilling (``tests/test_ladder_presets_offline.py``
compiles them): ``ladder.json`` (sm_90, sm_100: 128x128 tiles with 8 worker warps) and
``ladder-sm120.json`` (sm_120: 128x64 with 8 worker warps, no K split: it spills there).
``ladder-blackwell.json`` is the published study's ladder in its order (baseline, 256x128,
fast math, K split, program-id remapping, the tuner), no architecture's default because
its 256x128 step spills everywhere; ``--steps ladder-blackwell.json`` runs it. Without a file,
:func:`load_ladder` picks the preset whose ``archs`` list the local GPU (read with
``nvidia-smi``, so no CUDA context is made in the caller); with no GPU, or one no preset lists,
it takes ``ladder.json``, the one measured here. A ladder is stored as a group of runs, one run
per step, all on the same inputs (one seed), with the preset's name
(:class:`workbench.jobs.LadderJob` runs one). :func:`ladder_table` turns the group into
speed-ups against the previous step and against the baseline, :func:`read_ladder` into what a
view shows (steps never reached included), and :func:`speedup_verdict` says whether a step
gained or lost.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.analysis.bandwidth import point_bandwidth
from workbench.analysis.resources import CompiledResources
from workbench.config import AXES, K_LEN_AXIS, SEQ_LEN_AXIS, ConfigError, KernelConfig

if TYPE_CHECKING:
    from workbench.store import Store


@dataclass(frozen=True)
class LadderStep:
    """One step: the kernel config it runs, and the loaded plugin's own knob values it sets
    (``plugin_knobs``, by name; ``plugin``: whose they are), each on top of the step before."""

    name: str
    config: KernelConfig
    plugin_knobs: Mapping[str, Any] = field(default_factory=dict)
    plugin: str = ""

    def summary(self) -> str:
        """The step's knobs in words: the config's, then the plugin's own."""
        own = " · ".join(f"{name} {value}" for name, value in self.plugin_knobs.items())
        return " · ".join(part for part in (self.config.summary(), own) if part)


@dataclass(frozen=True)
class Ladder:
    name: str
    steps: tuple[LadderStep, ...]
    published: dict[str, str]
    preset: str = ""  # the preset's file name, or the user's path
    archs: tuple[str, ...] = ()  # the architectures the preset is for ((): not said)
    axis: str = SEQ_LEN_AXIS  # its lengths: N, or k_len at ``q_len`` (a decode ladder)
    q_len: int | None = None  # the query rows of a decode ladder


# The kind of the group a ladder is stored as (its runs, one per step).
GROUP_KIND = "ladder"


def is_ladder_group(group: Mapping[str, Any]) -> bool:
    """Was ``group`` (a stored group, as Store.group returns it) stored by a ladder?"""
    return group.get("kind") == GROUP_KIND


DEFAULT_PRESET = "ladder.json"
PRESETS = ("ladder.json", "ladder-sm120.json", "ladder-blackwell.json")
# Every built-in ladder by the name `ladder --preset` and the window take: each architecture's
# that fits, the published Blackwell study's order as it ran it, the decode ladder and what a
# model's own tensors and eager calls cost (chosen by name only: no architecture picks them).
LADDER_PRESETS = {
    "hopper": "ladder.json",
    "sm120": "ladder-sm120.json",
    "blackwell": "ladder-blackwell.json",
    "decode": "ladder-decode.json",
    "model-inputs": "ladder-model-inputs.json",
}
# The keys a ladder file may hold, and each of its steps: any other is a typo, refused.
LADDER_KEYS = frozenset(
    {"name", "description", "mask", "archs", "published_blackwell", "steps", "axis", "q_len"}
)
STEP_KEYS = frozenset({"name", "changes", "description"})


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


def load_ladder(
    path: str | Path | None = None,
    *,
    mask: str | None = None,
    window: int | None = None,
    arch: str | None = None,
    preset: str | None = None,
) -> Ladder:
    """Read a ladder file (by default the built-in preset for ``arch``, or for the local GPU
    when ``arch`` is None: :func:`preset_for_arch`; a built-in preset's file name, such as
    ``ladder-blackwell.json``, where no such file is here) and build each step's config.

    Each step's ``changes`` apply on top of the previous step's config; a bad key or value is a
    ConfigError that names the step.
    """
    if preset is not None:
        if preset not in LADDER_PRESETS:
            raise ConfigError("preset", preset, f"expected one of {', '.join(LADDER_PRESETS)}")
        if path is not None:
            raise ConfigError("preset", preset, "a built-in ladder or a file (--steps), not both")
        preset = LADDER_PRESETS[preset]
        text = _preset_text(preset)
        source = f"the built-in ladder {preset}"
    elif path is None or (str(path) in PRESETS and not Path(path).exists()):
        preset = preset_for_arch(arch or local_gpu_arch()) if path is None else str(path)
        text = _preset_text(preset)
        source = f"the built-in ladder {preset}"
    else:
        if "\x00" in str(path) or (Path(path).exists() and not Path(path).is_file()):
            # A folder, a FIFO or a device: reading a FIFO would wait for a writer forever.
            raise ConfigError("steps", str(path), "a readable JSON file (a regular file)")
        try:
            text = Path(path).read_text("utf-8")
        except OSError as exc:
            raise ConfigError("steps", str(path), f"a readable JSON file ({exc.strerror})") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError("steps", str(path), "a JSON file in UTF-8") from exc
        source = preset = str(path)
    try:
        data = json.loads(text)
        raw_steps = data["steps"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError("steps", source, "a JSON object with a 'steps' list") from exc
    if not isinstance(data, dict) or not isinstance(raw_steps, list) or not raw_steps:
        raise ConfigError("steps", source, "a JSON object with a non-empty 'steps' list")
    # A misspelt key would otherwise be ignored and the ladder run without what it meant.
    unknown_keys = set(data) - LADDER_KEYS
    if unknown_keys:
        raise ConfigError(
            "steps", f"{source}: {sorted(unknown_keys)}", f"keys among {sorted(LADDER_KEYS)}"
        )
    mask = data.get("mask", "causal") if mask is None else mask  # "" is refused, not the default
    current = KernelConfig(mask=mask, window=window)  # a window without mask window is refused
    known = {f.name for f in dataclasses.fields(KernelConfig)}
    owners = _plugin_knobs()
    own: dict[str, Any] = {}  # the plugin knob values the steps so far set
    plugin = ""
    steps = []
    for number, raw in enumerate(raw_steps, start=1):
        if not isinstance(raw, dict) or not isinstance(raw.get("changes", {}), dict):
            raise ConfigError("steps", f"step {number}", "an object with a 'changes' object")
        name = str(raw.get("name") or f"step {number}")
        unknown_keys = set(raw) - STEP_KEYS
        if unknown_keys:
            raise ConfigError(
                "steps", f"{name}: {sorted(unknown_keys)}", f"step keys among {sorted(STEP_KEYS)}"
            )
        changes = dict(raw.get("changes", {}))
        theirs = {k: changes.pop(k) for k in list(changes) if k not in known and k in owners}
        unknown = set(changes) - known
        if unknown:
            allowed = f"knobs among {sorted(known)}"
            if owners:
                allowed += f", or a loaded plugin's own ({', '.join(sorted(owners))})"
            raise ConfigError("steps", f"{name}: {sorted(unknown)}", allowed)
        for knob_name, value in theirs.items():
            owner, knob = owners[knob_name]
            if plugin and owner != plugin:
                raise ConfigError(
                    "steps", f"{name}: {knob_name}",
                    f"the knobs of one plugin ({plugin}'s); {knob_name} is {owner}'s",
                )  # fmt: skip
            plugin = owner
            own[knob_name] = _plugin_value(knob, value, name)
        try:
            current = dataclasses.replace(current, **changes)
        except ConfigError as exc:
            raise ConfigError(
                exc.field, exc.value, f"{exc.allowed} (in ladder step {name!r})"
            ) from exc
        steps.append(LadderStep(name, current, dict(own), plugin))
    return Ladder(
        str(data.get("name", "ladder")),
        tuple(steps),
        dict(data.get("published_blackwell", {})),
        preset=preset,
        archs=tuple(str(a) for a in data.get("archs", [])),
        **_ladder_axis(data, source),
    )


def _ladder_axis(data: dict[str, Any], source: str) -> dict[str, Any]:
    """A ladder file's axis ("seq_len", or "k_len" with the q_len of a decode ladder)."""
    axis = data.get("axis", SEQ_LEN_AXIS)
    if axis not in AXES:
        raise ConfigError("steps", f"{source}: axis {axis!r}", f"an axis among {AXES}")
    q_len = data.get("q_len")
    if axis == K_LEN_AXIS:
        if isinstance(q_len, bool) or not isinstance(q_len, int) or q_len < 1:
            raise ConfigError("steps", f"{source}: q_len {q_len!r}", "a k_len ladder's q_len >= 1")
    elif q_len is not None:
        raise ConfigError("steps", f"{source}: q_len {q_len!r}", "q_len with axis k_len only")
    return {"axis": axis, "q_len": q_len}


def _plugin_knobs() -> dict[str, tuple[str, Any]]:
    """Each loaded plugin's own knob by name: (the plugin's backend, the knob)."""
    from workbench.backends import catalog

    return {
        knob.name: (d.name, knob)
        for d in catalog.declarations().values()
        if d.source is not None
        for knob in d.knobs
    }


def _plugin_value(knob: Any, value: Any, step: str) -> Any:
    """``value`` as the plugin knob's type (as ``--plugin-knob`` takes it), or a ConfigError
    naming the step and what the knob takes."""
    from workbench.backends.plugin_cli import knob_value

    typed = knob_value(knob, value)
    if typed is None:
        raise ConfigError("steps", f"{step}: {knob.name} {value!r}", knob.expected())
    return typed


def step_label(label: str, step: LadderStep) -> str:
    """A step's run label: the step's name, after the ladder's label when one was given, so
    seven runs never share one name."""
    return f"{label} · {step.name}" if label else step.name


def ladder_table(store: Store, group_id: int, runs: Sequence[Any] | None = None) -> dict[str, Any]:
    """Per step and sequence length: TFLOP/s, latency, speed-up vs previous step and baseline
    (``runs``: the group's runs, when the caller has read them already)."""
    runs = store.group_runs(group_id) if runs is None else runs
    if not runs:
        raise ConfigError("group", group_id, "the id of a stored ladder (see `runs`)")
    per_run = {r.id: {p.seq_len: p for p in store.points(r.id)} for r in runs}
    seq_lens = sorted({n for pts in per_run.values() for n in pts})
    rows = []
    base = per_run[runs[0].id]
    for index, run in enumerate(runs):
        previous = per_run[runs[index - 1].id] if index else None
        cells: dict[str, dict[str, Any] | None] = {}
        for n in seq_lens:
            point = per_run[run.id].get(n)
            if point is None:
                cells[str(n)] = None
                continue
            prev = previous.get(n) if previous else None
            first = base.get(n)
            compiled = (point.extra or {}).get("resources")
            cells[str(n)] = {
                "latency_ms": point.latency_ms,
                "tflops": point.tflops,
                "kv_gbs": point_bandwidth(run, point)["kv_gbs"],
                "vs_previous": prev.latency_ms / point.latency_ms if prev else None,
                "vs_baseline": first.latency_ms / point.latency_ms if first else None,
                # Compare's rule: a ratio counts only beyond its two points' own noise.
                **_noise_of("vs_previous", point, prev),
                **_noise_of("vs_baseline", point, first if index else None),
                # what the step's launch compiled to (cuTile): a dip explains itself
                "compiled": compiled if isinstance(compiled, dict) else None,
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
    axis = runs[0].axis
    return {"group_id": group_id, "axis": axis, "seq_lens": seq_lens, "steps": rows}


def _noise_of(key: str, point: Any, other: Any | None) -> dict[str, Any]:
    """``{key}_noise_pct`` and ``{key}_significant`` of ``point`` against ``other`` (the
    previous step's or the baseline's point at the same length), by Compare's rule."""
    from workbench.analysis.compare import compare_cell

    if other is None:
        return {f"{key}_noise_pct": None, f"{key}_significant": False}
    cell = compare_cell(point, other)
    return {f"{key}_noise_pct": cell.noise_pct, f"{key}_significant": cell.significant}


def format_ratio_mark(cell: dict[str, Any], key: str) -> str:
    """``1.16×`` for a ratio beyond its noise, ``1.02× ~`` within it (Compare's mark)."""
    ratio = cell.get(key)
    if not ratio:
        return "-"
    return f"{ratio:.2f}×{'' if cell.get(f'{key}_significant') else ' ~'}"


def format_ladder_table(table: dict[str, Any]) -> list[list[str]]:
    """:func:`ladder_table` as text rows: a header, then per step its TFLOP/s at each length
    (GB/s of K+V in a decode ladder, which reads memory) with × the previous step and × the
    baseline, each marked ``~`` when within the noise."""
    decode = table.get("axis") == K_LEN_AXIS
    x = "k_len" if decode else "N"
    rows = [["step"] + [f"{x}={n}" for n in table["seq_lens"]]]
    for step in table["steps"]:
        row = [step["step"]]
        for n in table["seq_lens"]:
            cell = step["cells"].get(str(n))
            if cell is None:
                row.append("-")
                continue
            ratios = ""
            if cell["vs_previous"]:
                ratios = f" {format_ratio_mark(cell, 'vs_previous')} prev"
                if cell["vs_baseline"]:
                    ratios += f" {format_ratio_mark(cell, 'vs_baseline')} base"
            compiled = cell.get("compiled")
            if compiled:
                ratios += f" [{CompiledResources.from_dict(compiled).short()}]"
            if decode and cell.get("kv_gbs") is not None:
                row.append(f"{cell['kv_gbs']:.3g} GB/s{ratios}")
            else:
                row.append(f"{cell['tflops']:.3g} TFLOP/s{ratios}")
        rows.append(row)
    return rows


# --- what a view shows of a stored ladder ---------------------------------------------------------

NOT_RUN = "not run"  # a step the stored ladder names but never reached
PENDING = "pending"  # the same while the ladder still runs


def speedup_verdict(cell: dict[str, Any] | None, key: str) -> str:
    """'gain' or 'loss' for a cell's ``key`` ratio ('vs_previous', 'vs_baseline') beyond its
    noise (Compare's rule, :func:`workbench.analysis.compare.noise_threshold_pct`), 'neutral'
    within it or when there is nothing to compare. A fixed ±3 % called three-sample noise a ×0.80
    loss."""
    ratio = cell.get(key) if cell else None
    if ratio is None or not math.isfinite(ratio) or ratio <= 0:
        return "neutral"
    if not cell.get(f"{key}_significant"):  # type: ignore[union-attr]
        return "neutral"
    return "gain" if ratio > 1.0 else "loss"


@dataclass(frozen=True)
class StepRow:
    """One step of a stored ladder: its run (if it has one) and its cells by length."""

    number: int  # 1-based
    name: str
    config: str  # the run's config summary ("" for a step without a run)
    status: str  # the run's status, or NOT_RUN / PENDING
    run_id: int | None
    error: str
    cells: dict[int, dict[str, Any] | None] = field(default_factory=dict)
    published: str = ""  # what the published Blackwell study reports for this step


@dataclass(frozen=True)
class LadderData:
    """Everything a view shows of one ladder group, read once per refresh."""

    group: dict[str, Any]
    runs: dict[int, Any]  # run id -> RunRecord
    seq_lens: list[int]
    rows: list[StepRow]

    @property
    def decode(self) -> bool:
        """A decode ladder: its lengths are k_len and its cells read as GB/s of K+V."""
        return bool(self.runs) and all(r.axis == K_LEN_AXIS for r in self.runs.values())

    def ratios(self, seq_len: int, key: str = "vs_baseline") -> list[float]:
        """Per step, the cell's ``key`` at ``seq_len``; NaN where there is none (chart gaps)."""
        out = []
        for row in self.rows:
            cell = row.cells.get(seq_len)
            value = cell.get(key) if cell else None
            out.append(float(value) if value is not None else math.nan)
        return out


def ladder_preset_text(spec: dict[str, Any]) -> str:
    """Which preset a stored ladder ran, e.g. ``preset: tile-optimization ladder, Blackwell
    (ladder-blackwell.json, for sm_100/sm_120...)``; "" for ladders stored before presets."""
    name = spec.get("ladder") or ""
    preset = spec.get("preset") or ""
    if not (name or preset):
        return ""
    archs = spec.get("archs") or []
    detail = ", ".join(x for x in (preset, f"for {'/'.join(archs)}" if archs else "") if x)
    return f"preset: {name or preset}" + (f" ({detail})" if detail and name else "")


def read_ladder(store: Store, group_id: int, *, live: bool = False) -> LadderData:
    """The group's steps, runs and cells (through :func:`ladder_table`). Steps the group names
    but that have no run are NOT_RUN (PENDING while ``live``: the ladder still runs)."""
    group = store.group(group_id)
    runs = store.group_runs(group_id)
    table = ladder_table(store, group_id, runs) if runs else {"seq_lens": [], "steps": []}
    by_id = {r.id: r for r in runs}
    planned = {n for run in runs for n in run.seq_lens}
    seq_lens = sorted(planned | set(table["seq_lens"]))
    spec = group.get("spec") or {}
    published = spec.get("published") or {}
    rows = []
    for number, step in enumerate(table["steps"], start=1):
        run = by_id[step["run_id"]]
        rows.append(
            StepRow(
                number=number,
                name=step["step"],
                config=step["config"],
                status=step["status"],
                run_id=run.id,
                error=run.error or "",
                cells={n: step["cells"].get(str(n)) for n in seq_lens},
                published=str(published.get(step["step"], "")),
            )
        )
    # Steps the ladder names but never reached: runs are made in step order, so they are the tail.
    names = [str(name) for name in spec.get("steps") or []]
    configs = [str(c) for c in spec.get("configs") or []]  # absent in ladders stored before
    for index, name in enumerate(names[len(rows) :], start=len(rows)):
        rows.append(
            StepRow(
                number=len(rows) + 1,
                name=name,
                config=configs[index] if index < len(configs) else "",
                status=PENDING if live else NOT_RUN,
                run_id=None,
                error="",
                cells=dict.fromkeys(seq_lens),
                published=str(published.get(name, "")),
            )
        )
    return LadderData(group, {r.id: r for r in runs}, seq_lens, rows)
