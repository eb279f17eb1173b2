"""How the sweep form shows a refused value: the named field framed in red, the message led by
the field's label in its tooltip and under Run. :class:`FieldMarks` is a part of
:class:`~workbench.gui.controls.ControlsPanel`, which holds the fields."""

from __future__ import annotations

from typing import Any, cast

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QLineEdit, QWidget

from workbench.gui.decode_fields import DecodeFields
from workbench.gui.form_errors import field_label, labelled_message

# Fields the core may name that the form shows elsewhere: a length error is a seq-length error.
_FIELD_ALIASES = {"q_len": "seq_lens", "k_len": "seq_lens", "backend": "backends"}

# The red frame an invalid field gets; a dynamic property keeps the style in one place.
INVALID_STYLE = '*[invalid="true"] { border: 1px solid #d62728; background: #fdecea; }'


class FieldMarks:
    """Marking and clearing the field a refusal names, for the form that mixes it in."""

    _fields: dict[str, QWidget]
    _tooltips: dict[str, str]
    seq_lens: QLineEdit
    decode: DecodeFields
    error_label: QLabel
    edited: Any  # the form's Signal, declared there

    def field_widget(self, name: str) -> QWidget | None:
        if name == "k_lens":
            return self.seq_lens  # the lengths of a decode sweep are the same field
        if name == "q_len" and self.decode.decode():
            return self.decode.q_len  # a decode sweep's q_len is its own field
        return self._fields.get(_FIELD_ALIASES.get(name, name))

    def mark_error(self, field_name: str, message: str) -> str:
        """Frame the named field in red, put the message, led by the field's label, in its
        tooltip and under the form; returns that message (for the status bar)."""
        self.clear_errors()
        widget = self.field_widget(field_name)
        labels = {
            name: field_label(cast(QWidget, self), name, w) or name
            for name, w in self._fields.items()
        }
        message = labelled_message(
            field_label(cast(QWidget, self), field_name, widget), message, labels
        )
        if widget is not None:
            self._tooltips[widget.objectName()] = widget.toolTip()
            widget.setProperty("invalid", True)
            widget.setToolTip(message)
            widget.style().unpolish(widget)
            widget.style().polish(widget)
            widget.setFocus(Qt.FocusReason.OtherFocusReason)
        self.error_label.setText(message)
        self.error_label.setToolTip(message)  # all of it, should it run past the reserved lines
        self.error_label.show()
        return message

    def clear_errors(self) -> None:
        for name, widget in self._fields.items():
            if widget.property("invalid"):
                widget.setProperty("invalid", False)
                widget.setToolTip(self._tooltips.pop(name, ""))
                widget.style().unpolish(widget)
                widget.style().polish(widget)
        self.error_label.clear()
        self.error_label.setToolTip("")
        self.error_label.hide()

    def invalid_fields(self) -> list[str]:
        return [name for name, w in self._fields.items() if w.property("invalid")]

    def _on_edited(self) -> None:
        # Editing the marked field is the user acting on the message: drop the mark.
        if self.invalid_fields():
            self.clear_errors()
        self.edited.emit()
