"""The window's exports: a ladder's points to CSV (the Ladder tab's Export) and the plots to PNG
(File › Export plots as PNG…). Both ask before replacing a file the dialog did not name exactly
and never write onto the open database (:mod:`workbench.safe_write`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QFileDialog

from workbench.gui.history import ask_csv_path, may_replace
from workbench.store import StoreError


class Exports(QObject):
    """Exports for ``window`` (its store, plots, History's export folder and messages)."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self.window = window

    @Slot(int)
    def ladder_csv(self, group_id: int) -> Path | None:
        """Every point of ladder ``group_id``'s runs to a CSV file the user picks."""
        w = self.window
        if w.store is None:
            return None
        try:
            run_ids = [r.id for r in w.store.group_runs(group_id)]
        except (StoreError, OSError) as exc:
            w.warn("Export", str(exc))
            return None
        if not run_ids:  # export_csv would export every run for an empty list
            w.show_status(f"Ladder #{group_id} has no runs to export")
            return None
        start = Path(w.history.export_dir or Path.home()) / f"fmha-ladder-{group_id}.csv"
        target = ask_csv_path(w, f"Export ladder #{group_id} to CSV", start)
        if target is None:
            return None
        try:
            rows = w.store.export_csv(target, run_ids)
        except (StoreError, OSError) as exc:
            w.warn("Export", f"Could not write {target}:\n{exc}")
            return None
        w.history.export_dir = str(target.parent)
        w.show_status(
            f"Exported {rows} point{'s' if rows != 1 else ''} of ladder #{group_id} to {target}"
        )
        return target

    @Slot()
    def plots_png(self) -> Path | None:
        """The Plots tab's curves to a PNG file the user picks."""
        w = self.window
        start = str(Path(w.history.export_dir or Path.home()) / "fmha-plots.png")
        path, _ = QFileDialog.getSaveFileName(w, "Export plots as PNG", start, "PNG images (*.png)")
        if not path:
            return None
        chosen = Path(path)
        target = chosen if chosen.suffix.lower() == ".png" else chosen.with_suffix(".png")
        if not may_replace(w, chosen, target):
            return None
        protected = [w.store.path] if w.store is not None else []
        try:
            target = w.plots.export_png(target, protected=protected)
        except Exception as exc:
            w.warn("Export", f"Could not write {path}:\n{exc}")
            return None
        w.history.export_dir = str(target.parent)
        w.show_status(f"Saved the plots to {target}")
        return target
