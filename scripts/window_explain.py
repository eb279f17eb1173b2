"""Drive the real window on a GPU host: profile a point from the Block map, then Compare it.

    QT_QPA_PLATFORM=offscreen python scripts/window_explain.py --db runs.db --group 3 \\
        --seq-len 32768 --out shots/

As a user would: it opens the window on --db, selects the group's first GPU run in History,
picks --seq-len in the Block map and presses **Profile** (Nsight Compute on that point), waits
for the metrics, does the same for a second run of the group (--second, default the next GPU
run), then selects both and saves Compare (``compare-profiled.png``, and scrolled to the stalls
and the instructions they wait at, ``compare-profiled-waits.png``; its rows are printed) and the
Roofline view (``roofline.png``) under --out. A refusal (no ncu, no counter permission) is
printed as the window shows it, and the exit code is 1. Message boxes are answered by printing
their text, so nothing waits on a click. Its own temporary settings leave the user's form alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TABS = {"blockmap": 1, "compare": 2, "ladder": 3, "roofline": 4}
SIZE = (1366, 768)
# What the window's message boxes said (they are answered by printing, not by a click).
SAID: list[str] = []


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="a run database with the group")
    parser.add_argument("--group", type=int, required=True, help="the group whose runs to profile")
    parser.add_argument("--seq-len", type=int, required=True, help="the point's length on its axis")
    parser.add_argument("--second", help="the second run's backend (default: the group's next)")
    parser.add_argument("--ladder-group", type=int, help="also save the Ladder tab on this group")
    parser.add_argument("--out", type=Path, required=True, help="folder for the screenshots")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per profile")
    return parser.parse_args(argv)


def _wait(app: Any, condition: Any, timeout_s: float, what: str) -> None:
    from PySide6.QtCore import QEventLoop

    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"window_explain: timed out waiting for {what}")
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)
        time.sleep(0.005)


def _save(app: Any, window: Any, path: Path) -> None:
    for _ in range(30):  # layouts and pyqtgraph's deferred range updates settle
        app.processEvents()
        time.sleep(0.01)
    if not window.grab().save(str(path), "PNG", 0):
        raise SystemExit(f"window_explain: could not write {path}")
    print(f"saved {path}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    sys.path.insert(0, str(ROOT))
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication, QMessageBox

    from workbench.gui.app import configure_application
    from workbench.gui.main_window import MainWindow

    def answer(_parent: Any, title: str, text: str, *_rest: Any) -> Any:
        SAID.append(f"{title}: {text}")
        print(f"window says: {title}: {text}", file=sys.stderr)
        return QMessageBox.StandardButton.Ok

    QMessageBox.warning = answer  # type: ignore[method-assign]
    QMessageBox.critical = answer  # type: ignore[method-assign]

    app = QApplication(sys.argv[:1])
    configure_application(app)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fmha-explain-") as tmp:
        settings = QSettings(os.path.join(tmp, "settings.ini"), QSettings.Format.IniFormat)
        window = MainWindow(args.db, settings=settings)
        window.resize(*SIZE)
        window.show()
        try:
            return _drive(app, window, args)
        finally:
            window.shutdown()


def _drive(app: Any, window: Any, args: argparse.Namespace) -> int:
    """Profile the group's runs from the Block map, then save Compare and Roofline (and the
    ladder); 1 when a profile was refused or the button was greyed out."""
    _wait(app, lambda: bool(window.backend_statuses), 60, "the backend probe")
    runs = [r for r in window.store.group_runs(args.group) if r.backend != "reference"]
    first = runs[0]
    second = next((r for r in runs[1:] if args.second in (None, r.backend)), None)
    profiled: dict[int, dict[str, Any]] = {}
    button = window.explain.profile_button
    for run in [r for r in (first, second) if r is not None]:
        window.history.model.fetch_all()
        window.history.select_runs([run.id])
        window.tabs.setCurrentIndex(TABS["blockmap"])
        shown = lambda run=run: getattr(window.heatmap.run, "id", None) == run.id  # noqa: E731
        _wait(app, shown, 30, f"run #{run.id} in the Block map")
        window.heatmap.select_seq_len(args.seq_len)
        _wait(app, lambda: window.heatmap.current_seq_len() == args.seq_len, 30, "the length")
        if not button.isEnabled():
            print(f"Profile is greyed out: {button.toolTip()}", file=sys.stderr)
            return 1
        before = len(SAID)
        button.click()
        _wait(app, lambda: button.why_not() != "a profile is running", args.timeout,
              f"the profile of run #{run.id}")  # fmt: skip
        if len(SAID) > before:
            return 1
        point = next(p for p in window.store.points(run.id) if p.seq_len == args.seq_len)
        profiled[run.id] = (point.extra or {}).get("ncu", {})
        _save(app, window, args.out / f"blockmap-profiled-{run.backend}.png")
    window.history.select_runs(list(profiled))
    window.tabs.setCurrentIndex(TABS["compare"])
    window.compare.pin_baseline(first.id)
    _save(app, window, args.out / "compare-profiled.png")
    # The Nsight box as the window shows it, and scrolled to the stalls and where they wait.
    table = window.compare.ncu_table
    for r in range(table.rowCount()):
        cells = [table.item(r, c) for c in range(table.columnCount())]
        print(" | ".join(c.text() if c is not None else "" for c in cells))
    table.scrollToBottom()
    _save(app, window, args.out / "compare-profiled-waits.png")
    window.tabs.setCurrentIndex(TABS["roofline"])
    _save(app, window, args.out / "roofline.png")
    if args.ladder_group is not None:
        window.tabs.setCurrentIndex(TABS["ladder"])
        window.ladder.show_group(args.ladder_group)
        _save(app, window, args.out / "ladder.png")
    print(json.dumps({str(k): v.get("metrics", {}) for k, v in profiled.items()}))
    return 0 if len(profiled) == len([r for r in (first, second) if r is not None]) else 1


if __name__ == "__main__":  # the engine's spawned child re-imports this file: keep the guard
    sys.exit(main())
