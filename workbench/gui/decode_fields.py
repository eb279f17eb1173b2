"""The form's decode row: what the lengths are (N, or k_len at a fixed q_len), the fixed q_len,
and the decode presets (a model's heads, one new token or 16 draft tokens, k_len 4k-128k).

A decode user states q_len and k_len apart: with the axis on "k_len" the form's lengths are key
lengths and every point has the q_len set here, the queries being the last tokens (causal is
bottom-right). A preset is the core's (:mod:`workbench.problem_presets`): picking one asks the
form to put its fields in (:attr:`DecodeFields.presetChosen`); the form stays the one place that
holds values.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from workbench.config import K_LEN_AXIS, MAX_SEQ_LEN, SEQ_LEN_AXIS
from workbench.problem_presets import preset_knobs, problem_presets

AXIS_CHOICES: tuple[tuple[str, str], ...] = (
    ("N (q = k)", SEQ_LEN_AXIS),
    ("k_len (decode)", K_LEN_AXIS),
)


def preset_fields(name: str) -> dict[str, Any]:
    """The form fields of decode preset ``name`` (``kv_heads`` 0 means "same as heads"), its
    kernel settings at its head dim included (:func:`workbench.problem_presets.preset_knobs`)."""
    preset = problem_presets()[name]
    problem = preset.template()
    return {
        **preset_knobs(problem.head_dim),
        "batch": problem.batch,
        "heads": problem.heads,
        "kv_heads": 0 if problem.kv_heads == problem.heads else problem.kv_heads,
        "head_dim": problem.head_dim,
        "head_dim_v": problem.head_dim_v or 0,
        "dtype": problem.dtype,
        "axis": preset.axis,
        "q_len": problem.q_len,
        "seq_lens": preset.k_lens,
        "mask": preset.mask,
    }


class DecodeFields(QWidget):
    """Axis, q_len and preset; emits ``changed`` on an edit and ``presetChosen`` with the
    preset's form fields."""

    changed = Signal()
    presetChosen = Signal(dict)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.axis = QComboBox()
        self.axis.setObjectName("axis")
        for text, value in AXIS_CHOICES:
            self.axis.addItem(text, value)
        self.axis.setToolTip(
            "What the lengths are: N (q_len = k_len, with the offset as cached keys), or key "
            "lengths at the fixed q_len beside (decode: the queries are the last tokens)"
        )
        self.q_len = QSpinBox()
        self.q_len.setObjectName("q_len")
        self.q_len.setRange(1, MAX_SEQ_LEN)
        self.q_len.setValue(1)
        self.q_len.setMaximumWidth(90)
        self.q_len.setToolTip("Query rows against every key length: 1 new token, or 4-16 drafts")
        self.q_len_label = QLabel("q_len")
        self.preset = QComboBox()
        self.preset.setObjectName("problem_preset")
        self.preset.addItem("Decode preset…", None)
        for name, preset in problem_presets().items():
            self.preset.addItem(name, name)
            self.preset.setItemData(
                self.preset.count() - 1, preset.description, Qt.ItemDataRole.ToolTipRole
            )
        self.preset.setToolTip("Fill the problem in with a model's decode shape")
        # Narrow: the form must not widen the window's minimum (a laptop screen).
        self.preset.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.preset.setMinimumContentsLength(7)

        self.axis.currentIndexChanged.connect(self._on_axis_changed)
        self.q_len.valueChanged.connect(self._on_edited)
        self.preset.activated.connect(self._on_preset)
        # Two short rows: the axis and q_len, then the presets.
        rows = QVBoxLayout(self)
        rows.setContentsMargins(0, 0, 0, 0)
        first = QHBoxLayout()
        first.addWidget(self.axis, 1)
        first.addWidget(self.q_len_label)
        first.addWidget(self.q_len)
        rows.addLayout(first)
        rows.addWidget(self.preset)
        self._on_axis_changed()

    def axis_value(self) -> str:
        return str(self.axis.currentData())

    def decode(self) -> bool:
        return self.axis_value() == K_LEN_AXIS

    def _on_axis_changed(self) -> None:
        # q_len is fixed only along k_len; along N it is each length.
        self.q_len.setEnabled(self.decode())
        self.q_len_label.setEnabled(self.decode())
        self.changed.emit()

    def _on_edited(self) -> None:
        self.changed.emit()

    def _on_preset(self, index: int) -> None:
        name = self.preset.itemData(index)
        if name:
            self.presetChosen.emit(preset_fields(str(name)))
        # Back to the placeholder, so picking the same preset again still fires.
        self.preset.setCurrentIndex(0)
