"""A form field's raw value, read and set whatever its kind of widget (for QSettings)."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QLineEdit,
    QSpinBox,
    QWidget,
)

from workbench.gui.backend_picker import BackendPicker

_NOTHING = object()  # a widget without a value of its own


def widget_value(widget: QWidget) -> Any:
    """The field's value, JSON-friendly; ``_NOTHING`` for a widget that holds none."""
    if isinstance(widget, QSpinBox | QDoubleSpinBox):
        return widget.value()
    if isinstance(widget, QComboBox):
        return widget.currentData()
    if isinstance(widget, QCheckBox):
        return widget.isChecked()
    if isinstance(widget, QLineEdit):
        return widget.text()
    if isinstance(widget, BackendPicker):
        return widget.checked()
    return _NOTHING


def has_value(value: Any) -> bool:
    return value is not _NOTHING


def set_widget_value(widget: QWidget | None, value: Any) -> None:
    """Put ``value`` into the field; raises TypeError/ValueError for a value it cannot take."""
    if isinstance(widget, QSpinBox):
        widget.setValue(int(value))
    elif isinstance(widget, QDoubleSpinBox):
        widget.setValue(float(value))
    elif isinstance(widget, QComboBox):
        index = widget.findData(value)
        if index >= 0:
            widget.setCurrentIndex(index)
    elif isinstance(widget, QCheckBox):
        widget.setChecked(bool(value))
    elif isinstance(widget, QLineEdit):
        widget.setText(str(value))
    elif isinstance(widget, BackendPicker) and isinstance(value, list):
        # Backends become tickable only once probed; the picker keeps the wish.
        widget.set_checked([str(v) for v in value])
