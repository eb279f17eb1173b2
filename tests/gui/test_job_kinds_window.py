"""A kind of job the window has never heard of (tests/job_kind_probe.py) runs from its Run
button through the job runner with no edit to it: the runner asks the job's story what to
select, what to say as it starts and ends, what a failure's dialog is called and how a
refusal reads (issue #53 item 6: nothing switches on a job's name)."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt

from tests.job_kind_probe import PROBE_FAILURE, ProbeJob, random_probe_spec

pytestmark = pytest.mark.gui


def run_probe(qtbot: Any, window: Any, monkeypatch: pytest.MonkeyPatch, job: ProbeJob) -> list[str]:
    """Click Run with the form building ``job``; the status lines the window showed."""
    shown: list[str] = []
    show_status = window.show_status

    def record(text: str) -> None:
        shown.append(text)
        show_status(text)

    monkeypatch.setattr(window.controls, "job", lambda: job)  # the form builds the probe
    monkeypatch.setattr(window, "show_status", record)
    window.jobs.sweep_in_child = False  # the probe's class lives in the tests, not the workbench
    qtbot.mouseClick(window.controls.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=60_000)
    return shown


def test_the_window_runs_a_new_kind_of_job_by_its_story(
    qtbot: Any, window: Any, dialogs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, _ = random_probe_spec()
    shown = run_probe(qtbot, window, monkeypatch, ProbeJob(spec))
    first, second = window.jobs.progress_model.run_ids
    points = 2 * len(spec.seq_lens)
    assert shown[0] == "Probe: 2 runs"  # its started note
    assert f"Probe run #{first} complete" in shown and f"Probe run #{second} complete" in shown
    assert shown[-1] == f"Probe done: 2 runs, {points} points"
    assert window.statusBar().currentMessage() == shown[-1]
    assert sorted(window.history.selected_ids()) == [first, second]  # it selects its runs
    assert dialogs.kinds() == []
    for run_id in (first, second):
        assert window.store.run(run_id).status == "complete"
        assert [p.seq_len for p in window.store.points(run_id)] == list(spec.seq_lens)
    assert window.controls.run_button.isEnabled()


def test_a_new_kind_of_job_fails_in_its_own_dialog(
    qtbot: Any, window: Any, dialogs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, _ = random_probe_spec()
    shown = run_probe(qtbot, window, monkeypatch, ProbeJob(spec, fail_second=True))
    second = window.jobs.progress_model.run_ids[1]
    assert shown[-1] == "Probe: 1 run(s) failed"
    ((kind, title, text),) = dialogs.shown
    assert (kind, title) == ("critical", "Probe failed")
    first_line = PROBE_FAILURE.splitlines()[0]
    assert text == (
        f"Probe: 1 run(s) failed; both probe runs are kept.\n\nprobe run #{second}: {first_line}"
    )
    assert window.store.run(second).status == "failed"


def test_a_new_kind_of_job_is_refused_in_its_own_words(
    qtbot: Any, window: Any, dialogs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, _ = random_probe_spec()
    before = len(window.store.runs())
    run_probe(qtbot, window, monkeypatch, ProbeJob(spec, refuse=True))
    ((kind, title, text),) = dialogs.shown
    assert (kind, title) == ("warning", "Probe")
    assert text.startswith("The probe cannot run as set:\n\n")
    assert "a probe refused on purpose" in text
    assert len(window.store.runs()) == before  # nothing was written
