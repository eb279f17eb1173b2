"""The sweep form: problem shape, kernel knobs, backends (several: a group), label, Run, Cancel.

The form only collects values. Validation is the core's: :meth:`ControlsPanel.spec` builds the
core's frozen dataclasses and lets their :class:`~workbench.config.ConfigError` propagate, and the
window hands the error back through :meth:`ControlsPanel.mark_error`, which marks the field the
error names. Spin-box ranges are therefore deliberately loose: a rule written twice drifts apart,
and the core's message says what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
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

from workbench.config import (
    CLUSTER_CTAS,
    DTYPES,
    HEAD_DIMS,
    K_UNROLLS,
    MAX_SEQ_LEN,
    TILE_SIZES,
    WORKER_WARPS,
    KernelConfig,
    Problem,
    SweepSpec,
    parse_seq_lens,
    poly_exp2_choices,
)
from workbench.gui.backend_picker import BackendPicker

# (shown text, mask value, whether the causal offset applies)
MASK_CHOICES: tuple[tuple[str, str, bool], ...] = (
    ("None (dense)", "none", False),
    ("Causal", "causal", False),
    ("Causal with offset (input_pos)", "causal-offset", True),
    ("Sliding window", "window", True),
)

# Power-of-two ranges in the syntax parse_seq_lens accepts, so the line edit stays the one source.
SEQ_PRESETS: tuple[tuple[str, str], ...] = (
    ("64 … 1k", "64-1k"),
    ("256 … 4k", "256-4k"),
    ("1k … 16k", "1k-16k"),
    ("4k … 32k", "4k-32k"),
    ("1k … 64k", "1k-64k"),
)

DEFAULT_BACKENDS = ("reference",)

# Fields the core may name that the form shows elsewhere: a length error is a seq-length error.
_FIELD_ALIASES = {"q_len": "seq_lens", "k_len": "seq_lens", "backend": "backends"}

# The red frame an invalid field gets; a dynamic property keeps the style in one place.
_INVALID_STYLE = '*[invalid="true"] { border: 1px solid #d62728; background: #fdecea; }'


class ControlsPanel(QWidget):
    """Problem and kernel controls. Emits ``runRequested`` / ``cancelRequested``; holds no logic."""

    runRequested = Signal()
    cancelRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setStyleSheet(_INVALID_STYLE)
        self._fields: dict[str, QWidget] = {}
        self._tooltips: dict[str, str] = {}
        self._can_run = True  # False while e.g. the database is read-only

        # The problem and kernel groups scroll; Run and Cancel stay below them, always in view
        # (at 1024×700 they were below the fold of one long scrolling form).
        form = QWidget()
        form.setObjectName("form_groups")
        groups = QVBoxLayout(form)
        groups.setContentsMargins(0, 0, 0, 0)
        groups.addWidget(self._build_problem_group())
        groups.addWidget(self._build_kernel_group())
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

    def _check(self, name: str, text: str, tip: str) -> QCheckBox:
        box = QCheckBox(text)
        box.setToolTip(tip)
        box.toggled.connect(self._on_edited)
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
        form.addRow("Dtype", self.dtype)
        form.addRow("Seq lengths", seq_row)
        return group

    def _build_kernel_group(self) -> QGroupBox:
        group = QGroupBox("Kernel")
        form = QFormLayout(group)
        tiles = [(str(t), t) for t in TILE_SIZES]
        self.tile_m = self._combo("tile_m", tiles)
        self.tile_n = self._combo("tile_n", tiles)
        self.tile_m.setCurrentIndex(TILE_SIZES.index(64))
        self.tile_n.setCurrentIndex(TILE_SIZES.index(64))
        tile_row = QHBoxLayout()
        tile_row.setContentsMargins(0, 0, 0, 0)
        tile_row.addWidget(self.tile_m, 1)
        tile_row.addWidget(QLabel("×"))
        tile_row.addWidget(self.tile_n, 1)

        self.mask = self._combo("mask", [(text, value) for text, value, _ in MASK_CHOICES])
        self.mask.currentIndexChanged.connect(self._on_mask_changed)
        self.input_pos = self._spin("input_pos", 0, MAX_SEQ_LEN, 0)
        self.input_pos.setToolTip("Causal offset: queries are the last tokens of a longer sequence")
        self.window = self._spin("window", 1, MAX_SEQ_LEN, 256)
        self.window.setToolTip("Each query sees this many most recent keys")

        self.fast_math = self._check("fast_math", "Fast math", "Approximate exp2 and division")
        self.k_split = self._check(
            "k_split", "K-loop split", "Separate unmasked and masked k-loops"
        )
        self.remap = self._check("remap", "Remap program ids", "Launch the heaviest q-blocks first")
        self.autotune = self._check(
            "autotune", "Autotune", "Let the backend search tile sizes and occupancy"
        )
        self.persistent = self._check(
            "persistent",
            "Persistent grid",
            "cuTile, mask none or causal (greyed out with a window): one program per SM slot "
            "looping over the tiles; causal problems that are not whole square tiles run one "
            "CTA per tile. The causal grid runs one key loop and deals its tiles out by work, "
            "so K-loop split and remap do not change it",
        )
        flags = QWidget()
        flag_grid = QVBoxLayout(flags)
        flag_grid.setContentsMargins(0, 0, 0, 0)
        for box in (self.fast_math, self.k_split, self.remap, self.autotune, self.persistent):
            flag_grid.addWidget(box)
        self.persistent.toggled.connect(self._on_persistent_changed)
        self.k_unroll = self._combo(
            "k_unroll", [(str(n) if n == 1 else f"{n} (pairs)", n) for n in K_UNROLLS]
        )
        self.k_unroll.setToolTip(
            "Persistent grid without a mask only (greyed out otherwise): key blocks per "
            "iteration of its key loop; 2 gives K and V two shared-memory buffers each (the "
            "kernel takes 1 where k_len is not an even number of whole key blocks or the "
            "K-loop split is off)"
        )

        self.occupancy = self._spin("occupancy", 0, 1_000, 0, special="auto")
        self.occupancy.setToolTip("Programs per SM the compiler targets (auto: its choice)")
        self.num_worker_warps = self._combo(
            "num_worker_warps", [("auto", None)] + [(str(w), w) for w in WORKER_WARPS]
        )
        # Every size the core accepts, so a stored run's value (the CLI takes them all) can
        # always be shown and re-run as it was.
        self.num_ctas = self._combo(
            "num_ctas", [("auto", None)] + [(str(c), c) for c in CLUSTER_CTAS]
        )
        self.num_ctas.setToolTip(
            "CTAs per cluster (num_ctas hint; auto: the compiler's choice). Tile M 128 with 2 "
            "and occupancy 2 is the H200's 2-CTA cluster config: two 64-row CTAs per cluster "
            "share each K/V tile through TMA multicast"
        )
        # Likewise every column count the core accepts for some tile N (the tile N picked
        # decides which are valid; the core names the refusal).
        poly_cols = sorted({c for t in TILE_SIZES for c in poly_exp2_choices(t)} - {0})
        self.poly_exp2_cols = self._combo(
            "poly_exp2_cols", [("off", 0)] + [(str(c), c) for c in poly_cols]
        )
        self.poly_exp2_cols.setToolTip(
            "Score columns per key block whose exp2 runs as an FMA polynomial instead of on "
            "the MUFU unit (tile N/2, /4, /8 or /16; needs the K-loop split)"
        )

        form.addRow("Tile M × N", tile_row)
        form.addRow("Mask", self.mask)
        form.addRow("Offset", self.input_pos)
        form.addRow("Window", self.window)
        form.addRow("Options", flags)
        form.addRow("Occupancy", self.occupancy)
        form.addRow("Worker warps", self.num_worker_warps)
        form.addRow("Cluster CTAs", self.num_ctas)
        form.addRow("Poly exp2 cols", self.poly_exp2_cols)
        form.addRow("Key blocks / iter", self.k_unroll)
        return group

    def _build_run_group(self) -> QGroupBox:
        group = QGroupBox("Run")
        form = QFormLayout(group)
        # Ticks the saved settings ask for are applied once probing says they are usable.
        self.backends = BackendPicker(DEFAULT_BACKENDS)
        self.backends.changed.connect(self._on_edited)
        self.backends.changed.connect(self._offer_for_backends)
        self._register("backends", self.backends)
        self.label = QLineEdit()
        self.label.setPlaceholderText("e.g. causal 128×64 remap")
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
        self.error_label.hide()

        form.addRow("Backends", self.backends)
        form.addRow("Label", self.label)
        form.addRow(buttons)
        form.addRow(self.error_label)
        return group

    # ---- backends -------------------------------------------------------------------------------
    def set_backend_names(self, names: tuple[str, ...] | list[str]) -> None:
        """Fill the picker; every entry but 'reference' stays disabled until statuses arrive."""
        self.backends.set_names(names)

    def set_backend_statuses(self, statuses: Mapping[str, Any]) -> None:
        """Enable available backends; a disabled entry's tooltip says why it is unavailable."""
        self.backends.set_statuses(statuses)

    def backend_enabled(self, name: str) -> bool:
        return self.backends.is_enabled(name)

    def _offer_for_backends(self) -> None:
        """Grey out the values a ticked backend cannot run (cuTile's tiles and head dims), with
        the reason as tooltip, so the form offers only what every ticked backend runs."""
        from workbench.backends import offered_values

        ticked = self.backends.checked()
        for field_name in ("tile_m", "tile_n", "head_dim"):
            box: QComboBox = getattr(self, field_name)
            model = box.model()
            for row in range(box.count()):
                value = box.itemData(row)
                refusing = [
                    name
                    for name in ticked
                    if field_name in offered_values(name)
                    and value not in offered_values(name)[field_name]
                ]
                item = model.item(row)  # type: ignore[attr-defined]
                item.setEnabled(not refusing)
                allowed = (
                    ", ".join(str(v) for v in offered_values(refusing[0])[field_name])
                    if refusing
                    else ""
                )
                item.setToolTip(f"{refusing[0]} takes {allowed}" if refusing else "")

    def offered(self, field_name: str) -> list[Any]:
        """The values of a combo field the form offers now (its enabled entries)."""
        box: QComboBox = getattr(self, field_name)
        model = box.model()
        return [
            box.itemData(row)
            for row in range(box.count())
            if model.item(row).isEnabled()  # type: ignore[attr-defined]
        ]

    def backend_tooltip(self, name: str) -> str:
        return self.backends.tooltip(name)

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
        input_pos = self.input_pos.value() if has_offset else 0
        kv = self.kv_heads.value()
        problem = Problem(
            batch=self.batch.value(),
            heads=self.heads.value(),
            kv_heads=kv if kv > 0 else None,
            q_len=seq_lens[0],
            k_len=seq_lens[0] + input_pos,
            head_dim=self.head_dim.currentData(),
            dtype=self.dtype.currentData(),
            input_pos=input_pos,
        )
        occupancy = self.occupancy.value()
        persistent = self.persistent.isChecked() and mask != "window"
        config = KernelConfig(
            tile_m=self.tile_m.currentData(),
            tile_n=self.tile_n.currentData(),
            fast_math=self.fast_math.isChecked(),
            k_split=self.k_split.isChecked(),
            remap=self.remap.isChecked(),
            mask=mask,
            window=self.window.value() if mask == "window" else None,
            autotune=self.autotune.isChecked(),
            occupancy=occupancy if occupancy > 0 else None,
            num_worker_warps=self.num_worker_warps.currentData(),
            poly_exp2_cols=self.poly_exp2_cols.currentData(),
            num_ctas=self.num_ctas.currentData(),
            persistent=persistent,
            k_unroll=self.k_unroll.currentData() if persistent and mask == "none" else 1,
        )
        return SweepSpec(
            problem=problem,
            seq_lens=seq_lens,
            config=config,
            backend=(self.backends.checked() or ["reference"])[0],
            label=self.label.text().strip(),
        )

    def job(self) -> Any:
        """What Run runs: the sweep for one ticked backend, a GroupJob for several (the core
        decides, :func:`workbench.jobs.job_for`). Raises the core's ConfigError."""
        from workbench.jobs import job_for  # the core's job module, only once Run is pressed

        return job_for(self.spec(), self.backends.checked())

    def load_run(
        self,
        problem: Problem,
        config: KernelConfig,
        seq_lens: tuple[int, ...],
        backend: str,
        label: str,
    ) -> None:
        """Put a stored run's settings back into the form (to re-run or tweak it)."""
        mask_value = config.mask
        if config.mask == "causal" and problem.input_pos:
            mask_value = "causal-offset"
        self.apply_state(
            {
                "batch": problem.batch,
                "heads": problem.heads,
                "kv_heads": 0 if problem.kv_heads == problem.heads else problem.kv_heads,
                "head_dim": problem.head_dim,
                "dtype": problem.dtype,
                "seq_lens": ",".join(str(n) for n in seq_lens),
                "tile_m": config.tile_m,
                "tile_n": config.tile_n,
                "mask": mask_value,
                "input_pos": problem.input_pos,
                "window": config.window or self.window.value(),
                "fast_math": config.fast_math,
                "k_split": config.k_split,
                "remap": config.remap,
                "autotune": config.autotune,
                "occupancy": config.occupancy or 0,
                "num_worker_warps": config.num_worker_warps,
                "poly_exp2_cols": config.poly_exp2_cols,
                "num_ctas": config.num_ctas,
                "persistent": config.persistent,
                "k_unroll": config.k_unroll,
                "backends": [backend],
                "label": label,
            }
        )

    # ---- errors ---------------------------------------------------------------------------------
    # Fields the core may name that the form shows elsewhere: a length error is a seq-length error.
    def field_widget(self, name: str) -> QWidget | None:
        return self._fields.get(_FIELD_ALIASES.get(name, name))

    def mark_error(self, field_name: str, message: str) -> None:
        """Frame the named field in red, put the message in its tooltip and under the form."""
        self.clear_errors()
        widget = self.field_widget(field_name)
        if widget is not None:
            self._tooltips[widget.objectName()] = widget.toolTip()
            widget.setProperty("invalid", True)
            widget.setToolTip(message)
            widget.style().unpolish(widget)
            widget.style().polish(widget)
            widget.setFocus(Qt.FocusReason.OtherFocusReason)
        self.error_label.setText(message)
        self.error_label.show()

    def clear_errors(self) -> None:
        for name, widget in self._fields.items():
            if widget.property("invalid"):
                widget.setProperty("invalid", False)
                widget.setToolTip(self._tooltips.pop(name, ""))
                widget.style().unpolish(widget)
                widget.style().polish(widget)
        self.error_label.clear()
        self.error_label.hide()

    def invalid_fields(self) -> list[str]:
        return [name for name, w in self._fields.items() if w.property("invalid")]

    def _on_edited(self) -> None:
        # Editing the marked field is the user acting on the message: drop the mark.
        if self.invalid_fields():
            self.clear_errors()

    # ---- state ----------------------------------------------------------------------------------
    def _on_mask_changed(self) -> None:
        mask, has_offset = self._mask_choice()
        self.input_pos.setEnabled(has_offset)
        self.window.setEnabled(mask == "window")
        # Like the window size: kept as ticked, but only in effect (and editable) where the
        # persistent grid runs: without a mask or causal.
        self.persistent.setEnabled(mask != "window")
        self._on_persistent_changed()

    def _on_persistent_changed(self) -> None:
        # Key blocks in pairs only mean something on the mask-free persistent grid: kept,
        # greyed out.
        mask, _ = self._mask_choice()
        self.k_unroll.setEnabled(
            mask == "none" and self.persistent.isEnabled() and self.persistent.isChecked()
        )

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
        out: dict[str, Any] = {}
        for name, widget in self._fields.items():
            if isinstance(widget, QSpinBox):
                out[name] = widget.value()
            elif isinstance(widget, QComboBox):
                out[name] = widget.currentData()
            elif isinstance(widget, QCheckBox):
                out[name] = widget.isChecked()
            elif isinstance(widget, QLineEdit):
                out[name] = widget.text()
            elif isinstance(widget, BackendPicker):
                out[name] = widget.checked()
        return out

    def apply_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state` output; unknown keys and stale values are ignored, not fatal."""
        if "backend" in state and "backends" not in state:
            state = {**state, "backends": [state["backend"]]}  # settings of one backend
        for name, value in state.items():
            widget = self._fields.get(name)
            try:
                if isinstance(widget, QSpinBox):
                    widget.setValue(int(value))
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
            except (TypeError, ValueError):
                continue  # a settings file from another version; keep the default
        self._on_mask_changed()
