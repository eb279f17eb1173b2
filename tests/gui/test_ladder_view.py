"""The Ladder tab: run the ladder from the window, read its table, chart and block maps, open
stored ladders (failed and unreached steps included), export one, cancel one mid-way."""

from __future__ import annotations

import csv
import math
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gui_helpers import pick, seed_run, type_into
from PySide6.QtCore import QObject, Qt, QThread
from PySide6.QtWidgets import QApplication
from readouts import legend_curve, legend_names, length_cell

from kernels.schedule import Schedule
from workbench.backends.base import BackendError
from workbench.backends.reference import ReferenceBackend
from workbench.config import ConfigError, KernelConfig, Problem, SweepSpec
from workbench.gui.ladder import CELL_ROLE, GAIN, LOSS, MISSING, VERDICT_ROLE
from workbench.gui.worker import SweepWorker, start_in_thread
from workbench.jobs import LadderJob
from workbench.jobs.ladder_steps import (
    NOT_RUN,
    ladder_preset_text,
    ladder_table,
    load_ladder,
    speedup_verdict,
)
from workbench.measure.timing import TimingSettings
from workbench.store import Store

pytestmark = pytest.mark.gui
ROOT = Path(__file__).resolve().parents[2]
STEPS = [s.name for s in load_ladder(arch="sm_90").steps]
N_STEPS = len(STEPS)  # six: every step of the sm_90 default fits without spilling


@pytest.fixture(autouse=True)
def _no_local_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    # The window's ladder is the local GPU's preset: pinned to "no GPU" (Hopper's) here.
    import workbench.jobs.ladder_steps

    monkeypatch.setattr(workbench.jobs.ladder_steps, "local_gpu_arch", lambda: None)


H200_LADDER_DB = ROOT / "bench" / "results" / "experiments" / "h200-workbench-ladder.db"
FAST = TimingSettings(warmup=1, min_samples=3, min_time_s=0.0)


def small_ladder_form(qtbot: Any, window: Any, seq_lens: str = "64,128") -> None:
    """Batch 1, one head, head dim 32: the smallest ladder that still has 2×2 block maps."""
    c = window.controls
    type_into(qtbot, c.batch, "1")
    type_into(qtbot, c.heads, "1")
    pick(c.head_dim, 32)
    pick(c.dtype, "float16")
    type_into(qtbot, c.seq_lens, seq_lens)


def click_cell(qtbot: Any, table: Any, row: int, col: int) -> None:
    rect = table.visualItemRect(table.item(row, col))
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def expected_background(verdict: str) -> Any:
    return {"gain": GAIN, "loss": LOSS, "missing": MISSING}.get(verdict)


def check_colours(panel: Any, key: str) -> list[str]:
    """Every measured cell's background follows the rule on its ratio ``key``."""
    verdicts = []
    for r, step in enumerate(panel.data.rows):
        for n in panel.data.seq_lens:
            item = length_cell(panel.table, r, n)
            cell = step.cells[n]
            verdict = "missing" if cell is None else speedup_verdict(cell, key)
            assert item.data(VERDICT_ROLE) == verdict, (step.name, n)
            want = expected_background(verdict)
            brush = item.background()
            if want is None:
                assert brush.style() == Qt.BrushStyle.NoBrush, (step.name, n)
            else:
                assert brush.color() == want, (step.name, n, verdict)
            verdicts.append(verdict)
    return verdicts


def test_the_speedup_rule_is_compares_noise_rule() -> None:
    def cell(ratio: float | None, significant: bool) -> dict[str, Any]:
        return {"vs_previous": ratio, "vs_previous_significant": significant}

    assert speedup_verdict(cell(1.6, True), "vs_previous") == "gain"
    assert speedup_verdict(cell(0.5, True), "vs_previous") == "loss"
    # A ×0.80 within the two points' noise is no loss (a fixed ±3 % called it one).
    assert speedup_verdict(cell(0.8, False), "vs_previous") == "neutral"
    assert speedup_verdict(cell(1.2, False), "vs_previous") == "neutral"
    assert speedup_verdict(cell(None, True), "vs_previous") == "neutral"
    assert speedup_verdict(cell(math.nan, True), "vs_previous") == "neutral"
    assert speedup_verdict(None, "vs_previous") == "neutral"


def test_a_reference_ladder_from_the_gui_fills_table_chart_and_block_maps(
    qtbot: Any, window: Any, dialogs: Any, tmp_path: Path
) -> None:
    small_ladder_form(qtbot, window)
    panel = window.ladder
    window.tabs.setCurrentIndex(0)
    assert panel.data is None and "No ladder" in panel.info.text()

    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    assert window.jobs.is_running() and panel.cancel_button.isEnabled()
    assert not panel.run_button.isEnabled() and not window.controls.run_button.isEnabled()
    assert window.tabs.currentWidget() is panel
    assert window.jobs.progress.maximum() == N_STEPS * 2  # every step's points
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=60_000)

    store: Store = window.store
    group_id = panel.group_id()
    assert group_id is not None and store.groups("ladder")[0]["id"] == group_id
    assert f"Ladder #{group_id} complete: {N_STEPS} steps" in window.statusBar().currentMessage()
    assert dialogs.shown == []
    assert panel.run_button.isEnabled() and not panel.cancel_button.isEnabled()
    runs = store.group_runs(group_id)
    assert [r.step for r in runs] == STEPS and all(r.status == "complete" for r in runs)
    assert all(r.problem.heads == 1 and r.problem.head_dim == 32 for r in runs)
    assert all(r.config.mask == "causal" for r in runs)  # the ladder's mask, not the form's

    # The table: every step × 2 lengths, with ladder_table's numbers.
    table = ladder_table(store, group_id)
    view = panel.table
    assert (
        view.rowCount() == N_STEPS and view.columnCount() == 3 + 2
    )  # step, status, compiled, N = 64, 128
    assert [view.horizontalHeaderItem(c).text() for c in range(3, 5)] == ["N = 64", "N = 128"]
    assert panel.data.seq_lens == [64, 128]
    for r, step in enumerate(table["steps"]):
        # One line a step (every step in view), its knobs in the tooltip.
        assert view.item(r, 0).text() == f"{r + 1}. {step['step']}"
        assert step["config"] in view.item(r, 0).toolTip()
        assert view.item(r, 1).text() == "complete"
        assert view.item(r, 2).text() == "–"  # the CPU compiles nothing, and says so
        assert "nothing compiled: the reference backend runs on the CPU" in (
            view.item(r, 2).toolTip()
        )
        for n in (64, 128):
            cell = step["cells"][str(n)]
            item = length_cell(panel.table, r, n)
            assert item.data(CELL_ROLE) == cell
            tflops, ratio = item.text().split("  ")
            assert tflops == f"{cell['tflops']:.3g}"
            if r == 0:
                assert ratio == "base" and cell["vs_baseline"] == 1.0
            else:
                mark = "" if cell["vs_previous_significant"] else "~"
                assert ratio == f"×{cell['vs_previous']:.2f}{mark}"
                assert f"×{cell['vs_baseline']:.2f}" in item.toolTip()

    # Colours follow the rule, against the previous step by default, then the baseline.
    check_colours(panel, "vs_previous")
    pick(panel.basis, "vs_baseline")
    check_colours(panel, "vs_baseline")
    assert "against the baseline" in panel.info.text()
    # Which preset ran: the default without a GPU, by name, file and architectures.
    assert (
        "preset: tile-optimization ladder, 128-row tiles (Hopper, Blackwell datacenter) "
        "(ladder.json, for sm_90/sm_100/sm_103)"
    ) in panel.info.text()
    # The published Blackwell gains are a GPU's: beside a CPU ladder they are said to be.
    published = "published on a Blackwell GPU: 1.60-1.66x over the baseline (not comparable"
    assert published in panel.info.text()
    fast_math = STEPS.index("+ fast math")
    assert "(not comparable: this ran on the CPU)" in view.item(fast_math, 0).toolTip()

    # The chart: × baseline per step, one line per length, with a legend.
    assert legend_names(panel.legend) == ["N = 64", "N = 128"]
    for n in (64, 128):
        x, y = legend_curve(panel.legend, f"N = {n}")
        np.testing.assert_allclose(x, np.arange(1, N_STEPS + 1))
        np.testing.assert_allclose(y, [s["cells"][str(n)]["vs_baseline"] for s in table["steps"]])

    # A click on a step's cell shows that step's block map at that length…
    heat = panel.heatmap
    click_cell(qtbot, view, 0, 4)  # baseline 64×64 at N = 128: a 2×2 causal map
    base = runs[0]
    assert heat.current_seq_len() == 128 and heat.current_grid().shape == (2, 2)
    expected = Schedule(128, 128, 64, 64, "causal").counts()
    assert heat.facts is not None and heat.facts.counts == expected
    assert f"#{base.id}" in heat.title.text() and STEPS[0] in heat.title.text()
    # …and a click on another step's name keeps the chosen length.
    click_cell(qtbot, view, 1, 0)
    tiles = runs[1].config
    assert (tiles.tile_m, tiles.tile_n) == (128, 128)
    assert heat.current_seq_len() == 128
    assert heat.facts.counts == Schedule(128, 128, 128, 128, "causal").counts()
    heat.select_seq_len(64)  # the user picks another length in the map…
    click_cell(qtbot, view, 3, 0)  # …and it stays for the next step
    assert heat.current_seq_len() == 64 and STEPS[3] in heat.title.text()
    assert heat.facts.counts == Schedule(64, 64, 128, 128, "causal").counts()

    # Export: the group's runs, every point, through the file dialog.
    dialogs.save_path = str(tmp_path / "ladder")
    qtbot.mouseClick(panel.export_button, Qt.MouseButton.LeftButton)
    out = tmp_path / "ladder.csv"
    with out.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == N_STEPS * 2
    # Steps named "+ fast math" are text, not formulas, to a spreadsheet: prefixed with '.
    assert [r["step"] for r in rows[::2]] == [
        "'" + s if s.startswith(("+", "-", "=", "@")) else s for s in STEPS
    ]
    assert {r["group_id"] for r in rows} == {str(group_id)}
    assert {int(r["seq_len"]) for r in rows} == {64, 128}
    assert f"Exported {N_STEPS * 2} points" in window.statusBar().currentMessage()
    assert window.history.export_dir == str(tmp_path)


def test_bad_form_values_keep_the_ladder_from_starting(qtbot: Any, window: Any) -> None:
    small_ladder_form(qtbot, window, seq_lens="0")
    qtbot.mouseClick(window.ladder.run_button, Qt.MouseButton.LeftButton)
    assert not window.jobs.is_running()
    assert window.controls.invalid_fields() == ["seq_lens"]
    assert window.store.groups() == []


def seed_ladders(db_path: Path) -> tuple[int, int]:
    """Two stored ladders: an older one whose timings give a gain, a loss and a tie, and a
    newer one like the H200's: the baseline complete, two steps failed, the rest never run."""
    with Store(db_path) as store:
        spec = {"steps": STEPS, "published": {"total": "1.60-1.66x over the baseline"}}
        older = store.create_group("ladder", "timed", spec)
        # A gain, a +2 % within the points' spread (a tie) and a +10 % beyond it (a loss).
        timings = (
            ((1.0,) * 3, (4.0,) * 3),
            ((0.5,) * 3, (3.8, 4.08, 4.4)),
            ((0.49, 0.51, 0.53), (4.5,) * 3),
        )
        for step, (t64, t128) in zip(STEPS[:3], timings):
            seed_run(
                store,
                seq_lens=(64, 128),
                samples_ms={64: t64, 128: t128},
                group_id=older,
                step=step,
                label=step,
            )
        configs = [s.config.summary() for s in load_ladder().steps]
        newer = store.create_group("ladder", "like the H200", {**spec, "configs": configs})
        seed_run(store, seq_lens=(64, 128), group_id=newer, step=STEPS[0], label="base")
        for step, error in (
            (STEPS[1], "EngineFailure: the GPU engine did not answer within 180 s (a hang?)"),
            (STEPS[2], "interrupted: the process running it stopped before it finished"),
        ):
            run_spec = SweepSpec(
                store.run(1).problem, (64, 128), KernelConfig(tile_m=32, tile_n=32)
            )
            run_id = store.create_run(run_spec, {}, group_id=newer, step=step)
            store.finish_run(run_id, "failed", error)
    return older, newer


def test_stored_ladders_newest_first_with_failed_and_unreached_steps(
    qtbot: Any, make_window: Any, db_path: Path, dialogs: Any, tmp_path: Path
) -> None:
    older, newer = seed_ladders(db_path)
    window = make_window(probe_backends=False)
    panel = window.ladder
    picker = panel.picker
    assert [picker.itemData(i) for i in range(picker.count())] == [newer, older]
    assert picker.itemText(0).startswith(f"#{newer} like the H200") and f"3/{N_STEPS} steps" in (
        picker.itemText(0)
    )

    # The newest, with its failed steps: "–" and the run's status, never a number.
    assert panel.group_id() == newer
    view = panel.table
    statuses = [view.item(r, 1).text() for r in range(view.rowCount())]
    assert statuses == ["complete", "failed", "failed"] + [NOT_RUN] * (N_STEPS - 3)
    assert "EngineFailure" in view.item(1, 1).toolTip()
    for r in range(1, N_STEPS):
        for n in (64, 128):
            item = length_cell(panel.table, r, n)
            assert item.text() == "–" and item.data(VERDICT_ROLE) == "missing"
            assert item.background().color() == MISSING
    assert "failed: EngineFailure" in length_cell(panel.table, 1, 128).toolTip()
    assert NOT_RUN in length_cell(panel.table, 5, 64).toolTip()
    # A step that never ran still says what it would have run (the group keeps its knobs).
    assert load_ladder().steps[5].config.summary() in view.item(5, 0).toolTip()
    assert f"1 complete, 2 failed, {N_STEPS - 3} not run" in panel.info.text()
    assert "1.60-1.66x" in panel.info.text()
    _, y = legend_curve(panel.legend, "N = 128")
    assert y[0] == 1.0 and np.isnan(y[1:]).all()
    # A failed step's map says so instead of drawing nothing.
    click_cell(qtbot, view, 1, 3)
    assert panel.heatmap.current_grid() is None
    assert "failed, nothing measured" in panel.heatmap.title.text()
    click_cell(qtbot, view, 4, 0)
    assert "was not run" in panel.heatmap.title.text()

    # The older ladder: a gain, a tie within the noise and a loss, each coloured as such.
    pick(picker, older)
    assert panel.group_id() == older and view.rowCount() == N_STEPS
    assert [view.item(r, 1).text() for r in range(3)] == ["complete"] * 3
    assert [length_cell(panel.table, 1, n).data(VERDICT_ROLE) for n in (64, 128)] == [
        "gain",
        "neutral",
    ]
    assert [length_cell(panel.table, 2, n).data(VERDICT_ROLE) for n in (64, 128)] == [
        "neutral",
        "loss",
    ]
    check_colours(panel, "vs_previous")
    pick(panel.basis, "vs_baseline")
    assert [length_cell(panel.table, 2, n).data(VERDICT_ROLE) for n in (64, 128)] == [
        "gain",
        "loss",
    ]
    check_colours(panel, "vs_baseline")

    # Its export holds the points it has: three steps, two lengths.
    dialogs.save_path = str(tmp_path / "timed.csv")
    path = window.exports.ladder_csv(older)
    assert path == tmp_path / "timed.csv"
    assert len(path.read_text().splitlines()) == 1 + 3 * 2

    # Another database: its own ladders (none), nothing left of this one's.
    assert window.database.open(tmp_path / "other.db")
    assert picker.count() == 0 and panel.data is None and view.rowCount() == 0
    assert "No ladder" in panel.info.text() and not panel.export_button.isEnabled()


def test_the_committed_h200_ladder_opens_as_measured(
    qtbot: Any, make_window: Any, tmp_path: Path
) -> None:
    copy = tmp_path / "h200.db"
    shutil.copy(H200_LADDER_DB, copy)  # opening may migrate: never touch the original
    window = make_window(copy, probe_backends=False)
    panel = window.ladder
    assert panel.group_id() is not None
    runs = window.store.group_runs(panel.group_id())
    view = panel.table
    assert view.rowCount() == len(panel.data.group["spec"]["steps"]) == len(runs)
    for r, run in enumerate(runs):
        assert view.item(r, 1).text() == run.status == "complete"
        points = {p.seq_len: p for p in window.store.points(run.id)}
        assert set(points) == set(panel.data.seq_lens)
        for n in panel.data.seq_lens:
            assert f"{points[n].tflops:.3g}" in length_cell(panel.table, r, n).text()
    # Measured on the H200: the published figure stands beside it plainly.
    assert "· published on Blackwell: 1.60-1.66x over the baseline ·" in panel.info.text()
    # Hopper's story, as the table tells it: the 256x128 trap, then the worker-warp rescue.
    steps = [row.name for row in panel.data.rows]
    trap, rescue = steps.index("256x128 tiles"), steps.index("+ 8 worker warps (Hopper)")
    for n in panel.data.seq_lens:
        assert panel.data.rows[trap].cells[n]["vs_baseline"] < 0.5
        assert panel.data.rows[rescue].cells[n]["vs_previous"] > 5


def test_cancel_mid_ladder_keeps_the_steps_run_so_far(
    qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = ReferenceBackend.measure_point
    calls: list[int] = []
    gate = threading.Event()

    def gated(self: ReferenceBackend, problem: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(problem.q_len)
        if len(calls) == 5:  # step 2's second point: in flight until the test has cancelled
            gate.wait(20)
        return original(self, problem, *args, **kwargs)

    monkeypatch.setattr(ReferenceBackend, "measure_point", gated)
    window.jobs.sweep_in_child = False  # the patch lives in this process
    small_ladder_form(qtbot, window, seq_lens="64,128,256")
    panel = window.ladder
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    assert window.jobs.progress.maximum() == N_STEPS * 3
    qtbot.waitUntil(lambda: window.jobs.progress.value() == 4, timeout=20_000)  # into step 2
    qtbot.waitUntil(lambda: "point 2/3" in window.jobs.progress_label.text(), timeout=20_000)
    label = window.jobs.progress_label.text()
    assert label.startswith(f"Ladder step 2/{N_STEPS} ({STEPS[1]}) · Run #"), label
    # The live ladder is on show, its unreached steps pending.
    assert panel.group_id() is not None
    pending = ["pending"] * (N_STEPS - 2)
    assert [row.status for row in panel.data.rows] == ["complete", "running", *pending]
    qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
    assert "Cancelling" in window.jobs.progress_label.text()
    assert not panel.cancel_button.isEnabled()
    gate.set()
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=20_000)

    runs = window.store.group_runs(panel.group_id())
    assert [r.status for r in runs] == ["complete", "cancelled"]
    assert len(window.store.points(runs[1].id)) == 2  # the point in flight is kept
    statuses = [panel.table.item(r, 1).text() for r in range(N_STEPS)]
    assert statuses == ["complete", "cancelled"] + [NOT_RUN] * (N_STEPS - 2)
    assert length_cell(panel.table, 1, 256).text() == "–"
    assert f"cancelled after 1 of {N_STEPS} steps" in window.statusBar().currentMessage()
    assert panel.run_button.isEnabled() and not window.jobs.progress.isVisible()


def test_a_failing_step_is_kept_failed_the_ladder_goes_on_and_one_dialog_says_so(
    qtbot: Any, window: Any, dialogs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = ReferenceBackend.measure_point

    def fail_step_2(self: ReferenceBackend, problem: Any, config: Any, *a: Any, **k: Any) -> Any:
        if config.tile_m == 128 and not config.fast_math and problem.q_len == 128:
            raise BackendError("simulated kernel fault: illegal memory access")
        return original(self, problem, config, *a, **k)

    monkeypatch.setattr(ReferenceBackend, "measure_point", fail_step_2)
    window.jobs.sweep_in_child = False  # the patch lives in this process
    small_ladder_form(qtbot, window)
    qtbot.mouseClick(window.ladder.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=60_000)

    panel = window.ladder
    runs = window.store.group_runs(panel.group_id())
    assert [r.status for r in runs] == ["complete", "failed"] + ["complete"] * (N_STEPS - 2)
    assert [panel.table.item(r, 1).text() for r in range(N_STEPS)] == [r.status for r in runs]
    assert (
        length_cell(panel.table, 1, 64).data(VERDICT_ROLE) != "missing"
    )  # measured before the fault
    assert length_cell(panel.table, 1, 128).text() == "–"
    assert "illegal memory access" in length_cell(panel.table, 1, 128).toolTip()
    # The step after the failed one has no previous step to compare with at that length.
    assert length_cell(panel.table, 2, 128).data(CELL_ROLE)["vs_previous"] is None
    assert length_cell(panel.table, 2, 128).text().endswith("  –")
    critical = dialogs.texts("critical")
    assert len(critical) == 1  # one message for the ladder, not one per step
    assert STEPS[1] in critical[0] and "illegal memory access" in critical[0]
    assert f"1 of {N_STEPS} steps failed" in window.statusBar().currentMessage()


class LadderReceiver(QObject):
    """Lives in the GUI thread; records each ladder signal and whether it arrived there."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, Any, bool]] = []
        self.finished = False

    def _note(self, name: str, value: Any) -> None:
        gui = QThread.currentThread() is QApplication.instance().thread()
        self.calls.append((name, value, gui))

    def on_event(self, event: Any) -> None:
        from workbench.run import events

        if isinstance(event, events.LadderStarted):
            self._note("ladder", len(event.steps))
        elif isinstance(event, events.StepStarted):
            self._note("step", event.name)
        elif isinstance(event, events.RunStarted):
            self._note("run", event.total)
        elif isinstance(event, events.JobFinished):
            self._note("finished", event.status)

    def done(self) -> None:
        self._note("done", None)
        self.finished = True


def test_the_worker_runs_a_ladder_job_and_its_signals_land_in_the_gui_thread(
    qtbot: Any, db_path: Path
) -> None:
    ladder = load_ladder()
    job = LadderJob(ladder, Problem(batch=1, heads=1, head_dim=32), (64,), "reference", "w")
    worker = SweepWorker(job, db_path, FAST, in_child=False)
    receiver = LadderReceiver()
    worker.event.connect(receiver.on_event)
    worker.done.connect(receiver.done)
    thread = start_in_thread(worker, receiver)
    qtbot.waitUntil(lambda: receiver.finished, timeout=60_000)
    thread.wait()
    assert all(gui for _, _, gui in receiver.calls)
    expected = [("ladder", N_STEPS)]
    for name in STEPS:
        expected += [("step", name), ("run", 1)]
    expected += [("finished", "complete"), ("done", None)]
    assert [(n, v) for n, v, _ in receiver.calls] == expected
    with Store(db_path) as store:
        (group,) = store.groups("ladder")
        assert group["runs"] == N_STEPS and group["label"] == "w"


def test_the_windows_ladder_names_its_runs_by_step_not_by_the_forms_leftover_label(
    qtbot: Any, window: Any
) -> None:
    """Each step's run is named by its step (after the ladder's own label), never by the
    form's Label field, which names a sweep."""
    small_ladder_form(qtbot, window, seq_lens="64")
    type_into(qtbot, window.controls.label, "cancel me")
    panel = window.ladder
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=60_000)
    first = panel.group_id()
    assert [r.label for r in window.store.group_runs(first)] == STEPS

    type_into(qtbot, panel.label_edit, "h200 try")
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=60_000)
    second = panel.group_id()
    assert second != first
    assert [r.label for r in window.store.group_runs(second)] == [f"h200 try · {s}" for s in STEPS]


def test_the_preset_line_names_the_ladder_its_file_and_archs() -> None:
    spec = {"ladder": "tile-optimization ladder, Blackwell", "preset": "ladder-blackwell.json",
            "archs": ["sm_100", "sm_120"]}  # fmt: skip
    assert ladder_preset_text(spec) == (
        "preset: tile-optimization ladder, Blackwell (ladder-blackwell.json, for sm_100/sm_120)"
    )
    assert ladder_preset_text({"preset": "/home/me/steps.json"}) == "preset: /home/me/steps.json"
    assert ladder_preset_text({"steps": ["a"]}) == ""  # stored before presets were recorded


def test_a_ladder_step_the_backend_refuses_is_a_warning_not_a_form_mark(
    qtbot: Any, window: Any, dialogs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = ReferenceBackend.check_supported

    def refuse_big_tiles(self: ReferenceBackend, problem: Any, config: Any) -> None:
        if config.tile_m == 128:
            raise ConfigError("tile_m", 128, "this backend takes tiles up to 64")
        original(self, problem, config)

    monkeypatch.setattr(ReferenceBackend, "check_supported", refuse_big_tiles)
    window.jobs.sweep_in_child = False  # the patch lives in this process
    small_ladder_form(qtbot, window, seq_lens="64")
    qtbot.mouseClick(window.ladder.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=20_000)
    warnings = dialogs.texts("warning")
    assert len(warnings) == 1 and "The ladder cannot run as set" in warnings[0]
    assert STEPS[1] in warnings[0] and "tiles up to 64" in warnings[0]
    assert window.controls.invalid_fields() == []  # the form's values are fine
    assert window.store.count_runs() == 0 and window.store.groups() == []


def test_the_windows_ladder_drops_a_sliding_windows_offset(qtbot: Any, window: Any) -> None:
    small_ladder_form(qtbot, window, seq_lens="64")
    pick(window.controls.mask, "window")
    type_into(qtbot, window.controls.input_pos, "32")
    type_into(qtbot, window.controls.window, "40")
    qtbot.mouseClick(window.ladder.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=60_000)
    runs = window.store.group_runs(window.ladder.group_id())
    assert len(runs) == len(STEPS)
    assert all(r.problem.input_pos == 0 and r.problem.k_len == 64 for r in runs)
    assert all(r.config.mask == "causal" for r in runs)  # the steps' own mask
