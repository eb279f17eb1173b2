"""Group sweeps from the window: several ticked backends, one group, same inputs, live views."""

from __future__ import annotations

import time
from typing import Any

import pytest
from gui_helpers import click_run, small_problem, tick_backends
from PySide6.QtCore import Qt
from readouts import legend_names, row_enabled, row_tooltip

from tests.cpu_peers import Flaky, register
from workbench.backends.reference import ReferenceBackend
from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.gui.history import COL_STATUS

pytestmark = pytest.mark.gui

FA4_INSTALL = "pip install 'fmha-workbench[fa4]'"


@pytest.fixture
def group_window(make_window: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A probed window whose registry has two more CPU backends (this process only)."""
    register(monkeypatch)
    window = make_window()
    qtbot.waitUntil(lambda: "reference-b" in window.backend_statuses, timeout=20_000)
    window.jobs.sweep_in_child = False  # the registry patch lives in this process
    return window


@pytest.fixture
def slow_open(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each backend's point takes at least 0.2 s to open, so the views can be seen mid-group."""
    original = ReferenceBackend.open_point

    def slow(self: ReferenceBackend, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.2)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ReferenceBackend, "open_point", slow)


def run_to_end(
    qtbot: Any, window: Any, backends: list[str], timeout: int = 60_000, **problem: Any
) -> None:
    """Set the problem, tick ``backends``, press Run and wait until the job has ended."""
    small_problem(qtbot, window, **problem)
    tick_backends(qtbot, window.controls, backends)
    click_run(qtbot, window)
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=timeout)


@pytest.mark.usefixtures("slow_open")
def test_two_ticked_backends_run_one_group_on_the_same_inputs(
    qtbot: Any, group_window: Any
) -> None:
    window = group_window
    small_problem(qtbot, window, seq_lens="64,128", mask="causal", label="pair")
    tick_backends(qtbot, window.controls, ["reference", "reference-b"])
    click_run(qtbot, window)
    assert window.jobs.is_running(), window.controls.error_label.text()
    assert window.jobs.progress.maximum() == 4  # points over both runs
    # Live: once the first point is in, both of the group's runs are selected and plotted.
    qtbot.waitUntil(lambda: window.jobs.progress.value() >= 1, timeout=30_000)
    group = window.jobs.progress_model
    assert group is not None and len(group.run_ids) == 2
    assert sorted(window.plots.run_ids()) == sorted(group.run_ids)
    assert f"Group #{group.group_id}" in window.jobs.progress_label.text()
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=60_000)

    store = window.store
    (stored,) = store.groups("backends")
    runs = store.group_runs(stored["id"])
    assert [r.backend for r in runs] == ["reference", "reference-b"]
    assert all(r.status == "complete" and r.label == "pair" for r in runs)
    assert store.count_runs() == 2
    assert isinstance(stored["spec"]["seed"], int)  # one seed for the whole group
    a, b = (store.points(r.id) for r in runs)
    assert [p.seq_len for p in a] == [p.seq_len for p in b] == [64, 128]
    # Same inputs through the same arithmetic: the errors against float64 agree exactly.
    assert [p.max_abs_err for p in a] == [p.max_abs_err for p in b]
    assert [p.rel_err for p in a] == [p.rel_err for p in b]
    # When the group ends, History selects its runs, and the progress counted all points.
    assert sorted(window.history.selected_ids()) == sorted(r.id for r in runs)
    assert f"Group #{stored['id']} complete" in window.statusBar().currentMessage()
    # Plots names the group's runs apart, as Compare does: they share their label.
    qtbot.waitUntil(lambda: len(legend_names(window.plots.legend)) == 2)
    names = [f"#{runs[0].id} reference pair", f"#{runs[1].id} reference-b pair"]
    assert (
        legend_names(window.plots.legend) == legend_names(window.plots.tflops_plot.legend) == names
    )


def test_one_ticked_backend_is_a_plain_run(qtbot: Any, group_window: Any) -> None:
    window = group_window
    run_to_end(qtbot, window, ["reference-b"], seq_lens="64")
    run = window.store.run(window.jobs.last_run_id)
    assert run.backend == "reference-b" and run.group_id is None
    assert window.store.groups() == []


def test_unavailable_backends_are_disabled_with_their_reason(qtbot: Any, window: Any) -> None:
    """On this machine's real probe: every unusable backend is greyed out, its reason shown."""
    c = window.controls
    for name, status in window.backend_statuses.items():
        assert row_enabled(c.backends, name) == status.available
        assert row_tooltip(c.backends, name).splitlines()[0] == status.reason
    fa4 = window.backend_statuses.get("fa4")
    if fa4 is not None and not fa4.available:
        assert FA4_INSTALL in row_tooltip(c.backends, "fa4")


def test_a_group_naming_a_backend_gone_since_the_probe_is_refused_unwritten(
    qtbot: Any, group_window: Any, dialogs: Any
) -> None:
    window = group_window
    small_problem(qtbot, window, seq_lens="64")
    tick_backends(qtbot, window.controls, ["reference", "flaky"])
    Flaky.gone = "flaky device lost: reinstall the driver"
    click_run(qtbot, window)
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=30_000)
    c = window.controls
    assert c.invalid_fields() == ["backends"]
    assert "flaky device lost" in c.error_label.text() and c.error_label.isVisible()
    assert window.store.count_runs() == 0 and window.store.groups() == []
    assert dialogs.texts("critical") == []  # a refusal, not a crash


def test_the_sweep_process_refuses_a_group_before_writing(qtbot: Any, db_path: Any) -> None:
    """The child-process path a group takes when a member (the reference) computes in
    process: its preflight refusal comes back as a field message, nothing stored."""
    from workbench.gui.worker import SweepWorker, start_in_thread
    from workbench.jobs import GroupJob
    from workbench.store import Store

    Store(db_path).close()
    spec = SweepSpec(Problem(batch=1, heads=1, head_dim=32), (64,), KernelConfig(32, 32))
    worker = SweepWorker(GroupJob(spec, ("reference", "nope")), db_path)
    got: list[tuple[str, str]] = []
    worker.rejected.connect(lambda exc: got.append((exc.field, str(exc))))
    with qtbot.waitSignal(worker.done, timeout=60_000):
        thread = start_in_thread(worker, None)
    thread.wait()
    assert worker.child_pid is not None  # it ran in the child
    assert [field for field, _ in got] == ["backends"] and "nope" in got[0][1]
    with Store(db_path) as store:
        assert store.count_runs() == 0 and store.groups() == []


@pytest.mark.usefixtures("slow_open")
def test_cancel_stops_every_run_of_the_group(qtbot: Any, group_window: Any) -> None:
    window = group_window
    small_problem(qtbot, window, seq_lens="64,128,256,512", mask="none")
    tick_backends(qtbot, window.controls, ["reference", "reference-b"])
    click_run(qtbot, window)
    qtbot.waitUntil(lambda: window.jobs.progress.value() >= 2, timeout=30_000)
    qtbot.mouseClick(window.controls.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=60_000)
    (stored,) = window.store.groups("backends")
    runs = window.store.group_runs(stored["id"])
    assert [r.status for r in runs] == ["cancelled", "cancelled"]
    assert all(1 <= len(window.store.points(r.id)) < 4 for r in runs)
    assert "cancelled" in window.statusBar().currentMessage()


def test_a_length_one_backend_cannot_fit_is_skipped_and_said(qtbot: Any, group_window: Any) -> None:
    window = group_window
    small_problem(qtbot, window, seq_lens="64,128", mask="none")
    tick_backends(qtbot, window.controls, ["reference", "small-only"])
    messages: list[str] = []
    window.statusBar().messageChanged.connect(messages.append)
    click_run(qtbot, window)
    assert window.jobs.progress.maximum() == 4  # before the plan: every backend at every length
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=60_000)
    (stored,) = window.store.groups("backends")
    runs = window.store.group_runs(stored["id"])
    assert [(r.backend, r.seq_lens) for r in runs] == [
        ("reference", (64, 128)),
        ("small-only", (64,)),
    ]
    assert window.jobs.progress.maximum() == 3  # the plan's points, set by GroupStarted
    assert any("small-only skips N = 128" in m for m in messages), messages


def test_the_ladder_runs_on_one_backend_only(qtbot: Any, group_window: Any) -> None:
    window = group_window
    small_problem(qtbot, window, seq_lens="64")
    tick_backends(qtbot, window.controls, ["reference", "reference-b"])
    window.run_ladder_action.trigger()
    assert not window.jobs.is_running()
    assert window.controls.invalid_fields() == ["backends"]
    assert "one backend" in window.controls.error_label.text()
    assert window.store.count_runs() == 0


def test_a_member_that_breaks_while_opening_fails_alone_and_the_group_ends(
    qtbot: Any, group_window: Any
) -> None:
    window = group_window
    run_to_end(
        qtbot,
        window,
        ["reference", "broken-open"],
        seq_lens="64,128",
        mask="causal",
        label="broken",
    )
    (stored,) = window.store.groups("backends")
    runs = {r.backend: r for r in window.store.group_runs(stored["id"])}
    assert runs["broken-open"].status == "failed"
    assert "q_halves" in (runs["broken-open"].error or "")
    assert runs["reference"].status == "complete"
    assert [p.seq_len for p in window.store.points(runs["reference"].id)] == [64, 128]


def test_a_fault_between_backends_ends_the_group_in_the_window(
    qtbot: Any, group_window: Any, monkeypatch: pytest.MonkeyPatch, dialogs: Any
) -> None:
    import workbench.jobs.group as group_module

    def broken(*args: Any, **kwargs: Any) -> None:
        raise TypeError("a bug between the backends")

    monkeypatch.setattr(group_module, "measure_group_point", broken)
    window = group_window
    run_to_end(
        qtbot, window, ["reference", "reference-b"], seq_lens="64", mask="causal", label="fault"
    )
    (stored,) = window.store.groups("backends")
    assert [r.status for r in window.store.group_runs(stored["id"])] == ["failed", "failed"]
    # Said as the group it was, with the error, and History shows both runs failed.
    (title, text) = next((t, x) for k, t, x in dialogs.shown if k == "critical")
    assert title == "Group stopped" and "The group could not run" in text
    assert "TypeError: a bug between the backends" in text
    statuses = {window.history.model.index(r, COL_STATUS).data() for r in range(2)}
    assert statuses == {"failed"}


def test_a_groups_points_of_one_length_redraw_the_views_once(
    qtbot: Any, window: Any, db_path: Any
) -> None:
    # The members of a group finish a length together; each redraw re-reads every selected
    # run's points and rebuilds plots, Compare and the block map.
    from gui_helpers import seed_run

    from workbench.store import Store

    with Store(db_path) as store:
        ids = [seed_run(store, label=f"m{i}") for i in range(4)]
    window.history.refresh(keep_selection=False)
    window.history.select_runs(ids)
    qtbot.waitUntil(lambda: sorted(window.plots.run_ids()) == sorted(ids))
    redraws: list[list[int]] = []
    original = window._on_selection
    window._on_selection = lambda shown: (redraws.append(list(shown)), original(shown))
    for run_id in ids:
        window.refresh_run_views(run_id)
    qtbot.waitUntil(lambda: len(redraws) >= 1)
    qtbot.wait(50)
    assert len(redraws) == 1 and sorted(redraws[0]) == sorted(ids)
