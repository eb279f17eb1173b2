"""The worker: the job's events arrive in the GUI thread on either path, in order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QObject, QThread
from PySide6.QtWidgets import QApplication

from workbench.config import KernelConfig, Problem, SweepSpec
from workbench.gui.worker import SweepWorker, start_in_thread
from workbench.jobs import SweepJob
from workbench.measure.timing import TimingSettings
from workbench.store import Store

pytestmark = pytest.mark.gui
FAST = TimingSettings(warmup=1, min_samples=3, min_time_s=0.0)


class Receiver(QObject):
    """Lives in the GUI thread and records, for each signal, whether it ran there."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, bool]] = []
        self.finished = False

    def _note(self, name: str) -> None:
        self.calls.append((name, QThread.currentThread() is QApplication.instance().thread()))

    def on_event(self, event: Any) -> None:
        status = getattr(event, "status", None)
        self._note(type(event).__name__ + (f":{status}" if status else ""))

    def done(self) -> None:
        self._note("done")
        self.finished = True


@pytest.mark.parametrize("in_child", [False, True], ids=["worker-thread", "child-process"])
def test_every_signal_lands_in_the_gui_thread(qtbot: Any, db_path: Path, in_child: bool) -> None:
    spec = SweepSpec(Problem(batch=1, heads=2, head_dim=32), (64, 128), KernelConfig(32, 32))
    worker = SweepWorker(SweepJob(spec), db_path, FAST, in_child=in_child)
    receiver = Receiver()
    worker.event.connect(receiver.on_event)
    worker.done.connect(receiver.done)
    thread = start_in_thread(worker, receiver)
    qtbot.waitUntil(lambda: receiver.finished, timeout=60_000)
    thread.wait()
    names = [name for name, _ in receiver.calls]
    assert names == [
        "SweepStarted",
        "RunStarted",
        "PointStarted",
        "PointFinished",
        "PointStarted",
        "PointFinished",
        "RunFinished:complete",
        "JobFinished:complete",
        "done",
    ]
    assert all(in_gui for _, in_gui in receiver.calls)
    assert (worker.child_pid is not None) == in_child
    with Store(db_path) as store:
        assert [p.seq_len for p in store.points(store.runs()[0].id)] == [64, 128]


class Waiter(QObject):
    """A GUI-thread owner whose slot on ``done`` waits for the worker's thread to end."""

    def __init__(self) -> None:
        super().__init__()
        self.thread: QThread | None = None
        self.waited: list[bool] = []

    def on_done(self) -> None:
        assert QThread.currentThread() is QApplication.instance().thread()
        self.waited.append(self.thread.wait(5_000) if self.thread is not None else False)


def test_an_owner_may_wait_on_the_thread_from_any_slot_of_done(qtbot: Any, db_path: Path) -> None:
    # A slot connected before start_in_thread runs before any slot connected by it. If the
    # thread's quit were queued behind this slot, its wait could never succeed (the
    # intermittent 180 s hang of a full test run); quit must not depend on the GUI thread.
    spec = SweepSpec(Problem(batch=1, heads=1, head_dim=32), (64,), KernelConfig(32, 32))
    worker = SweepWorker(SweepJob(spec), db_path, FAST, in_child=False)
    waiter = Waiter()
    worker.done.connect(waiter.on_done)
    waiter.thread = start_in_thread(worker, waiter)
    qtbot.waitUntil(lambda: bool(waiter.waited), timeout=60_000)
    assert waiter.waited == [True]
    assert waiter.thread.isFinished()


def test_a_user_facing_time_bound_is_a_generous_limit_unless_strict(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user-facing bound is asserted as the bound times TIME_SLACK (a loaded 2-core CI box),
    with the measurement printed; strict timing asserts the bound itself."""
    from gui_helpers import TIME_SLACK, assert_within

    assert TIME_SLACK >= 2
    monkeypatch.delenv("FMHA_WORKBENCH_STRICT_TIMING", raising=False)
    assert_within(0.3, 0.25, "a slow gap")  # over the bound, within the limit
    assert "OVER the 250 ms bound" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="user-facing bound is 250 ms"):
        assert_within(0.25 * TIME_SLACK + 0.01, 0.25, "a stall")
    monkeypatch.setenv("FMHA_WORKBENCH_STRICT_TIMING", "1")
    with pytest.raises(AssertionError):
        assert_within(0.3, 0.25, "a slow gap")
