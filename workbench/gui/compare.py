"""Side-by-side latency of two or more runs, as Δ% and speed-up × against a pinned baseline.

The table gives each run's latency, its Δ % (latency change; negative is faster) and its
speed-up × (baseline latency / its latency, marked "~" within the noise), the same numbers and
text as the CLI's ``compare``; the chart below draws the speed-ups per N with their noise bands.
The numbers, the noise rule and the warnings are the core's (:mod:`workbench.analysis.compare`); a
difference is coloured only when the core calls it significant, so the eye goes to real changes.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any, cast

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.analysis.bandwidth import point_bandwidth, read_line, read_line_text
from workbench.analysis.compare import (
    Cell,
    compare_table,
    compiled_of,
    default_baseline,
    format_delta,
    format_speedup,
    machine_differences,
    noise_rule,
    point_pct,
    problem_differences,
    run_name,
)
from workbench.analysis.ncu_source import cell_tooltip
from workbench.analysis.resources import CompiledResources
from workbench.analysis.roofline import Ceilings, no_ceiling_reason
from workbench.analysis.streaming import COLD_KV_BYTES, fit_run, wants_a_fit
from workbench.analysis.streaming import summary as streaming_summary
from workbench.config import AXIS_LABELS
from workbench.gui.colors import run_color
from workbench.gui.compare_chart import CompareChart
from workbench.reports.ncu import compare_rows

COMPARE_TABLE_SHARE = 0.6  # at most this much of the height to the table, the rest the chart's
FASTER = QColor("#c8e6c9")  # green: lower latency than the baseline
SLOWER = QColor("#ffcdd2")  # red: higher latency


class ComparePanel(QWidget):
    """Baseline picker, the Δ% / speed-up table, the speed-up chart, and a warning when runs
    come from different machines."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._runs: list[Any] = []  # RunRecord, in selection order
        self._points: dict[int, list[Any]] = {}
        self._pinned: int | None = None
        self._ceilings: dict[int, Ceilings | None] = {}
        self._user_pinned = False  # an implicit default follows the selection; a pin stays
        self.rows: list[tuple[int, dict[int, Cell]]] = []

        self.baseline = QComboBox()
        self.baseline.setObjectName("compare_baseline")
        self.baseline.setToolTip("The run the others are compared against; it stays pinned")
        self.baseline.activated.connect(self._on_baseline_picked)
        self.hint = QLabel()
        self.hint.setObjectName("compare_hint")
        self.hint.setWordWrap(True)
        top = QHBoxLayout()
        top.addWidget(QLabel("Baseline"))
        top.addWidget(self.baseline, 1)

        # Above the table, where a ratio between different problems would be misread.
        self.banner = QLabel()
        self.banner.setObjectName("compare_banner")
        self.banner.setWordWrap(True)
        self.banner.setStyleSheet(
            "background: #fff3cd; color: #5c4400; border: 1px solid #e0c060; padding: 4px;"
        )
        self.banner.hide()

        self.table = QTableWidget()
        self.table.setObjectName("compare_table")
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)

        self.chart = CompareChart()
        # Decode runs: each run's latencies split into a fixed cost and a streaming rate.
        self.streaming = QLabel()
        self.streaming.setObjectName("compare_streaming")
        self.streaming.setWordWrap(True)
        self.streaming.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.streaming.hide()
        # Nsight Compute's headline metrics of the selected runs side by side (`profile`).
        self.ncu_title = QLabel()
        self.ncu_title.setObjectName("compare_ncu_title")
        self.ncu_table = QTableWidget()
        self.ncu_table.setObjectName("compare_ncu_table")
        self.ncu_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.ncu_table.verticalHeader().hide()
        self.ncu_table.horizontalHeader().setSectionResizeMode(
            QHeaderView.ResizeMode.ResizeToContents
        )
        # One line a metric: the headlines and top stalls fit beside the chart on a laptop.
        self.ncu_table.verticalHeader().setDefaultSectionSize(
            self.ncu_table.fontMetrics().height() + 6
        )
        self.ncu_title.setWordWrap(True)
        ncu_box = QWidget()
        ncu_layout = QVBoxLayout(ncu_box)
        ncu_layout.setContentsMargins(0, 0, 0, 0)
        ncu_layout.addWidget(self.ncu_title)
        ncu_layout.addWidget(self.ncu_table, 1)
        self.ncu_box = ncu_box
        # Beside the chart, not under it: under it the profiles squeezed a 1366x768 window's
        # chart to a strip.
        lower = QWidget()
        lower_layout = QHBoxLayout(lower)
        lower_layout.setContentsMargins(0, 0, 0, 0)
        lower_layout.addWidget(self.chart, 5)
        # A little wider than the chart: two runs' columns with their stalls' instructions.
        lower_layout.addWidget(ncu_box, 6)  # only while a selected run was profiled
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.setObjectName("compare_split")
        self.split.addWidget(self.table)
        self.split.addWidget(lower)
        self.split.setStretchFactor(0, 1)
        self.split.setStretchFactor(1, 1)
        self.split.splitterMoved.connect(self.keep_split)
        self._user_sized = False  # the user dragged (or a session restored) the splitter

        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.banner)
        layout.addWidget(self.split, 1)
        layout.addWidget(self.streaming)
        layout.addWidget(self.hint)
        self.set_runs([], {})

    # ---- input ----------------------------------------------------------------------------------
    def set_runs(
        self,
        runs: Sequence[Any],
        points: dict[int, list[Any]],
        ceilings: dict[int, Ceilings | None] | None = None,
    ) -> None:
        """The selected runs and their points (and each run's GPU's ceilings, for the % of
        roofline columns); the pinned baseline survives if still selected."""
        self._gbs: dict[int, dict[int, float | None]] = {}
        self._runs = list(runs)
        self._ceilings = dict(ceilings or {})
        self._points = {r.id: list(points.get(r.id, [])) for r in self._runs}
        ids = [r.id for r in self._runs]
        if not self._user_pinned or self._pinned not in ids:
            self._user_pinned = False
            self._pinned = default_baseline(ids)
        self.baseline.blockSignals(True)
        self.baseline.clear()
        for run in self._runs:
            self.baseline.addItem(run_name(run), run.id)
            self.baseline.setItemData(
                self.baseline.count() - 1, run_color(run.id), Qt.ItemDataRole.DecorationRole
            )
        if self._pinned is not None:
            self.baseline.setCurrentIndex(self.baseline.findData(self._pinned))
        self.baseline.blockSignals(False)
        self.baseline.setEnabled(len(self._runs) >= 2)
        self._rebuild()

    def pin_baseline(self, run_id: int) -> None:
        """Make ``run_id`` the baseline while it stays selected."""
        if run_id in self._points:
            self._pinned = run_id
            self._user_pinned = True
            self.baseline.setCurrentIndex(self.baseline.findData(run_id))
            self._rebuild()

    @property
    def baseline_id(self) -> int | None:
        return self._pinned

    def _on_baseline_picked(self, index: int) -> None:
        run_id = self.baseline.itemData(index)
        if run_id is not None:
            self.pin_baseline(int(run_id))

    # ---- table ----------------------------------------------------------------------------------
    def _rebuild(self) -> None:
        self.table.clear()
        ordered = sorted(self._runs, key=lambda run: run.id)
        differences = problem_differences(ordered) if len(ordered) >= 2 else []
        self.banner.setText(
            "Careful: these runs solve different problems, so their latencies do not compare "
            "like for like. " + "; ".join(differences) + "."
            if differences
            else ""
        )
        self.banner.setVisible(bool(differences))
        if len(self._runs) < 2 or self._pinned is None:
            self.rows = []
            self.table.setRowCount(0)
            self.table.setColumnCount(0)
            self.chart.set_rows([], [], {})
            self.ncu_box.hide()
            self.streaming.hide()
            self.hint.setText(
                "Select two or more runs in History to compare them (or a run of a group, "
                "then Compare group)."
            )
            return
        # The others in run order (a group's backends as it ran them), not History's newest first.
        others = sorted((r for r in self._runs if r.id != self._pinned), key=lambda r: r.id)
        base = next(r for r in self._runs if r.id == self._pinned)
        self.rows = compare_table(self._pinned, self._points)
        # Decode runs are read by memory: each latency cell gives its GB/s of K+V beside it.
        decode = all(getattr(r, "axis", "seq_len") == "k_len" for r in self._runs)
        self._gbs = (
            {r.id: self._kv_gbs(r) for r in self._runs} if decode else {}
        )  # run id -> length -> GB/s
        unit = "ms · GB/s" if decode else "ms"
        headers = ["k_len" if decode else "N", f"{run_name(base)} (baseline) {unit}"]
        for run in others:
            headers += [f"{run_name(run)} {unit}", "Δ %", "speed-up ×"]
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)
        self.table.setRowCount(len(self.rows))
        for r, (n, cells) in enumerate(self.rows):
            self.table.setItem(r, 0, self._item(f"{n:,}", align_right=True))
            self.table.setItem(r, 1, self._latency_item(cells.get(base.id), base.id, n))
            for i, run in enumerate(others):
                cell = cells.get(run.id)
                self.table.setItem(r, 2 + 3 * i, self._latency_item(cell, run.id, n))
                self.table.setItem(r, 3 + 3 * i, self._delta_item(cell))
                self.table.setItem(r, 4 + 3 * i, self._speedup_item(cell))
        # Colour-code column headers with their run's colour, so the table matches the plots.
        for col, run in [(1, base)] + [(2 + 3 * i, run) for i, run in enumerate(others)]:
            header = self.table.horizontalHeaderItem(col)
            if header is not None:
                header.setForeground(QBrush(run_color(run.id)))
                # What the run ran: two runs of one plugin differ only in its own knobs.
                header.setToolTip(
                    f"{run_name(run)}: {run.config.summary_for(run.backend, run.own_knobs)}"
                )
        self._add_explaining_columns([base, *others])
        self.chart.set_rows(self.rows, others, {r.id: run_name(r) for r in others})
        self._fill_ncu()
        self._fill_streaming([base, *others] if decode else [])
        self.hint.setText(self._hint_text())
        self._fit_table()

    def _fill_streaming(self, runs: list[Any]) -> None:
        """Each decode run's fixed cost and streaming rate (or why its lengths allow none)."""
        lines = []
        for run in runs:
            points = self._points.get(run.id, [])
            try:
                said = streaming_summary(fit_run(run, points))
            except ValueError as exc:
                if not wants_a_fit(len(points)):
                    continue  # one length: a line through one point was never in reach
                said = f"no fit: {exc}"
            lines.append(f"<b>{html.escape(run_name(run))}</b> {html.escape(said)}")
        for line in dict.fromkeys(filter(None, (read_line(r.machine) for r in runs))):
            lines.append(f"<i>a plain read on this GPU</i> {html.escape(read_line_text(line))}")
        self.streaming.setText(
            "<b>Where the time goes</b> (fixed + K+V / rate): " + "; ".join(lines)
        )
        self.streaming.setToolTip(
            "Each run's latencies fitted by least squares as a fixed cost per call plus the "
            f"K+V bytes over a streaming rate, over its lengths past {COLD_KV_BYTES // 10**6} MB "
            "of K+V (twice the L2: every call reads HBM there). The rate is how fast the steady "
            "state reads; the fixed cost is what every call pays whatever its length (launch, "
            "first loads, tail, a second launch). A plain read (`fmha-workbench bandwidth`: one "
            "launch that reads each byte once) pays the least a kernel can."
        )
        self.streaming.setVisible(bool(lines))

    def keep_split(self, *_: Any) -> None:
        """Leave the table/chart split where the user put it."""
        self._user_sized = True

    def _fit_table(self) -> None:
        """Every length's row in view (the chart took most of the room and left 2-4 rows),
        up to COMPARE_TABLE_SHARE of the height; until the user drags the splitter."""
        total = sum(self.split.sizes())
        if self._user_sized or total <= 0 or not self.rows:
            return
        table = self.table
        table.resizeRowsToContents()
        rows = sum(table.rowHeight(r) for r in range(table.rowCount()))
        wide = table.horizontalHeader().length() > table.viewport().width()
        want = (
            table.horizontalHeader().sizeHint().height()
            + rows
            + 2 * table.frameWidth()
            + (table.horizontalScrollBar().sizeHint().height() if wide else 0)
        )
        top = min(want, round(total * COMPARE_TABLE_SHARE))
        self.split.setSizes([top, total - top])

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._fit_table()  # the tab was hidden when the runs were selected

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_table()

    def _add_explaining_columns(self, runs: list[Any]) -> None:
        """After the latencies: each run's % of roofline (where its GPU has ceilings) and
        what a cuTile run's points compiled to."""
        by_len = {r.id: {p.seq_len: p for p in self._points.get(r.id, [])} for r in runs}
        columns: list[tuple[str, Any]] = []
        for run in runs:
            ceilings: Any = self._ceilings.get(run.id)  # the loop below rebinds it per column
            if ceilings is not None:
                columns.append((f"#{run.id} % roof", ("pct", run, ceilings)))
            if any(compiled_of(p) for p in by_len[run.id].values()):
                columns.append((f"#{run.id} compiled", ("compiled", run, None)))
        first = self.table.columnCount()
        self.table.setColumnCount(first + len(columns))
        for offset, (title, (kind, run, ceilings)) in enumerate(columns):
            col = first + offset
            self.table.setHorizontalHeaderItem(col, QTableWidgetItem(title))
            for r, (n, _cells) in enumerate(self.rows):
                point = by_len[run.id].get(n)
                if kind == "pct":
                    pct = point_pct(run, point, ceilings)
                    item = self._item("–" if pct is None else f"{pct:.0f} %")
                    item.setToolTip(
                        "TFLOP/s over the ceiling that bounds this point (dense matmul rate, "
                        f"or intensity × read bandwidth) of {ceilings.gpu_name}"
                    )
                else:
                    found = compiled_of(point)
                    res = CompiledResources.from_dict(found) if found else None
                    item = self._item(res.short() if res else "–")
                    if res is not None:
                        item.setToolTip("\n".join(filter(None, [res.summary(), res.key_block()])))
                        if res.spills or res.error:
                            item.setForeground(QBrush(QColor("#b00020")))
                self.table.setItem(r, col, item)

    def _fill_ncu(self) -> None:
        """The length most runs profiled (the longest of those), their metrics side by side."""
        profiled: dict[int, dict[int, Any]] = {}
        for run in self._runs:
            for p in self._points.get(run.id, []):
                found = (p.extra or {}).get("ncu")
                if found:
                    profiled.setdefault(p.seq_len, {})[run.id] = found
        self.ncu_table.clear()
        if not profiled:
            self.ncu_box.hide()
            return
        n = max(profiled, key=lambda length: (len(profiled[length]), length))
        # The profiled runs first, the baseline leading them, as in the table above.
        runs = sorted(
            self._runs, key=lambda r: (r.id not in profiled[n], r.id != self._pinned, r.id)
        )
        rows = compare_rows([profiled[n].get(r.id) for r in runs])
        axes = {r.axis for r in runs if r.id in profiled[n]}
        length = AXIS_LABELS.get(axes.pop(), "N") if len(axes) == 1 else "length"
        self.ncu_title.setText(
            f"<b>Nsight Compute at {length} = {n:,}</b> (one launch, clocks as they were)"
        )
        self.ncu_table.setColumnCount(1 + len(runs))
        # Short headers (id and backend) so two runs fit beside the chart; the name on hover.
        self.ncu_table.setHorizontalHeaderLabels(
            ["metric", *[f"#{r.id} {r.backend}" for r in runs]]
        )
        for c, run in enumerate(runs, start=1):
            cast(QTableWidgetItem, self.ncu_table.horizontalHeaderItem(c)).setToolTip(run_name(run))
        self.ncu_table.setRowCount(len(rows))
        waits = [(profiled[n].get(r.id) or {}).get("waits") for r in runs]
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                item = self._item(text, align_right=c > 0)
                # The stall and hottest cells name an instruction in a word: in full on hover.
                tip = cell_tooltip(waits[c - 1], row[0]) if c > 0 else ""
                if tip:
                    item.setToolTip(tip)
                self.ncu_table.setItem(r, c, item)
        self.ncu_box.show()

    @staticmethod
    def _item(text: str, align_right: bool = True) -> QTableWidgetItem:
        item = QTableWidgetItem(text)
        if align_right:
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return item

    def _kv_gbs(self, run: Any) -> dict[int, float | None]:
        return {p.seq_len: point_bandwidth(run, p)["kv_gbs"] for p in self._points.get(run.id, [])}

    def _latency_item(self, cell: Cell | None, run_id: int, n: int) -> QTableWidgetItem:
        if cell is None:
            return self._item("–")
        gbs = self._gbs.get(run_id, {}).get(n)
        tail = f" · {gbs:.4g} GB/s" if gbs is not None else ""
        return self._item(f"{cell.latency_ms:.4g}{tail}")

    def _delta_item(self, cell: Cell | None) -> QTableWidgetItem:
        if cell is None or cell.delta_pct is None:
            return self._item("–")
        item = self._item(format_delta(cell.delta_pct))
        assert cell.noise_pct is not None
        if cell.significant:
            item.setBackground(QBrush(FASTER if cell.delta_pct < 0 else SLOWER))
            item.setToolTip(
                f"{'faster' if cell.delta_pct < 0 else 'slower'} than the baseline beyond the "
                f"noise threshold of ±{cell.noise_pct:.1f} %"
            )
        else:
            item.setToolTip(f"within the noise threshold of ±{cell.noise_pct:.1f} %")
        return item

    def _speedup_item(self, cell: Cell | None) -> QTableWidgetItem:
        if cell is None or cell.speedup is None:
            return self._item("–")
        item = self._item(format_speedup(cell.speedup, cell.significant))
        item.setToolTip("baseline latency / this run's latency: above 1 is faster")
        return item

    def _hint_text(self) -> str:
        text = (
            "Δ % is latency against the baseline (negative = faster); speed-up × is the "
            "baseline's latency over the run's (above 1 = faster, ~ within the noise). Δ % is "
            f"coloured only beyond the noise threshold: {noise_rule()}."
        )
        reasons = dict.fromkeys(
            no_ceiling_reason(str(r.machine.get("gpu_name") or ""), r.backend)
            for r in self._runs
            if self._ceilings.get(r.id) is None
        )
        if reasons:
            text += "<br>" + "; ".join(reasons) + "."
        machines = machine_differences(self._runs)
        if machines:
            shown = "; ".join(machines)
            text += f"<br><b>Careful:</b> these runs come from different machines ({shown})."
        return text
