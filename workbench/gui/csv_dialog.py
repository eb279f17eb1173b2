"""The save dialog of a CSV export, and the question before replacing a file it did not show."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget


def ask_csv_path(parent: QWidget, title: str, start: Path) -> Path | None:
    """The save dialog for a CSV export; None when cancelled. Adds .csv when no suffix is given
    (and asks before replacing an existing file of that name: the dialog never saw it)."""
    path, _ = QFileDialog.getSaveFileName(
        parent, title, str(start), "CSV files (*.csv);;All files (*)"
    )
    if not path:
        return None
    target = Path(path)
    target = target if target.suffix else target.with_suffix(".csv")
    return target if may_replace(parent, Path(path), target) else None


def may_replace(parent: QWidget, chosen: Path, target: Path) -> bool:
    """True unless ``target`` (the dialog's ``chosen`` name with a suffix added or replaced)
    already exists and the user declines to replace it. The save dialog confirms only the
    name it returned, so a file the window names itself is confirmed here."""
    if target == chosen or not (target.exists() or target.is_symlink()):
        return True
    answer = QMessageBox.question(
        parent,
        "Replace the file?",
        f"{target} already exists.\n\nReplace it? (You chose {chosen.name}; the export "
        f"adds {target.suffix}.)",
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
        QMessageBox.StandardButton.No,
    )
    return answer == QMessageBox.StandardButton.Yes
