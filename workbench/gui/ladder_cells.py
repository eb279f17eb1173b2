"""The ladder table's cells: a step's name, status and compiled resources, and each length's
measure with its speed-up, coloured by the core's verdict."""

from __future__ import annotations

import math
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QTableWidgetItem

from workbench.analysis.resources import CompiledResources
from workbench.analysis.roofline import ran_on_the_cpu
from workbench.gui.compare import FASTER, SLOWER
from workbench.gui.history_model import STATUS_COLORS, problem_summary
from workbench.gui.ladder_text import published_words
from workbench.jobs.ladder_steps import NOT_RUN, PENDING, StepRow, speedup_verdict

GAIN = FASTER  # the Compare tab's green and red, so both views read alike
LOSS = SLOWER
MISSING = QColor("#eeeeee")
STATUS_TEXT_COLORS = {**STATUS_COLORS, NOT_RUN: QColor("#757575"), PENDING: QColor("#757575")}
CELL_ROLE = Qt.ItemDataRole.UserRole  # a length cell's ladder_table cell (dict) or None
VERDICT_ROLE = Qt.ItemDataRole.UserRole + 1  # "gain", "loss", "neutral" or "missing"


def format_ratio(ratio: float | None) -> str:
    return f"×{ratio:.2f}" if ratio is not None and math.isfinite(ratio) else "–"


def format_marked(cell: dict[str, Any], key: str) -> str:
    """``×1.16`` beyond the noise, ``×1.02~`` within it (Compare's mark), ``–`` for none."""
    ratio = cell.get(key)
    if ratio is None or not math.isfinite(ratio):
        return "–"
    return f"×{ratio:.2f}{'' if cell.get(f'{key}_significant') else '~'}"


def noise_text(cell: dict[str, Any], key: str) -> str:
    noise = cell.get(f"{key}_noise_pct")
    if noise is None:
        return ""
    within = "beyond" if cell.get(f"{key}_significant") else "within"
    return f" ({within} the noise of ±{noise:.1f} %)"


def step_item(step: StepRow, run: Any) -> QTableWidgetItem:
    """The step's name; its config and run in the tooltip (``run``: its record, or None)."""
    # One line a step, so a ladder's every step is in view; the knobs are in the tooltip.
    item = QTableWidgetItem(f"{step.number}. {step.name}")
    tip = [step.config] if step.config else []
    tip.append(f"run #{step.run_id}" if step.run_id is not None else "no run for this step")
    if run is not None:
        tip.append(problem_summary(run))
    if step.published:
        tip.append(published_words(step.published, run))
    item.setToolTip("\n".join(tip))
    return item


def status_item(step: StepRow) -> QTableWidgetItem:
    item = QTableWidgetItem(step.status)
    color = STATUS_TEXT_COLORS.get(step.status)
    if color is not None:
        item.setForeground(QBrush(color))
    if step.error:
        item.setToolTip(step.error)
    item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
    return item


def compiled_item(step: StepRow, seq_lens: list[int], run: Any = None) -> QTableWidgetItem:
    """What the step compiled to, once a row (its lengths share a config and head dim), so
    a dip explains itself ("255r spill 5.5KB") and every step stays one line high; a dash
    says in its tooltip why there is nothing (``run``: the step's record, or None)."""
    found = [
        CompiledResources.from_dict(cell["compiled"])
        for n in seq_lens
        if (cell := step.cells.get(n)) and cell.get("compiled")
    ]
    shorts = list(dict.fromkeys(f.short() for f in found))
    item = QTableWidgetItem(" / ".join(shorts) if shorts else "–")
    item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
    if any(f.spills or f.error for f in found):
        item.setForeground(QBrush(QColor("#b00020")))
    if found:
        item.setToolTip("\n".join(dict.fromkeys(f"compiled: {f.summary()}" for f in found)))
    elif run is not None:
        item.setToolTip(nothing_compiled(run.backend, run.machine))
    return item


def nothing_compiled(backend: str, machine: Any) -> str:
    """Why a step's compiled column is a dash."""
    if ran_on_the_cpu(backend, machine):
        return (
            f"nothing compiled: the {backend} backend runs on the CPU; a ladder on the cutile "
            "backend shows each step's registers, spills and shared memory here"
        )
    return f"no compiled resources stored: the {backend} backend's kernel is not compiled offline"


def cell_item(step: StepRow, n: int, key: str, decode: bool) -> QTableWidgetItem:
    """Length ``n``'s cell of ``step``: the measure and its ratio against ``key``
    (``vs_previous`` or ``vs_baseline``); ``decode``: the ladder reads memory (GB/s)."""
    cell = step.cells.get(n)
    if cell is None:
        item = QTableWidgetItem("–")
        item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
        item.setBackground(QBrush(MISSING))
        item.setForeground(QBrush(QColor("#616161")))
        why = step.status
        if step.run_id is not None:
            why = f"run #{step.run_id} {step.status}"
            if step.error:
                why += f": {step.error.splitlines()[0]}"
            elif step.status == "running":
                why += ": not measured yet"
        item.setToolTip(f"N = {n:,}: no measurement ({why})")
        item.setData(CELL_ROLE, None)
        item.setData(VERDICT_ROLE, "missing")
        return item
    prev, base = cell.get("vs_previous"), cell.get("vs_baseline")
    ratio = "base" if step.number == 1 else format_marked(cell, key)
    # A decode ladder reads memory: its cells give GB/s of K+V.
    decode = decode and cell.get("kv_gbs") is not None
    measure = f"{cell['kv_gbs']:.3g} GB/s" if decode else f"{cell['tflops']:.3g}"
    compiled = cell.get("compiled")
    found = CompiledResources.from_dict(compiled) if compiled else None
    item = QTableWidgetItem(f"{measure}  {ratio}")
    item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
    if found is not None and (found.spills or found.error):
        item.setForeground(QBrush(QColor("#b00020")))
    verdict = speedup_verdict(cell, key)
    if verdict == "gain":
        item.setBackground(QBrush(GAIN))
    elif verdict == "loss":
        item.setBackground(QBrush(LOSS))
    item.setData(CELL_ROLE, dict(cell))
    item.setData(VERDICT_ROLE, verdict)
    item.setToolTip(
        f"N = {n:,}: {cell['latency_ms']:.4g} ms, {cell['tflops']:.4g} TFLOP/s\n"
        f"against the previous step {format_ratio(prev)}{noise_text(cell, 'vs_previous')}, "
        f"against the baseline {format_ratio(base)}{noise_text(cell, 'vs_baseline')}\n"
        + (f"compiled: {found.summary()}\n" if found else "")
        + "click to see this step's block map at this length"
    )
    return item
