"""What the window keeps of its shape: its first size on this screen, each tab's share of the
height above History, and the settings saved between sessions (geometry, splitters, the form,
the export folder, the database)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QSettings, QSize
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QSplitter, QTabWidget

SETTINGS_VERSION = 1
# The first window's size where the screen has room; smaller screens get their available area.
PREFERRED_SIZE = (1440, 900)
# What a window manager's frame and title bar take around the client area, at most.
FRAME_ALLOWANCE = (16, 48)
# The share of the height above History a tab gets until the user drags the splitter: the
# Ladder tab's every step, its chart and a step's map need most of it.
DEFAULT_TAB_SHARE = 0.6
DEFAULT_TAB_SHARES = {3: 0.76}


def fit_to_screen(window: Any) -> None:
    """The preferred size, shrunk to the screen's available geometry (a 1366x768 laptop showed a
    1440x900 window with Run, Label and the status bar off-screen), and moved onto it."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        window.resize(*PREFERRED_SIZE)
        return
    room = screen.availableGeometry()
    width = min(PREFERRED_SIZE[0], room.width() - FRAME_ALLOWANCE[0])
    height = min(PREFERRED_SIZE[1], room.height() - FRAME_ALLOWANCE[1])
    size = QSize(width, height).expandedTo(window.minimumSizeHint())
    window.resize(size)
    left = room.left() + max((room.width() - size.width()) // 2, 0)
    top = room.top() + max((room.height() - size.height() - FRAME_ALLOWANCE[1]) // 2, 0)
    window.move(left, top)


class TabShares:
    """Each tab's share of ``split`` (tabs above, History below), remembered as the user drags
    it: the Ladder tab's table, chart and map need more than Plots do."""

    def __init__(self, tabs: QTabWidget, split: QSplitter, fallback_height: int) -> None:
        self.tabs = tabs
        self.split = split
        self._fallback_height = fallback_height
        self.shares: dict[int, float] = dict(DEFAULT_TAB_SHARES)
        self._shown = tabs.currentIndex()
        self.apply(self._shown)
        tabs.currentChanged.connect(self.on_tab_changed)

    def share(self, index: int) -> float:
        """The share of the height tab ``index`` gets (the shown tab's as it is dragged now)."""
        if index == self.tabs.currentIndex():
            sizes = self.split.sizes()
            if sum(sizes):
                return sizes[0] / sum(sizes)
        return self.shares.get(index, DEFAULT_TAB_SHARE)

    def apply(self, index: int) -> None:
        total = sum(self.split.sizes()) or self._fallback_height
        top = round(total * self.shares.get(index, DEFAULT_TAB_SHARE))
        self.split.setSizes([top, total - top])

    def on_tab_changed(self, index: int) -> None:
        """Keep the tab being left's share as dragged, and give the new one its own."""
        sizes = self.split.sizes()  # still the left tab's: the split follows below
        if sum(sizes) > 0 and self._shown >= 0:
            self.shares[self._shown] = sizes[0] / sum(sizes)
        self._shown = index
        self.apply(index)


def remembered_splitters(window: Any) -> list[tuple[str, QSplitter]]:
    """Every splitter whose sizes the window keeps between sessions (the Ladder tab's table
    splitter fits its steps itself)."""
    return [
        ("window/main_split", window.main_split),
        ("window/compare_split", window.compare.split),
        ("window/ladder_bottom_split", window.ladder.bottom_split),
    ]


def saved_db_path(settings: QSettings) -> Path | None:
    value = settings.value("db_path", "")
    return Path(str(value)) if value else None


def restore_settings(window: Any) -> None:
    s = window.settings
    geometry = s.value("window/geometry")
    if isinstance(geometry, QByteArray) and not geometry.isEmpty():
        window.restoreGeometry(geometry)
        # Saved on a larger monitor: shrink it onto this one rather than off its edges.
        screen = window.screen() or QGuiApplication.primaryScreen()
        if screen is not None:
            room = screen.availableGeometry()
            if window.width() > room.width() or window.height() > room.height():
                fit_to_screen(window)
    for key, splitter in remembered_splitters(window):
        state = s.value(key)
        restored = isinstance(state, QByteArray) and not state.isEmpty()
        if restored and splitter.restoreState(state) and splitter is window.compare.split:
            window.compare.keep_split()  # as the user left it, not fitted to the rows
    shares = s.value("window/tab_shares", "")
    with contextlib.suppress(TypeError, ValueError, AttributeError):
        for index, share in json.loads(str(shares or "{}")).items():
            if 0.05 <= float(share) <= 0.95:
                window.tab_shares.shares[int(index)] = float(share)
    raw = s.value("controls", "")
    if raw:
        try:
            state = json.loads(str(raw))
        except ValueError:
            state = None  # a hand-edited or foreign settings file: keep the defaults
        if isinstance(state, dict):
            window.controls.apply_state(state)
    window.history.export_dir = str(s.value("export_dir", "") or "")
    tab = s.value("window/tab", 0)
    with contextlib.suppress(TypeError, ValueError):
        window.tabs.setCurrentIndex(int(tab))
    window.tab_shares.apply(window.tabs.currentIndex())


def save_settings(window: Any) -> None:
    s = window.settings
    s.setValue("settings_version", SETTINGS_VERSION)
    s.setValue("window/geometry", window.saveGeometry())
    for key, splitter in remembered_splitters(window):
        s.setValue(key, splitter.saveState())
    shares = window.tab_shares
    shown = window.tabs.currentIndex()
    shares.shares[shown] = shares.share(shown)  # the shown tab's, as dragged
    s.setValue("window/tab_shares", json.dumps(shares.shares))
    s.setValue("window/tab", window.tabs.currentIndex())
    s.setValue("controls", json.dumps(window.controls.state()))
    s.setValue("export_dir", window.history.export_dir)
    if window.store is not None:
        s.setValue("db_path", str(window.store.path))
    s.sync()
