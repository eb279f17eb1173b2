"""The backend picker: a compact checkable list, one row per backend.

One ticked backend is a plain run; several are a group sweep (the core's
:func:`workbench.jobs.job_for` decides, the picker only reports what is ticked). A backend the
probe found unusable is shown greyed out and cannot be ticked; its tooltip is the probe's
one-line reason, which says what to install (fa4's names the pip command).

The ticks the saved settings ask for are kept as a wish until the probe reports, because every
backend but the reference is disabled until then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QListWidget, QListWidgetItem, QWidget

ALWAYS_AVAILABLE = "reference"
CHECKING = "Checking whether this backend is available…"


class BackendPicker(QListWidget):
    """Checkable backends; ``changed`` fires when the ticks change (by the user or a probe)."""

    changed = Signal()

    def __init__(self, names: Iterable[str] = (ALWAYS_AVAILABLE,), parent: QWidget | None = None):
        super().__init__(parent)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.setUniformItemSizes(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setToolTip("Tick one backend for a run, several for a group timed interleaved")
        self._wanted: list[str] | None = None
        self.itemChanged.connect(self._on_item_changed)
        self.set_names(tuple(names))

    # ---- contents -------------------------------------------------------------------------------
    def names(self) -> list[str]:
        return [self._name(self.item(i)) for i in range(self.count())]

    def set_names(self, names: Iterable[str]) -> None:
        """Rebuild the rows; ticks survive for names kept. All but the reference start
        disabled until :meth:`set_statuses` says otherwise."""
        names = list(names)
        ticked = [n for n in self.checked() if n in names] or [ALWAYS_AVAILABLE]
        self.blockSignals(True)
        self.clear()
        for name in names:
            item = QListWidgetItem(name)
            item.setData(Qt.ItemDataRole.UserRole, name)
            item.setCheckState(Qt.CheckState.Checked if name in ticked else Qt.CheckState.Unchecked)
            self.addItem(item)
            if name != ALWAYS_AVAILABLE:
                self._set_item(item, False, CHECKING)
            else:
                self._set_item(item, True, "")
        self.blockSignals(False)
        self._fit_height()
        self.changed.emit()

    def set_statuses(self, statuses: Mapping[str, Any]) -> None:
        """Enable available backends, disable (and untick) the others with their reason."""
        if self.names() != list(statuses):
            self.set_names(list(statuses))
        from workbench.backends import backend_notes

        notes = backend_notes()  # what each can and cannot do in decode, available or not
        self.blockSignals(True)
        for i in range(self.count()):
            item = self.item(i)
            status = statuses[self._name(item)]
            tip = status.reason or ("available" if status.available else "unavailable")
            if notes.get(self._name(item)):
                tip += f"\nNote: {notes[self._name(item)]}"
            self._set_item(item, bool(status.available), tip)
            if not status.available:
                item.setCheckState(Qt.CheckState.Unchecked)
        wanted, self._wanted = self._wanted, None
        if wanted is not None:
            usable = [n for n in wanted if self.is_enabled(n)]
            if usable:
                self._tick(usable)
        if not self.checked():
            self._tick([ALWAYS_AVAILABLE])
        self.blockSignals(False)
        self.changed.emit()

    # ---- ticks ----------------------------------------------------------------------------------
    def checked(self) -> list[str]:
        """The ticked backends, in display order."""
        return [
            self._name(self.item(i))
            for i in range(self.count())
            if self.item(i).checkState() == Qt.CheckState.Checked
        ]

    def set_checked(self, names: Iterable[str]) -> None:
        """Tick exactly ``names`` where they are enabled; remember them for the next probe
        (a saved choice of GPU backends arrives before the probe has enabled them)."""
        names = list(names)
        self._wanted = names
        usable = [n for n in names if self.is_enabled(n)]
        if usable:
            self.blockSignals(True)
            self._tick(usable)
            self.blockSignals(False)
            self.changed.emit()

    def is_enabled(self, name: str) -> bool:
        item = self._item(name)
        return item is not None and bool(item.flags() & Qt.ItemFlag.ItemIsEnabled)

    # ---- internals ------------------------------------------------------------------------------
    def _tick(self, names: list[str]) -> None:
        for i in range(self.count()):
            item = self.item(i)
            want = self._name(item) in names
            item.setCheckState(Qt.CheckState.Checked if want else Qt.CheckState.Unchecked)

    def _on_item_changed(self, item: QListWidgetItem) -> None:
        self._wanted = None  # the user's own tick replaces a saved wish
        self.changed.emit()

    @staticmethod
    def _name(item: QListWidgetItem) -> str:
        return str(item.data(Qt.ItemDataRole.UserRole))

    def _item(self, name: str) -> QListWidgetItem | None:
        for i in range(self.count()):
            if self._name(self.item(i)) == name:
                return self.item(i)
        return None

    @staticmethod
    def _set_item(item: QListWidgetItem, enabled: bool, tip: str) -> None:
        flags = Qt.ItemFlag.ItemIsUserCheckable
        if enabled:
            flags |= Qt.ItemFlag.ItemIsEnabled
        item.setFlags(flags)
        item.setToolTip(tip)

    def _fit_height(self) -> None:
        # Compact: exactly the rows, no empty list area and no scroll bar for a handful.
        # Before the first show the style may report rows shorter than the text.
        rows = max(self.count(), 1)
        row = max(self.sizeHintForRow(0) if self.count() else 0, self.fontMetrics().height() + 4)
        self.setFixedHeight(rows * row + 2 * self.frameWidth() + 2)
