"""The sweep form: problem shape, kernel knobs, backends (several: a group), label, Run, Cancel.

The form only collects values. Validation is the core's: :meth:`ControlsPanel.spec` builds the
core's frozen dataclasses and lets their :class:`~workbench.config.ConfigError` propagate, and the
window hands the error back through :meth:`ControlsPanel.mark_error`, which marks the field the
error names. Spin-box ranges are therefore deliberately loose: a rule written twice drifts apart,
and the core's message says what is allowed.

The Kernel group (a row per knob of the registry, and what greys one out) is
:class:`~workbench.gui.kernel_knobs.KernelKnobs`; marking a refused field is
:class:`~workbench.gui.field_marks.FieldMarks`. Both are parts of :class:`ControlsPanel`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from kernels import knobs, schedule
from workbench.backends.cutile_serving import kernel_defaults
from workbench.config import (
    DTYPES,
    HEAD_DIMS,
    MAX_LABEL_CHARS,
    SEQ_LEN_AXIS,
    ConfigError,
    KernelConfig,
    Problem,
    SweepSpec,
    parse_seq_lens,
)
from workbench.gui.backend_picker import BackendPicker
from workbench.gui.declared_knobs import FIELD_PREFIX as DECLARED_FIELD
from workbench.gui.declared_knobs import DeclaredKnobs
from workbench.gui.decode_fields import DecodeFields
from workbench.gui.field_marks import INVALID_STYLE, FieldMarks
from workbench.gui.form_values import has_value, set_widget_value, widget_value
from workbench.gui.kernel_knobs import MASK_CHOICES, KernelKnobs
from workbench.gui.serving_fields import ServingFields
from workbench.problem_presets import head_dim_knobs

# Power-of-two ranges in the syntax parse_seq_lens accepts, so the line edit stays the one source.
SEQ_PRESETS: tuple[tuple[str, str], ...] = (
    ("64 … 1k", "64-1k"),
    ("256 … 4k", "256-4k"),
    ("1k … 16k", "1k-16k"),
    ("4k … 32k", "4k-32k"),
    ("1k … 64k", "1k-64k"),
)

DEFAULT_BACKENDS = ("reference",)
SAME_AS_D = "same as D"  # the value head dim's "not set"
ERROR_LINES = 3  # the lines a validation message under Run has, shown or not


# mask and window are form rows here, shadowing QWidget.mask()/window() (nothing calls those)
class ControlsPanel(KernelKnobs, FieldMarks, QWidget):  # type: ignore[misc]
    """Problem and kernel controls. Emits ``runRequested`` / ``cancelRequested``; holds no logic."""

    runRequested = Signal()
    cancelRequested = Signal()
    edited = Signal()  # any field changed: what the form describes may have changed

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setStyleSheet(INVALID_STYLE)
        self._fields: dict[str, QWidget] = {}
        self._tooltips: dict[str, str] = {}
        self._can_run = True  # False while e.g. the database is read-only
        self._arch: str | None = None  # the cuTile backend's GPU architecture, once probed
        self._kept: dict[str, Any] = {}  # a greyed-out knob row's own value
        self._quiet = False  # set while the form sets its own fields

        # The problem and kernel groups scroll; Run and Cancel stay below them, always in view
        # (in one long scrolling form a small window hid them below the fold).
        form = QWidget()
        form.setObjectName("form_groups")
        groups = QVBoxLayout(form)
        groups.setContentsMargins(0, 0, 0, 0)
        groups.addWidget(self._build_problem_group())
        groups.addWidget(self._build_kernel_group())
        self.declared = DeclaredKnobs()  # the ticked backends' own knobs, once one declares any
        self.declared.changed.connect(self._on_edited)
        groups.addWidget(self.declared)
        groups.addStretch(1)
        self.form_scroll = QScrollArea()
        self.form_scroll.setObjectName("form_scroll")
        self.form_scroll.setWidgetResizable(True)
        self.form_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.form_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.form_scroll.setWidget(form)
        scrollbar = self.form_scroll.verticalScrollBar().sizeHint().width()
        self.form_scroll.setMinimumWidth(form.sizeHint().width() + scrollbar + 4)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 4)
        outer.addWidget(self.form_scroll, 1)
        outer.addWidget(self._build_run_group())

        # The serving kernels' own knob values for the batch the form states, as last put in.
        self._serving_shown = self._serving_defaults()
        for changed in (self.serving.changed, self.decode.changed):
            changed.connect(self._on_serving_shape)
        self.head_dim.currentIndexChanged.connect(self._on_serving_shape)
        self._on_mask_changed()
        self.set_running(False)

    # ---- construction -------------------------------------------------------------------------
    def _spin(
        self, name: str, lo: int, hi: int, value: int, special: str | None = None
    ) -> QSpinBox:
        box = QSpinBox()
        box.setRange(lo, hi)
        box.setValue(value)
        box.setAccelerated(True)
        if special is not None:
            # The lowest value stands for "not set" (None in the config), shown as this text.
            box.setSpecialValueText(special)
        box.valueChanged.connect(self._on_edited)
        self._register(name, box)
        return box

    def _combo(self, name: str, items: list[tuple[str, Any]]) -> QComboBox:
        box = QComboBox()
        for text, data in items:
            box.addItem(text, data)
        box.currentIndexChanged.connect(self._on_edited)
        self._register(name, box)
        return box

    def _register(self, name: str, widget: QWidget) -> None:
        widget.setObjectName(name)
        self._fields[name] = widget

    def _build_problem_group(self) -> QGroupBox:
        group = QGroupBox("Problem")
        form = QFormLayout(group)
        self.batch = self._spin("batch", 1, 1_000_000, 1)
        self.heads = self._spin("heads", 1, 1_000_000, 8)
        self.kv_heads = self._spin("kv_heads", 0, 1_000_000, 0, special="same as heads")
        self.kv_heads.setToolTip("Key/value heads; fewer than heads is grouped-query attention")
        self.head_dim = self._combo("head_dim", [(str(d), d) for d in HEAD_DIMS])
        self.head_dim.setCurrentIndex(HEAD_DIMS.index(64))
        self._head_dim_shown = self.head_dim.currentData()
        self.head_dim.currentIndexChanged.connect(self._on_head_dim_changed)
        # 0 stands for "not set" (None in the problem), as kv_heads' 0 does.
        dims_v = [(SAME_AS_D, 0), *((str(d), d) for d in HEAD_DIMS)]
        self.head_dim_v = self._combo("head_dim_v", dims_v)
        self.head_dim_v.setToolTip(
            "Dv, the width of V and of the output; Q and K keep the head dim "
            "(MLA prefill: head dim 192, Dv 128)"
        )
        self.dtype = self._combo("dtype", [(d, d) for d in DTYPES])

        self.seq_lens = QLineEdit("256-4k")
        self.seq_lens.setToolTip("A list (128,256,512) or a power-of-two range (1k-16k); k = ×1024")
        self.seq_lens.textEdited.connect(self._on_edited)
        self._register("seq_lens", self.seq_lens)
        self.seq_preset = QComboBox()
        self.seq_preset.setObjectName("seq_preset")
        self.seq_preset.addItem("Range…", None)
        for text, value in SEQ_PRESETS:
            self.seq_preset.addItem(text, value)
        self.seq_preset.setToolTip("Fill in a power-of-two range")
        self.seq_preset.activated.connect(self._on_preset)
        seq_row = QHBoxLayout()
        seq_row.setContentsMargins(0, 0, 0, 0)
        seq_row.addWidget(self.seq_lens, 1)
        seq_row.addWidget(self.seq_preset)

        form.addRow("Batch", self.batch)
        form.addRow("Heads", self.heads)
        form.addRow("KV heads", self.kv_heads)
        form.addRow("Head dim", self.head_dim)
        form.addRow("Head dim V", self.head_dim_v)
        form.addRow("Dtype", self.dtype)
        form.addRow("Seq lengths", seq_row)
        # Decode: the lengths as key lengths at a fixed q_len, and the models' decode presets.
        self.decode = DecodeFields()
        self._register("axis", self.decode.axis)
        self._register("q_len", self.decode.q_len)
        self.decode.changed.connect(self._on_edited)
        self.decode.changed.connect(self._on_axis_changed)
        self.decode.presetChosen.connect(self._on_decode_preset)
        form.addRow("Lengths are", self.decode)
        self.serving = ServingFields()  # a ragged batch (workbench/gui/serving_fields.py)
        self.serving.changed.connect(self._on_edited)
        # Saved with the settings and put back by Load into form, as every other field.
        for name in ("lengths", "kv_cache", "page_size"):
            self._fields[name] = getattr(self.serving, name)
        form.addRow("Ragged batch", self.serving)
        return group

    def _build_run_group(self) -> QGroupBox:
        group = QGroupBox("Run")
        form = QFormLayout(group)
        # Ticks the saved settings ask for are applied once probing says they are usable.
        self.backends = BackendPicker(DEFAULT_BACKENDS)
        self.backends.changed.connect(self._on_edited)
        self.backends.changed.connect(self._offer_for_backends)
        self.backends.changed.connect(self._show_declared)
        self._register("backends", self.backends)
        self.label = QLineEdit()
        self.label.setMaxLength(MAX_LABEL_CHARS)
        self.label.setPlaceholderText("e.g. causal 128×64 fast-math")
        self.label.textEdited.connect(self._on_edited)
        self._register("label", self.label)

        self.run_button = QPushButton("Run")
        self.run_button.setObjectName("run_button")
        self.run_button.setDefault(True)
        self.run_button.clicked.connect(self.runRequested)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("cancel_button")
        self.cancel_button.setToolTip(
            "Stop now (the point in progress is dropped); the run is kept as cancelled with the "
            "points that finished"
        )
        self.cancel_button.clicked.connect(self.cancelRequested)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)

        self.error_label = QLabel()
        self.error_label.setObjectName("error_label")
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color: #b71c1c;")
        self.error_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        # Its room is kept while it is hidden: a message appearing under Run moved Run, Cancel
        # and Label up by its height and back down when it went.
        error_height = ERROR_LINES * self.error_label.fontMetrics().lineSpacing() + 4
        self.error_label.setFixedHeight(error_height)
        self.error_label.hide()
        error_room = QWidget()  # always shown, so the form keeps the label's room
        error_room.setObjectName("error_room")
        error_room.setFixedHeight(error_height)
        room_layout = QVBoxLayout(error_room)
        room_layout.setContentsMargins(0, 0, 0, 0)
        room_layout.addWidget(self.error_label)

        form.addRow("Backends", self.backends)
        form.addRow("Label", self.label)
        form.addRow(buttons)
        form.addRow(error_room)
        return group

    # ---- reading the form -----------------------------------------------------------------------
    def _mask_choice(self) -> tuple[str, bool]:
        value = self.mask.currentData()
        for _, mask_value, has_offset in MASK_CHOICES:
            if mask_value == value:
                return ("causal" if value == "causal-offset" else value), has_offset
        return "none", False

    def spec(self) -> SweepSpec:
        """The sweep the form describes. Raises the core's ConfigError naming the bad field."""
        seq_lens = parse_seq_lens(self.seq_lens.text())
        mask, has_offset = self._mask_choice()
        decode = self.decode.decode()
        # Along k_len the offset is k_len - q_len at every point (the queries are the last).
        input_pos = self.input_pos.value() if has_offset and not decode else 0
        q_len = self.decode.q_len.value() if decode else seq_lens[0]
        kv = self.kv_heads.value()
        problem = Problem(
            batch=self.batch.value(),
            heads=self.heads.value(),
            kv_heads=kv if kv > 0 else None,
            q_len=q_len,
            k_len=q_len if decode else seq_lens[0] + input_pos,
            head_dim=self.head_dim.currentData(),
            head_dim_v=self.head_dim_v.currentData() or None,
            dtype=self.dtype.currentData(),
            input_pos=input_pos,
        )
        problem = self.serving.apply(problem, decode)
        config = KernelConfig(
            mask=mask,
            window=self.window.value() if mask == "window" else None,
            **self._knob_values(),
        )
        return SweepSpec(
            problem=problem,
            seq_lens=seq_lens,
            config=config,
            backend=(self.backends.checked() or ["reference"])[0],
            label=self.label.text().strip(),
            axis=self.decode.axis_value(),
        )

    def job(self) -> Any:
        """What Run runs: the sweep for one ticked backend, a GroupJob for several (the core
        decides, :func:`workbench.jobs.job_for`). Raises the core's ConfigError."""
        from workbench.backends import check_offered
        from workbench.jobs import job_for  # the core's job module, only once Run is pressed

        spec = self.spec()
        # A greyed-out value can still reach the form (saved settings, Load settings): refuse it
        # as the CLI does.
        check_offered(spec.config, self.backends.checked(), self._arch)
        self.declared.check(spec.config.mask)
        job = job_for(spec, self.backends.checked())
        self.declared.carry()
        return job

    def refresh_declared(self) -> None:
        """After a plugin reloads: its rows from the new declaration, carried to the backends."""
        self._show_declared()
        self.declared.carry()

    def _show_declared(self) -> None:
        """Rows for the knobs the ticked backends declare (a plugin's), as form fields."""
        from workbench.backends.catalog import declarations

        found = declarations()
        if self.declared.show_declarations(
            [found[n] for n in self.backends.checked() if n in found]
        ):
            for name in [n for n in self._fields if n.startswith(DECLARED_FIELD)]:
                del self._fields[name]
            self._fields.update(self.declared.widgets)
            if self.declared.widgets:  # below the Kernel group: scroll the new rows into view
                QTimer.singleShot(0, self._scroll_to_declared)

    def _scroll_to_declared(self) -> None:
        # Down only: the form's sideways bar is hidden, so a sideways scroll (the 50 px margin
        # ensureWidgetVisible takes by default) would cut the labels' first letters off.
        self.form_scroll.ensureWidgetVisible(self.declared, 0, 50)
        self.form_scroll.horizontalScrollBar().setValue(0)

    def load_run(
        self,
        problem: Problem,
        config: KernelConfig,
        seq_lens: tuple[int, ...],
        backend: str,
        label: str,
        axis: str = SEQ_LEN_AXIS,
        plugin_knobs: Mapping[str, Any] | None = None,
    ) -> None:
        """Put a stored run's settings back into the form (to re-run or tweak it): its problem,
        ragged batch, mask, knobs and a plugin's own knob values (``plugin_knobs``)."""
        mask_value = config.mask
        if config.mask == "causal" and problem.input_pos and axis == SEQ_LEN_AXIS:
            mask_value = "causal-offset"
        self.apply_state(
            {
                "batch": problem.batch,
                "heads": problem.heads,
                "kv_heads": 0 if problem.kv_heads == problem.heads else problem.kv_heads,
                "head_dim": problem.head_dim,
                "head_dim_v": problem.head_dim_v or 0,
                "dtype": problem.dtype,
                "seq_lens": ",".join(str(n) for n in seq_lens),
                "axis": axis,
                "q_len": problem.q_len if axis != SEQ_LEN_AXIS else self.decode.q_len.value(),
                "mask": mask_value,
                "input_pos": problem.input_pos if axis == SEQ_LEN_AXIS else 0,
                "window": config.window or self.window.value(),
                **{knob.name: getattr(config, knob.name) for knob in knobs.EXPOSED},
                "lengths": ",".join(str(n) for n in problem.lengths or ()),
                "kv_cache": problem.kv_cache,
                "page_size": problem.page_size or self.serving.page_size.currentData(),
                **{f"{DECLARED_FIELD}{n}": v for n, v in (plugin_knobs or {}).items()},
                "backends": [backend],
                "label": label,
            }
        )

    def add_below_form(self, widget: QWidget) -> None:
        """Show ``widget`` under the form's groups, above Run (what the config compiles to)."""
        layout = self.layout()
        assert isinstance(layout, QVBoxLayout)
        layout.insertWidget(1, widget)

    # ---- state ----------------------------------------------------------------------------------
    def _on_mask_changed(self) -> None:
        mask, has_offset = self._mask_choice()
        # A decode sweep's offset is k_len - q_len at each point, not the form's.
        self.input_pos.setEnabled(has_offset and not self.decode.decode())
        self.window.setEnabled(mask == "window")
        self._refresh()

    def _on_axis_changed(self) -> None:
        if not self._quiet:
            self._on_mask_changed()

    def _on_head_dim_changed(self) -> None:
        """On the decode kernel, a knob a preset sets by head dim (the key block) follows a
        change of head dim while it still holds the preset's value for the old one, as the
        CLI takes the final head dim's; a value the user chose stays."""
        old, new = self._head_dim_shown, self.head_dim.currentData()
        self._head_dim_shown = new
        state = self.state()
        if self._quiet or old == new or not self.decode.decode():
            return
        if not schedule.decode_form(state):
            return
        before, after = head_dim_knobs(old), head_dim_knobs(new)
        follow = {k: v for k, v in after.items() if k in before and state.get(k) == before[k]}
        if follow:
            self.apply_state(follow)

    def _serving_defaults(self) -> dict[str, Any]:
        """The serving kernels' knob values for the form's ragged batch ({} for none, or
        lengths that do not read yet)."""
        try:
            template = Problem(head_dim=self.head_dim.currentData())
            problem = self.serving.apply(template, self.decode.decode())
        except ConfigError:
            return {}
        return kernel_defaults(problem) if problem.lengths else {}

    def _on_serving_shape(self) -> None:
        """A new batch shape (ragged or not, paged or varlen, page size, head dim) puts the
        serving kernels' own values (:func:`~workbench.backends.cutile_serving.kernel_defaults`)
        in each knob that still holds the last shape's, as the CLI takes them for the knobs not
        typed; a value the user chose stays. Setting the form (Load into form) moves none."""
        old, new = self._serving_shown, self._serving_defaults()
        self._serving_shown = new
        if self._quiet or old == new:
            return
        state, registry = self.state(), knobs.defaults()
        follow = {k: v for k, v in new.items() if state.get(k) == old.get(k, registry[k])}
        # A knob the last shape set and this one does not: back to the registry's value.
        follow |= {k: registry[k] for k in old if k not in new and state.get(k) == old[k]}
        if follow:
            self.apply_state(follow)

    def _on_decode_preset(self, fields: dict[str, Any]) -> None:
        """A decode preset's problem, lengths, mask and kernel settings into the form (the user
        can change any of them after)."""
        self.apply_state(fields)
        self._on_edited()

    def _on_preset(self, index: int) -> None:
        value = self.seq_preset.itemData(index)
        if value:
            self.seq_lens.setText(value)
            self._on_edited()
        # Back to the placeholder, so picking the same preset again still fires.
        self.seq_preset.setCurrentIndex(0)

    def set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running and self._can_run)
        self.cancel_button.setEnabled(running)

    def set_can_run(self, can_run: bool, reason: str = "") -> None:
        """Disable Run for a reason that is not a bad value (e.g. a read-only database)."""
        self._can_run = can_run
        self.run_button.setToolTip("" if can_run else reason)
        self.run_button.setEnabled(can_run and not self.cancel_button.isEnabled())

    def state(self) -> dict[str, Any]:
        """Every field's raw value, JSON-friendly, for QSettings."""
        values = {name: widget_value(widget) for name, widget in self._fields.items()}
        return {name: value for name, value in values.items() if has_value(value)}

    def apply_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state` output; unknown keys and stale values are ignored, not fatal."""
        if "backend" in state and "backends" not in state:
            state = {**state, "backends": [state["backend"]]}  # settings of one backend
        self._quiet = True  # one refresh once every field is set, not one per field
        for name in state:
            self._kept.pop(name, None)  # the value given replaces what a greyed row kept
        self.declared.want(
            {
                n.removeprefix(DECLARED_FIELD): v
                for n, v in state.items()
                if n.startswith(DECLARED_FIELD)
            }
        )
        for name, value in state.items():
            widget = self._fields.get(name)
            try:
                set_widget_value(widget, value)
            except (TypeError, ValueError):
                continue  # a settings file from another version; keep the default
        self._quiet = False
        self._on_mask_changed()
