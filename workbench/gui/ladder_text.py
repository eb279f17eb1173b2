"""The ladder view's words: a stored ladder's title in the picker and the line above the table."""

from __future__ import annotations

from typing import Any

from workbench.analysis.roofline import ran_on_the_cpu
from workbench.gui.history_model import format_created
from workbench.jobs.ladder_steps import LadderData, ladder_preset_text


def group_title(g: dict[str, Any]) -> str:
    """A stored ladder in the picker: id, label, when, and its steps run of those named."""
    steps = len((g.get("spec") or {}).get("steps") or [])
    of = f"/{steps}" if steps else ""
    label = g.get("label") or "ladder"
    created = format_created(g.get("created_at", ""))
    return f"#{g['id']} {label} · {created} · {g['runs']}{of} steps"


def info_text(data: LadderData | None, store_open: bool, key: str) -> str:
    """The line above the table: which ladder, where it ran, its steps' statuses and what the
    cells are coloured against (``key``); what to do when there is none."""
    if data is None:
        if not store_open:
            text = "No run database is open."
        else:
            text = (
                "No ladder is stored in this database yet. Set the problem, sequence lengths "
                "and backend in the form, then press Run ladder: the built-in ladder's steps "
                "(causal mask), each one change on the previous step."
            )
        return text
    first = next(iter(data.runs.values()), None)
    parts = [f"<b>Ladder #{data.group['id']}</b> {data.group.get('label') or ''}".strip()]
    if first is not None:
        gpu = first.machine.get("gpu_name") or first.machine.get("hostname") or ""
        where = f"{first.backend} on {gpu}" if gpu else first.backend
        parts.append(f"{where} · {first.problem.summary()}")
    counts: dict[str, int] = {}
    for row in data.rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    parts.append(
        f"{len(data.rows)} steps: " + ", ".join(f"{n} {status}" for status, n in counts.items())
    )
    spec = data.group.get("spec") or {}
    preset = ladder_preset_text(spec)
    if preset:
        parts.append(preset)
    total = (spec.get("published") or {}).get("total")
    if total:
        parts.append(published_words(total, first))
    against = "previous step" if key == "vs_previous" else "baseline"
    parts.append(
        f"cells: TFLOP/s and the speed-up against the {against}, coloured only beyond "
        "the noise (~: within it; as in Compare)"
    )
    return " · ".join(parts)


def published_words(figure: str, run: Any) -> str:
    """A published Blackwell gain beside a stored ladder: a GPU's figure, said to be one where
    the ladder ran on the CPU (the NumPy reference checks the steps; its timings are not a
    kernel's)."""
    if run is not None and ran_on_the_cpu(run.backend, run.machine):
        return f"published on a Blackwell GPU: {figure} (not comparable: this ran on the CPU)"
    return f"published on Blackwell: {figure}"
