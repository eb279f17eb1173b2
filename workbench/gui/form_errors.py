"""A refusal in the words of the form: the row's label, not the core's field name or CLI flag.

The core says ``seq_lens: 'abc' is not allowed; …`` (or names its CLI flag, ``--seq-lens``);
the window's user typed into "Seq lengths", so the message that reaches them starts with the
label they see, and keeps the core's account of what is wrong and what to give instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from PySide6.QtWidgets import QFormLayout, QLabel, QLayout, QWidget

from kernels import knobs

# The head the core puts before its message: a field name (``seq_lens``) or a flag (``--tile-m``).
# A declared knob's is its flag and name, ``--plugin-knob softcap=25.0: …``.
_CORE_HEAD = re.compile(r"^\s*(--plugin-knob\s+)?(--)?[A-Za-z_][\w-]*\s*(:\s*|=)")
# A field name the way only code writes it (two words or more joined by "_").
_SNAKE_NAME = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")


def _layout_holds(layout: QLayout, widget: QWidget) -> bool:
    for index in range(layout.count()):
        item = layout.itemAt(index)
        if item is None:
            continue
        found = item.widget()
        if found is not None and (found is widget or found.isAncestorOf(widget)):
            return True
        inner = item.layout()
        if inner is not None and _layout_holds(inner, widget):
            return True
    return False


def row_label(form_owner: QWidget, widget: QWidget) -> str | None:
    """The text of the form row's label beside ``widget`` (None when no row holds it)."""
    for form in form_owner.findChildren(QFormLayout):
        for row in range(form.rowCount()):
            field = form.itemAt(row, QFormLayout.ItemRole.FieldRole)
            label = form.itemAt(row, QFormLayout.ItemRole.LabelRole)
            if field is None or label is None or not isinstance(label.widget(), QLabel):
                continue
            holder, inner, text = field.widget(), field.layout(), label.widget()
            inside = (holder is not None and (holder is widget or holder.isAncestorOf(widget))) or (
                inner is not None and _layout_holds(inner, widget)
            )
            if inside and isinstance(text, QLabel):
                return text.text().rstrip(":")
    return None


def field_label(form_owner: QWidget, field_name: str, widget: QWidget | None) -> str | None:
    """What the user knows the field as: a knob's own label (a switch sits in the "Options"
    row, a tile in the "Tile M × N" pair), else the label of the row that holds it."""
    knob = knobs.KNOBS.get(field_name)
    if knob is not None and knob.exposed:
        return knob.label
    return row_label(form_owner, widget) if widget is not None else None


def labelled_message(label: str | None, message: str, labels: Mapping[str, str]) -> str:
    """``message`` with the core's field name or flag in front replaced by ``label``, and the
    other fields it names in the core's words (``kv_heads``) by theirs (``labels``)."""
    body = _CORE_HEAD.sub("", message, count=1) if label else message
    body = _SNAKE_NAME.sub(lambda m: labels.get(m.group(0), m.group(0)), body)
    return f"{label}: {body}" if label else body
