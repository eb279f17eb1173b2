"""The ticked backends' own knobs in the sweep form, built from their declarations.

A backend's declaration (:class:`~workbench.backends.declaration.BackendDeclaration`; a
plugin's, ``--plugin FILE``) lists its knobs in the registry's form
(:class:`kernels.knobs.Knob`) and the rules between them. For each ticked backend that
declares knobs the form gets a row per knob: a check box for a switch, a spin box for an evenly
spaced run of numbers, a combo for any other choice, each starting at the value the command
line set (``--plugin-knob``), else the knob's default. Run checks them against the
declaration's rules (:func:`~workbench.backends.declaration.knob_violation`) and carries them
to the backend as the command line does: in the environment every engine child follows
(:mod:`workbench.backends.plugin_env`).

Each row's form field is named as the command line sets it (``--plugin-knob softcap``), the
name a backend's own refusal gives, so either refusal marks the same row.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QSpinBox,
    QWidget,
)

from kernels.knobs import Knob
from workbench.backends.declaration import BackendDeclaration, knob_violation
from workbench.backends.plugin_env import ENV_KNOBS, knob_settings
from workbench.config import ConfigError

FIELD_PREFIX = "--plugin-knob "  # a declared knob's form field: the flag that sets it
MIN_RANGE_VALUES = 5  # fewer evenly spaced values read better as a list to pick from


def field_name(knob_name: str) -> str:
    return f"{FIELD_PREFIX}{knob_name}"


def range_step(knob: Knob) -> float | None:
    """The step of a number knob whose values are an evenly spaced run (a spin box's), else
    None (a combo's choices)."""
    numeric = knob.kind is int or knob.kind is float  # a value type: identity, not equality
    if not numeric or len(knob.values) < MIN_RANGE_VALUES:
        return None
    values = sorted(knob.values)
    steps = [b - a for a, b in itertools.pairwise(values)]
    if steps[0] <= 0 or not all(math.isclose(s, steps[0], rel_tol=1e-9) for s in steps):
        return None
    return steps[0]


def values_words(knob: Knob) -> str:
    """``0.25, 0.5, 0.75``: the registry's words, listed here for a float knob (the
    registry's run-of-numbers check takes whole numbers only)."""
    if knob.kind is float:
        return ", ".join(knob.text(v) for v in knob.values)
    return knob.values_text()


def expected_words(knob: Knob) -> str:
    """What a refusal of a value outside the knob's values says."""
    return f"expected one of {values_words(knob)}" if knob.kind is float else knob.expected()


def decimals_of(values: Sequence[Any]) -> int:
    """The decimals a spin box needs to show each of ``values`` as written (at least one)."""
    return max(1, *(len(f"{float(v):.10g}".partition(".")[2]) for v in values))


def knob_widget(knob: Knob, value: Any) -> QWidget:
    """The widget of ``knob`` showing ``value``: check box, spin box or combo."""
    step = range_step(knob)
    widget: QWidget
    if knob.kind is bool:
        widget = QCheckBox()
        widget.setChecked(bool(value))
    elif step is not None and knob.kind is int:
        widget = QSpinBox()
        widget.setRange(int(min(knob.values)), int(max(knob.values)))
        widget.setSingleStep(int(step))
        widget.setValue(int(value))
    elif step is not None:
        widget = QDoubleSpinBox()
        widget.setDecimals(decimals_of(knob.values))
        widget.setRange(float(min(knob.values)), float(max(knob.values)))
        widget.setSingleStep(step)
        widget.setValue(float(value))
    else:
        widget = QComboBox()
        for choice in knob.values:
            widget.addItem(knob.text(choice), choice)
        widget.setCurrentIndex(max(widget.findData(value), 0))
    widget.setObjectName(field_name(knob.name))
    tip = f"{knob.help}; {values_words(knob)} (default {knob.text(knob.default)})"
    if knob.tunable:  # what the form's tuner box does to it
        tip += "\nWith Autotune ticked the tuner chooses it per length, unless you set it here"
    widget.setToolTip(tip)
    return widget


def knob_value(widget: QWidget) -> Any:
    """The value ``widget`` (one :func:`knob_widget` made) shows."""
    if isinstance(widget, QCheckBox):
        return widget.isChecked()
    if isinstance(widget, QSpinBox | QDoubleSpinBox):
        return widget.value()
    assert isinstance(widget, QComboBox)
    return widget.currentData()


class DeclaredKnobs(QGroupBox):
    """A row per knob the ticked backends declare; hidden when none declares one.
    ``changed`` fires on an edit; :attr:`widgets` maps each row's form field to its widget."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("declared_knobs")
        self._rows = QFormLayout(self)
        self._declarations: list[BackendDeclaration] = []
        self._knobs: dict[str, Knob] = {}
        self._wanted: dict[str, Any] = {}  # values asked for before their knob was declared
        self.widgets: dict[str, QWidget] = {}
        self.hide()

    def show_declarations(self, declarations: Sequence[BackendDeclaration]) -> bool:
        """Rows for the knobs of ``declarations`` (the ticked backends'); a value shown for a
        knob of the same name stays. Returns whether the rows changed."""
        self._declarations = [d for d in declarations if d.knobs]
        wanted: dict[str, Knob] = {}
        for declaration in self._declarations:
            for knob in declaration.knobs:
                wanted.setdefault(knob.name, knob)  # one value a name: the environment's
        if wanted == self._knobs:
            return False
        shown = {**self._wanted, **self.values()}
        given = knob_settings()
        while self._rows.rowCount():
            self._rows.removeRow(0)
        before, self._knobs, self.widgets = self._knobs, wanted, {}
        for knob in wanted.values():
            value = shown.get(knob.name, given.get(knob.name, knob.default))
            earlier = before.get(knob.name)
            if earlier is not None and value == earlier.default:
                value = knob.default  # left at its default: an edited plugin's new default wins
            widget = knob_widget(knob, value if value in knob.values else knob.default)
            self._connect(widget)
            self._rows.addRow(knob.label, widget)
            self.widgets[field_name(knob.name)] = widget
        names = ", ".join(d.name for d in self._declarations)
        self.setTitle(f"Knobs of {names}" if names else "")
        self.setVisible(bool(wanted))
        return True

    def _connect(self, widget: QWidget) -> None:
        if isinstance(widget, QCheckBox):
            widget.toggled.connect(self.changed)
        elif isinstance(widget, QSpinBox | QDoubleSpinBox):
            widget.valueChanged.connect(self.changed)
        elif isinstance(widget, QComboBox):
            widget.currentIndexChanged.connect(self.changed)

    def want(self, values: Mapping[str, Any]) -> None:
        """Values for knobs not declared yet (saved settings arrive before the probe)."""
        self._wanted.update(values)

    def values(self) -> dict[str, Any]:
        """Knob name -> the value its row shows."""
        return {
            name.removeprefix(FIELD_PREFIX): knob_value(widget)
            for name, widget in self.widgets.items()
        }

    def check(self, mask: str) -> None:
        """Refuse a value a ticked backend's declaration refuses under ``mask`` (outside its
        values, or against a rule) as a ConfigError naming the row's field."""
        values = self.values()
        for name, value in values.items():  # a spin box takes values between the steps
            knob = self._knobs[name]
            if value not in knob.values:
                raise ConfigError(field_name(name), value, expected_words(knob))
        for declaration in self._declarations:
            own = {k.name: values[k.name] for k in declaration.knobs if k.name in values}
            refused = knob_violation(declaration, own, mask)
            if refused is not None:
                raise ConfigError(field_name(refused.field), refused.value, refused.reason)

    def carry(self) -> None:
        """Give the backends the rows' values as ``--plugin-knob`` does: in the environment the
        engine child follows at each call (knobs of backends not ticked keep theirs)."""
        if self.widgets:
            # A row left at its knob's default is not passed: each backend then takes its own
            # default, as without --plugin-knob (two plugins may share a knob's name).
            values = self.values()
            kept = {k: v for k, v in knob_settings().items() if k not in values}
            moved = {k: v for k, v in values.items() if v != self._knobs[k].default}
            os.environ[ENV_KNOBS] = json.dumps({**kept, **moved})
