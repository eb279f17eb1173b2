"""The narrow views of the main window that its helpers are given, so that each helper says
(and the type checker checks) which parts of the window it reads and drives.

The parts themselves are the real widgets; the window is a Protocol, which
:class:`workbench.gui.main_window.MainWindow` satisfies structurally (nothing here imports it,
so a helper never depends on the whole window).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from PySide6.QtGui import QAction
    from PySide6.QtWidgets import QTabWidget

    from workbench.gui.controls import ControlsPanel
    from workbench.gui.database_session import DatabaseSession
    from workbench.gui.history import HistoryPanel
    from workbench.gui.ladder import LadderPanel
    from workbench.store import Store


class WindowMessages(Protocol):
    """The window's status line and message boxes."""

    def show_status(self, text: str) -> None: ...
    def warn(self, title: str, text: str) -> None: ...
    def error(self, title: str, text: str) -> None: ...


class JobWindow(WindowMessages, Protocol):
    """What :class:`workbench.gui.job_runner.JobRunner` uses of the window: the form and the
    ladder it builds jobs from, the views it refreshes as a job's events arrive, the Run menu's
    actions it enables, and the open database. The runner also parents itself to the window
    and asks its quit question over it (both need it as the QWidget it is)."""

    controls: ControlsPanel
    ladder: LadderPanel
    history: HistoryPanel
    tabs: QTabWidget
    run_action: QAction
    run_ladder_action: QAction
    cancel_action: QAction
    database: DatabaseSession

    @property
    def store(self) -> Store | None: ...

    def refresh_run_views(self, run_id: int) -> None: ...
    def hide(self) -> None: ...
