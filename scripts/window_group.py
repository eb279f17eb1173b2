"""Drive the real window through group sweeps and save screenshots of Compare.

    QT_QPA_PLATFORM=offscreen python scripts/window_group.py --db runs.db \\
        --backends cutile,torch-flash,torch-cudnn,fa4 --batch 1 --heads 16 --head-dim 128 \\
        --dtype bfloat16 --seq-lens 1k-16k --autotune --masks causal,none --out shots/

As a user would: it opens the window on --db, waits for the backend probe, ticks the backends,
fills in the problem, and for each mask picks it, presses Run and waits for the group to end;
then it opens each group in Compare (a run of the group selected in History, "Compare group")
and saves the whole window and the Compare tab (table and chart) as PNGs under --out. One ticked
backend is a plain run (the CPU reference alone, say), shown in Compare against nothing.

Prints one JSON line on stdout: {"groups": {"causal": 3, "none": 4}} (with one backend,
{"runs": {...}} instead). Exit 0 when every run completed, 1 when one failed, was refused or
timed out, 2 when a backend asked for is unknown or unavailable here (nothing is run). It uses
its own temporary settings, so the user's saved form is never touched.
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


def _ladder_switches() -> list[Any]:
    """The switches the published ladder turns on between its first step and its last (the
    registry's knobs that ``ladder-blackwell.json`` flips): the ones this script ticks, each
    off unless its flag is given."""
    from kernels import knobs
    from workbench.jobs.ladder_steps import load_ladder

    steps = load_ladder(preset="blackwell").steps
    first, last = steps[0].config, steps[-1].config
    return [
        k
        for k in knobs.EXPOSED
        if k.kind is bool and getattr(first, k.name) != getattr(last, k.name)
    ]


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="run database (created if new)")
    parser.add_argument(
        "--backends",
        default="reference",
        help="comma-separated; a group takes them in the window's list order, as a user's ticks do",
    )
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--seq-lens", default="256-4k", help="as the form takes it: 1k-16k")
    parser.add_argument("--tile", type=int, default=None, help="tile M and N (default: form's)")
    for knob in _ladder_switches():
        parser.add_argument(
            knob.flag, dest=knob.name, action="store_true", help=f"tick the form's {knob.label}"
        )
    parser.add_argument(
        "--rounds",
        type=int,
        help="interleaved timing rounds per length (default: the backends' own, 4); the GPU "
        "backends' other timing defaults are kept",
    )
    parser.add_argument("--masks", default="causal,none", help="comma-separated: causal,none")
    parser.add_argument("--label", default="", help="label of every run (default: the mask)")
    parser.add_argument("--out", type=Path, default=Path("window-group-shots"))
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per group")
    parser.add_argument("--size", default="1600x1000", help="window size, WIDTHxHEIGHT")
    parser.add_argument(
        "--show",
        metavar="MASK=GROUP,…",
        help="run nothing: open these stored groups in Compare and save the screenshots "
        "(e.g. causal=1,none=2)",
    )
    return parser.parse_args(argv)


def _say(text: str) -> None:
    print(f"window_group: {text}", file=sys.stderr, flush=True)


def _wait(app: Any, condition: Any, timeout_s: float) -> bool:
    from PySide6.QtCore import QEventLoop

    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)
        time.sleep(0.005)
    return True


def _settle(app: Any, seconds: float = 0.3) -> None:
    _wait(app, lambda: False, seconds)


def _pick(combo: Any, data: Any, what: str) -> None:
    index = combo.findData(data)
    if index < 0:
        raise SystemExit(f"window_group: {what} {data!r} is not offered by the form")
    combo.setCurrentIndex(index)
    combo.activated.emit(index)


def _fill_form(window: Any, args: argparse.Namespace) -> None:
    c = window.controls
    c.batch.setValue(args.batch)
    c.heads.setValue(args.heads)
    _pick(c.head_dim, args.head_dim, "head dim")
    _pick(c.dtype, args.dtype, "dtype")
    c.seq_lens.setText(args.seq_lens)
    c.seq_lens.textEdited.emit(args.seq_lens)
    if args.tile is not None:
        from kernels.schedule import TILE_KNOBS

        for name in TILE_KNOBS:
            _pick(c.field_widget(name), args.tile, "tile")
    for knob in _ladder_switches():
        c.field_widget(knob.name).setChecked(getattr(args, knob.name))


def _tick(window: Any, names: list[str]) -> str | None:
    """Tick exactly ``names``; the reason when one cannot be ticked."""
    from PySide6.QtCore import Qt

    picker = window.controls.backends
    for name in names:
        if name not in picker.names():
            return f"{name}: unknown backend; the window offers {', '.join(picker.names())}"
        if not picker.is_enabled(name):
            return f"{name}: not available here: {picker.tooltip(name)}"
    for row in range(picker.count()):
        item = picker.item(row)
        want = item.data(Qt.ItemDataRole.UserRole) in names
        if (item.checkState() == Qt.CheckState.Checked) != want:
            item.setCheckState(Qt.CheckState.Checked if want else Qt.CheckState.Unchecked)
    return None


def _newest_group(store: Any) -> int | None:
    groups = store.groups("backends")
    return int(groups[0]["id"]) if groups else None


def main(argv: list[str] | None = None, *, sweep_in_child: bool | None = None) -> int:
    """``sweep_in_child``: the window's choice (None: a child for CPU backends). Tests that
    register a backend in this process only pass False."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    args = _parse(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    names = [n.strip() for n in args.backends.split(",") if n.strip()]
    masks = [m.strip() for m in args.masks.split(",") if m.strip()]
    width, height = (int(v) for v in args.size.lower().split("x"))

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from workbench.gui.app import configure_application
    from workbench.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication([sys.argv[0]])
    configure_application(app)
    scratch = tempfile.TemporaryDirectory(prefix="window-group-")
    settings = QSettings(str(Path(scratch.name) / "settings.ini"), QSettings.Format.IniFormat)
    timing = None
    if args.rounds is not None:
        from workbench.measure.timing import TimingSettings

        # What every GPU backend times with by default, with the rounds asked for.
        timing = TimingSettings(warmup=5, min_samples=30, min_time_s=0.5, rounds=args.rounds)
    window = MainWindow(args.db, settings=settings, timing=timing)
    window.jobs.sweep_in_child = sweep_in_child
    window.resize(width, height)
    window.show()
    try:
        return _drive(app, window, args, names, masks)
    finally:
        window.shutdown()
        window.deleteLater()
        _settle(app, 0.05)
        scratch.cleanup()


def _screenshots(
    app: Any, window: Any, args: argparse.Namespace, ids: dict[str, int], grouped: bool
) -> None:
    """Open each group (or run) in Compare and save the window and the Compare tab."""
    for mask, ident in ids.items():
        _show_compare(app, window, ident, grouped)
        window.grab().save(str(args.out / f"window-{mask}.png"))
        window.compare.grab().save(str(args.out / f"compare-{mask}.png"))


def _drive(
    app: Any, window: Any, args: argparse.Namespace, names: list[str], masks: list[str]
) -> int:
    if args.show:
        args.out.mkdir(parents=True, exist_ok=True)
        shown = dict(item.split("=") for item in args.show.split(","))
        _screenshots(app, window, args, {m: int(g) for m, g in shown.items()}, grouped=True)
        return 0
    if window.store is None or window.store.read_only:
        _say(f"cannot write to {args.db}")
        return 1
    if not _wait(app, lambda: bool(window.backend_statuses), 120.0):
        _say("the backend probe did not report within 120 s")
        return 1
    refused = _tick(window, names)
    if refused:
        _say(refused)
        return 2
    _fill_form(window, args)
    args.out.mkdir(parents=True, exist_ok=True)
    grouped = len(names) > 1
    ids: dict[str, int] = {}
    worst = 0
    for mask in masks:
        _pick(window.controls.mask, mask, "mask")
        window.controls.label.setText(args.label or mask)
        before = _newest_group(window.store) if grouped else window.jobs.last_run_id
        window.controls.run_button.click()
        if not window.jobs.is_running():
            _say(f"{mask}: Run refused: {window.controls.error_label.text()}")
            return 1
        _say(f"{mask}: running {', '.join(names)} at {args.seq_lens}")
        if not _wait(app, lambda: not window.jobs.is_running(), args.timeout):
            _say(f"{mask}: no end after {args.timeout:g} s; cancelling")
            window.jobs.cancel()
            _wait(app, lambda: not window.jobs.is_running(), 600.0)
            worst = 1
        new = _newest_group(window.store) if grouped else window.jobs.last_run_id
        if new is None or new == before:
            _say(f"{mask}: nothing ran: {window.controls.error_label.text()}")
            return 1
        ids[mask] = new
        runs = window.store.group_runs(new) if grouped else [window.store.run(new)]
        for run in runs:
            if run.status != "complete":
                _say(f"{mask}: run #{run.id} ({run.backend}) {run.status}: {run.error or ''}")
                worst = 1
    _screenshots(app, window, args, ids, grouped)
    print(json.dumps({"groups" if grouped else "runs": ids}), flush=True)
    return worst


def _show_compare(app: Any, window: Any, ident: int, grouped: bool) -> None:
    """Select the group's first run in History and press Compare group (a run alone: select
    it and show the Compare tab)."""
    history = window.history
    first = window.store.group_runs(ident)[0].id if grouped else ident
    model = history.model
    while model.row_of(first) is None and model.canFetchMore():
        model.fetchMore()
    history.select_runs([first])
    _settle(app, 0.1)
    if grouped:
        history.group_button.click()
    window.tabs.setCurrentWidget(window.compare)
    _settle(app)


if __name__ == "__main__":
    sys.exit(main())
