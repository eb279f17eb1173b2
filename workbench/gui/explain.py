"""What the window adds so that a number explains itself, beside the main window.

- under the form, what its cuTile config compiles to (:class:`CompiledBadge`), asked again as
  the form changes;
- the Roofline tab (:class:`RooflineView`) for the selected runs;
- ``Profile`` beside the Block map's length (:class:`ProfilePointButton`): Nsight Compute on
  the point the map shows, its metrics stored with the point (the GUI thread owns the store);
- for Plots and Compare: each run's GPU's ceilings, each point's % of roofline and what a cuTile
  point compiled to (:meth:`Explainers.series`).

The numbers are the core's (:mod:`workbench.analysis.compare`, :mod:`workbench.analysis.resources`,
:mod:`workbench.reports.ncu`); this object only wires them to the widgets.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QLabel

from workbench.analysis.bandwidth import point_bandwidth
from workbench.analysis.compare import compiled_of, point_pct, roofline_points, run_ceilings
from workbench.analysis.resources import CompiledResources
from workbench.analysis.roofline import no_ceiling_reason
from workbench.analysis.streaming import plain_read_ms
from workbench.analysis.tuned import tuned_labels
from workbench.backends.base import decode_form
from workbench.config import AXIS_LABELS, K_LEN_AXIS, MASK_ONLY, ConfigError, knob_use
from workbench.gui.compiled_badge import CompiledBadge
from workbench.gui.plots import Series
from workbench.gui.profile_action import ProfilePointButton
from workbench.gui.roofline_view import RooflineView
from workbench.store import StoreError

DECODE_ON_TILE_FORM = (
    "Decode on these knobs is cuTile's prefill tile form (0.12× cuDNN at B=1 k_len 32k on the "
    "H200): tick Pack GQA heads, set KV splits to auto and Tile N to 128 (256 at D 64), or "
    "pick a Decode preset."
)


class Explainers(QObject):
    """The compiled line, the Roofline tab and the Profile button of one window."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self.window = window
        self.compiled = CompiledBadge()
        window.controls.add_below_form(self.compiled)
        # A decode form left on the knobs' defaults runs cuTile's prefill tile form: say so.
        self.decode_hint = QLabel(DECODE_ON_TILE_FORM)
        self.decode_hint.setObjectName("decode_form_hint")
        self.decode_hint.setWordWrap(True)
        self.decode_hint.setStyleSheet("color: #8a5300")
        self.decode_hint.hide()
        window.controls.add_below_form(self.decode_hint)
        window.controls.edited.connect(self.show_compiled)
        self.roofline = RooflineView()
        window.tabs.addTab(self.roofline, "Roofline")
        self.profile_button = ProfilePointButton()
        self.profile_button.profiled.connect(self._on_profiled)
        window.heatmap.top_bar.addWidget(self.profile_button)
        window.heatmap.seq_len.currentIndexChanged.connect(self.update_profile_point)

    # ---- the selection --------------------------------------------------------------------------
    def ceilings(self, runs: list[Any]) -> dict[int, Any]:
        """Each run's GPU's newest measured ceilings (None: none, or a CPU run)."""
        store = self.window.store
        return run_ceilings(store, runs) if store is not None else {}

    @staticmethod
    def series(run: Any, name: str, points: list[Any], ceilings: Any) -> Series:
        """What Plots shows of a run: its points, the tuner's launches, each point's % of the
        roofline (or why there is none) and what a cuTile point compiled to."""
        pct = {p.seq_len: point_pct(run, p, ceilings) for p in points}
        compiled = {p.seq_len: compiled_of(p) for p in points}
        return Series(
            run.id,
            name,
            points,
            tuned_labels(run.config.tuned, points),
            pct_of_roofline={n: v for n, v in pct.items() if v is not None},
            no_roofline=""
            if ceilings is not None
            else no_ceiling_reason(str(run.machine.get("gpu_name") or ""), run.backend),
            compiled={
                n: CompiledResources.from_dict(found).short()
                for n, found in compiled.items()
                if found
            },
            axis=run.axis,
            ragged=run.problem.lengths is not None,
            kv_gbs={
                p.seq_len: gbs
                for p in points
                if (gbs := point_bandwidth(run, p)["kv_gbs"]) is not None
            },
            read_ms=plain_read_ms(run, points),
        )

    def show_selection(self, runs: list[Any]) -> None:
        """The Roofline tab and the Profile button follow the selection."""
        store = self.window.store
        self.roofline.set_data(
            roofline_points(store, [r.id for r in runs]) if runs and store is not None else None
        )
        self.update_profile_point()

    # ---- the form's compiled line ---------------------------------------------------------------
    @Slot()
    def show_compiled(self) -> None:
        """Ask for what the form's config compiles to (nothing while the form is invalid)."""
        try:
            spec = self.window.controls.spec()
        except (ConfigError, ValueError):
            self.compiled.show_config(None, None)
            self.decode_hint.hide()
            return
        # Our kernel's knobs mean something to a ticked backend (the kernel, or the reference
        # that walks its schedule); peers and plugins tile on their own.
        ticked = self.window.controls.backends.checked()
        ours = any(knob_use(name) != MASK_ONLY for name in ticked)
        self.compiled.show_config(spec.problem, spec.config, ours)
        self.decode_hint.setVisible(spec.axis == K_LEN_AXIS and not decode_form(spec.config))

    # ---- Nsight Compute on the Block map's point ------------------------------------------------
    @Slot()
    def update_profile_point(self) -> None:
        heatmap, store = self.window.heatmap, self.window.store
        run, n = heatmap.run, heatmap.current_seq_len()
        point = None
        if run is not None and n is not None and store is not None:
            point = next((p for p in store.points(run.id) if p.seq_len == n), None)
        self.profile_button.set_point(run, point, store.path if store is not None else None)

    @Slot(int, int, object, str)
    def _on_profiled(self, run_id: int, seq_len: int, metrics: Any, refusal: str) -> None:
        run = self.window.store.run(run_id) if self.window.store is not None else None
        where = f"run #{run_id} at {AXIS_LABELS[run.axis] if run else 'N'}={seq_len}"
        if metrics is None:
            self.window.warn("Cannot profile", f"Nsight Compute on {where}: {refusal}")
            return
        store = self.window.store
        if store is None:
            return
        try:
            store.set_point_extra(run_id, seq_len, "ncu", metrics)
        except StoreError as exc:
            self.window.error("Cannot store the profile", str(exc))
            return
        self.window.show_status(f"Profiled {where} with Nsight Compute: {metrics['report']}")
        self.window.refresh_run_views(run_id)

    def shutdown(self) -> None:
        self.compiled.shutdown()  # ends a compile in progress (its child process)
        self.profile_button.shutdown()
