"""The Kernel group of the sweep form: a row per knob of the registry, the mask and its
offset and window, and what greys a row or an entry out.

A row the registry says means nothing with the rest of the form (:func:`kernels.knobs.applies`)
is greyed out with the registry's reason as its tooltip and shows, and runs, its default; the
value set there comes back when the row applies again. An entry the ticked backends refuse on
the GPU's architecture, or that a rule about that knob refuses (:func:`kernels.knobs.refusal`),
is greyed out with the reason as tooltip. :class:`KernelKnobs` is a part of
:class:`~workbench.gui.controls.ControlsPanel`, which holds the fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from kernels import knobs
from workbench.config import MAX_SEQ_LEN

# (shown text, mask value, whether the causal offset applies)
MASK_CHOICES: tuple[tuple[str, str, bool], ...] = (
    ("None (dense)", "none", False),
    ("Causal", "causal", False),
    ("Causal with offset (input_pos)", "causal-offset", True),
    ("Sliding window", "window", True),
)


class KernelKnobs:
    """The knob rows and their greying, for the form that mixes it in (its fields, backends,
    head dim and mask)."""

    _fields: dict[str, QWidget]
    _help: dict[str, str]
    _kept: dict[str, Any]
    _quiet: bool
    _arch: str | None
    backends: Any
    head_dim: QComboBox
    mask: QComboBox
    input_pos: QSpinBox
    window: QSpinBox

    # The form's own helpers (annotations only: a stub here would shadow the form's method).
    _spin: Callable[..., QSpinBox]
    _combo: Callable[[str, list[tuple[str, Any]]], QComboBox]
    _register: Callable[[str, QWidget], None]
    _on_edited: Callable[[], None]
    _on_mask_changed: Callable[[], None]
    _mask_choice: Callable[[], tuple[str, bool]]

    def _knob_widget(self, knob: knobs.Knob) -> QWidget:
        """A check box for a switch, a combo of the registry's values for a number."""
        widget: QWidget
        if knob.kind is bool:
            widget = QCheckBox(knob.label)
            widget.setChecked(knob.default)
            widget.toggled.connect(self._on_knob_changed)
        else:
            widget = QComboBox()
            for value in knob.values:
                widget.addItem(knob.text(value), value)
            widget.setCurrentIndex(widget.findData(knob.default))
            widget.currentIndexChanged.connect(self._on_knob_changed)
        rules = knobs.rules_text(knob.name)
        widget.setToolTip(f"{knob.help}; {rules}" if rules else knob.help)
        self._register(knob.name, widget)
        setattr(self, knob.name, widget)
        return widget

    def _build_kernel_group(self) -> QGroupBox:
        group = QGroupBox("Kernel")
        form = QFormLayout(group)
        rows: list[tuple[str, QWidget]] = []
        flags = QWidget()
        flag_column = QVBoxLayout(flags)
        flag_column.setContentsMargins(0, 0, 0, 0)
        partners = {k.pair for k in knobs.EXPOSED if k.pair}
        # Autotune heads the switches: it decides the tiles above, and was below the fold.
        for knob in sorted(knobs.EXPOSED, key=lambda k: k.name != knobs.FORM_FIRST):
            if knob.name in partners:
                continue
            widget = self._knob_widget(knob)
            if knob.kind is bool:
                flag_column.addWidget(widget)
            elif knob.pair:
                pair = QHBoxLayout()
                pair.setContentsMargins(0, 0, 0, 0)
                pair.addWidget(widget, 1)
                pair.addWidget(QLabel("×" if knob.always else "/"))
                pair.addWidget(self._knob_widget(knobs.KNOBS[knob.pair]), 1)
                holder = QWidget()
                holder.setLayout(pair)
                rows.append((knob.pair_label, holder))
            else:
                rows.append((knob.label, widget))
        self._help = {k.name: self._fields[k.name].toolTip() for k in knobs.EXPOSED}

        self.mask: QComboBox = self._combo("mask", [(t, v) for t, v, _ in MASK_CHOICES])
        self.mask.currentIndexChanged.connect(self._on_mask_changed)
        self.input_pos = self._spin("input_pos", 0, MAX_SEQ_LEN, 0)
        self.input_pos.setToolTip("Causal offset: queries are the last tokens of a longer sequence")
        self.window: QSpinBox = self._spin("window", 1, MAX_SEQ_LEN, 256)
        self.window.setToolTip("Each query sees this many most recent keys")

        # The tiles first, then the mask, the switches and the other numbers.
        form.addRow(*rows[0])
        form.addRow("Mask", self.mask)
        form.addRow("Offset", self.input_pos)
        form.addRow("Window", self.window)
        form.addRow("Options", flags)
        for label, widget in rows[1:]:
            form.addRow(label, widget)
        return group

    # ---- backends -------------------------------------------------------------------------------
    def set_backend_statuses(self, statuses: Mapping[str, Any]) -> None:
        """Enable available backends; a disabled entry's tooltip says why it is unavailable.
        The knob values offered follow the cuTile backend's GPU architecture."""
        from workbench.backends import gpu_arch

        self.backends.set_statuses(statuses)
        self.set_arch(gpu_arch(statuses))

    def set_arch(self, arch: str | None) -> None:
        """Offer the knob values the cuTile kernel runs on GPU architecture ``arch``
        (``"sm_120"``; None: every value it takes). The probe sets it from the cuTile
        backend's GPU."""
        self._arch = arch
        self._refresh()

    def arch(self) -> str | None:
        return self._arch

    def _ticked_capabilities(self) -> list[str | None]:
        """The registry capabilities of the ticked backends; [None] (the config's own checks)
        where none narrows: a capability's check runs the config's first."""
        from workbench.backends import knob_capability

        ticked = {knob_capability(b) for b in self.backends.checked()} - {None}
        return sorted(ticked) or [None]  # type: ignore[type-var]  # the difference took None out

    def _refusal(
        self,
        name: str,
        value: Any,
        values: Mapping[str, Any],
        mask: str,
        capabilities: Sequence[str | None],
    ) -> str:
        """Why a ticked backend (or the config itself) refuses ``value`` of knob ``name``, the
        rest of the form as it is; "" where none does."""
        for capability in capabilities:
            refused = knobs.refusal(
                name, value, values, mask, capability=capability, arch=self._arch
            )
            if refused is not None:
                return refused.reason
        return ""

    def _offer_for_backends(self) -> None:
        """Grey out the head dims a ticked backend cannot run (cuTile's), with the reason as
        tooltip; the knobs follow the registry (:meth:`_refresh`)."""
        from workbench.backends import offered_values

        ticked = self.backends.checked()
        box = self.head_dim
        model = box.model()
        for row in range(box.count()):
            value = box.itemData(row)
            refusing = [
                name
                for name in ticked
                if value not in offered_values(name).get("head_dim", (value,))
            ]
            item = model.item(row)  # type: ignore[attr-defined]
            item.setEnabled(not refusing)
            allowed = (
                ", ".join(str(v) for v in offered_values(refusing[0])["head_dim"])
                if refusing
                else ""
            )
            item.setToolTip(f"{refusing[0]} takes {allowed}" if refusing else "")
        self._refresh()

    def _knob_values(self) -> dict[str, Any]:
        """The knob values the form shows (and runs)."""
        values = {}
        for knob in knobs.EXPOSED:
            widget = self._fields[knob.name]
            if isinstance(widget, QCheckBox):
                values[knob.name] = widget.isChecked()
            else:
                values[knob.name] = widget.currentData()  # type: ignore[attr-defined]
        return values

    def _show(self, name: str, value: Any) -> None:
        widget = self._fields[name]
        if isinstance(widget, QCheckBox):
            widget.setChecked(bool(value))
        elif isinstance(widget, QComboBox):
            index = widget.findData(value)
            if index >= 0:
                widget.setCurrentIndex(index)

    def _refresh(self) -> None:
        """Grey out what the registry says does not apply or is refused, saying why."""
        if self._quiet or not hasattr(self, "backends"):
            return
        self._quiet = True
        try:
            mask, _ = self._mask_choice()
            for _ in range(len(knobs.EXPOSED)):  # until no row changes (a row's rule reads others)
                values = self._knob_values()
                changed = False
                for knob in knobs.EXPOSED:
                    inapplicable = knobs.applies(knob.name, values, mask) is not None
                    if inapplicable and knob.name not in self._kept:
                        self._kept[knob.name] = values[knob.name]
                        self._show(knob.name, knob.default)
                        changed = True
                    elif not inapplicable and knob.name in self._kept:
                        self._show(knob.name, self._kept.pop(knob.name))
                        changed = True
                if not changed:
                    break
            values = self._knob_values()
            capabilities = self._ticked_capabilities()  # once: every entry below asks
            for knob in knobs.EXPOSED:
                widget = self._fields[knob.name]
                reason = knobs.applies(knob.name, values, mask)
                if reason is not None:  # the reason first, then what the knob is
                    widget.setEnabled(False)
                    widget.setToolTip(f"{reason}\n\n{self._help[knob.name]}")
                    continue
                if isinstance(widget, QCheckBox):
                    why = self._refusal(
                        knob.name, not widget.isChecked(), values, mask, capabilities
                    )
                    widget.setEnabled(not why)
                    widget.setToolTip(
                        f"{why}\n\n{self._help[knob.name]}" if why else self._help[knob.name]
                    )
                    continue
                widget.setEnabled(True)
                widget.setToolTip(self._help[knob.name])
                box: QComboBox = widget  # type: ignore[assignment]
                model = box.model()
                for row in range(box.count()):
                    why = self._refusal(knob.name, box.itemData(row), values, mask, capabilities)
                    item = model.item(row)  # type: ignore[attr-defined]
                    item.setEnabled(not why)
                    item.setToolTip(why)
        finally:
            self._quiet = False

    def _on_knob_changed(self) -> None:
        self._on_edited()
        self._refresh()

    def offered(self, field_name: str) -> list[Any]:
        """The values of a combo field the form offers now (its enabled entries)."""
        box: QComboBox = getattr(self, field_name)
        model = box.model()
        return [
            box.itemData(row)
            for row in range(box.count())
            if model.item(row).isEnabled()  # type: ignore[attr-defined]
        ]
