"""Screenshots of the real window: after two reference sweeps, or the README tour's pictures.

    QT_QPA_PLATFORM=offscreen python scripts/screenshot.py            # or under xvfb-run
    python scripts/screenshot.py --out assets/screenshot.png --tab blockmap
    python scripts/screenshot.py --tab ladder     # a small reference ladder: assets/ladder.png
    python scripts/screenshot.py --tour docs/screenshots    # the tour, from the H200's results
    python scripts/screenshot.py --loop docs/screenshots/your-kernel-loop.png   # a plugin's loop
    python scripts/screenshot.py --loop loop-gpu.png --loop-with triton   # on a GPU

It uses a temporary database and temporary settings, so it never touches the user's own. The
runs go through the window the way a user would: set the form, press Run, wait, select both runs.
``--tour DIR`` runs nothing: it opens copies of the committed H200 databases
(``bench/results/h200.db``: the prefill group; ``h200-decode.db``: decode groups, the measured
ceilings, two Nsight Compute profiles and the Hopper ladder), labels the prefill copy's runs by
backend for the legend, and saves the whole window at a laptop's 1366×768 (``--size``) on each
tab the README's tour shows (``plots.png``, ``compare.png``, ``roofline.png``,
``compare-decode.png``, ``compare-profiled.png``, ``blockmap.png``, ``ladder.png``), and from
``h200-prefill.db`` ours and FA4 profiled at N 8k (``compare-prefill-profiled.png``), and from
``h200-decode-read-line.db`` the 8B decode group's GB/s over the plain read
(``plots-decode.png``). The README's first picture comes from ``scripts/window_group.py`` on
the GPU host. ``--loop FILE`` is the plugin loop of docs/your-kernel.md: a copy of the NumPy
example loaded as ``--plugin`` would, a sweep on it, one line of the copy changed and saved (its
soft cap's default, 0 to 30), the window's own rerun, both runs selected.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TABS = {"plots": 0, "blockmap": 1, "compare": 2, "ladder": 3, "roofline": 4}
DEFAULT_SIZE = "1440x900"
TOUR_SIZE = "1366x768"  # a laptop's screen: what the tour shows fits there


def _upgraded_copy(source: Path, target: Path) -> None:
    """A copy of a committed database at this schema: the window opens an older one as it is,
    without writing (the tour relabels the prefill group's runs for its legend)."""
    from workbench.store import Store

    shutil.copy(source, target)
    Store(target).close()  # a writer's open migrates


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        help="default: assets/screenshot.png (assets/ladder.png for --tab ladder)",
    )
    parser.add_argument("--tab", choices=sorted(TABS), default="plots")
    parser.add_argument(
        "--size", default=DEFAULT_SIZE, help=f"window size, WIDTHxHEIGHT ({TOUR_SIZE} for --tour)"
    )
    parser.add_argument(
        "--tour", type=Path, metavar="DIR", help="save the README tour's pictures into DIR"
    )
    parser.add_argument(
        "--loop", type=Path, metavar="FILE", help="save the plugin edit-and-rerun loop's picture"
    )
    parser.add_argument(
        "--loop-with",
        choices=sorted(LOOPS),
        default="numpy",
        help="the loop's example: numpy (alone, any machine) or triton (beside cutile and "
        "cuDNN, a GPU)",
    )
    return parser.parse_args(argv)


def _wait(app: object, condition: object, timeout_s: float) -> None:
    from PySide6.QtCore import QEventLoop

    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit("screenshot: timed out waiting for the window")
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)  # type: ignore[attr-defined]
        time.sleep(0.005)


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if args.loop is not None:
        width, height = (int(v) for v in LOOP_SIZE.split("x"))
        return _plugin_loop(args.loop, width, height, LOOPS[args.loop_with])
    if args.tour is not None:
        size = args.size if args.size != DEFAULT_SIZE else TOUR_SIZE
        width, height = (int(v) for v in size.lower().split("x"))
        return _tour(args.tour, width, height)
    if args.out is None:
        args.out = ROOT / "assets" / ("ladder.png" if args.tab == "ladder" else "screenshot.png")
    width, height = (int(v) for v in args.size.lower().split("x"))
    sys.path.insert(0, str(ROOT))

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from workbench.gui.app import configure_application
    from workbench.gui.main_window import MainWindow
    from workbench.measure.timing import TimingSettings

    app = QApplication(sys.argv[:1])
    configure_application(app)
    with tempfile.TemporaryDirectory(prefix="fmha-screenshot-") as tmp:
        settings = QSettings(os.path.join(tmp, "settings.ini"), QSettings.Format.IniFormat)
        window = MainWindow(
            Path(tmp) / "runs.db",
            settings=settings,
            timing=TimingSettings(warmup=1, min_samples=7, min_time_s=0.0),
        )
        window.resize(width, height)
        window.show()
        _wait(app, lambda: bool(window.backend_statuses), 30)

        if args.tab == "ladder":
            _ladder(app, window)
        else:
            _sweeps(app, window, args.tab)
        window.statusBar().clearMessage()
        _wait(app, lambda: True, 1)
        for _ in range(20):  # let layouts and deferred pyqtgraph range updates settle
            app.processEvents()
            time.sleep(0.01)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        # Quality 0 is PNG's strongest compression: lossless, and smaller files for the README.
        if not window.grab().save(str(args.out), "PNG", 0):
            raise SystemExit(f"screenshot: could not write {args.out}")
        window.close()
    print(f"saved {args.out} ({args.out.stat().st_size / 1024:.0f} KB)")
    return 0


def _ladder(app: object, window: Any) -> None:
    """The built-in ladder on a small causal problem, with one step's block map shown."""
    c = window.controls
    c.batch.setValue(1)
    c.heads.setValue(2)
    c.head_dim.setCurrentIndex(c.head_dim.findData(64))
    c.seq_lens.setText("256-2k")
    c.label.setText("")
    panel = window.ladder
    panel.run_button.click()
    _wait(app, lambda: not window.jobs.is_running(), 600)
    panel.select_step(1, 2048)  # the 256×128 tiles at N = 2k: the map shows what changed


def _sweeps(app: object, window: Any, tab: str) -> None:
    """A dense and a causal sweep, both selected, the readout and the map at N = 1k."""
    from kernels.schedule import TILE_KNOBS

    c = window.controls
    run_ids = []
    for mask, tile, label in (("none", 64, "dense 64×64"), ("causal", 64, "causal 64×64")):
        c.batch.setValue(1)
        c.heads.setValue(4)
        c.head_dim.setCurrentIndex(c.head_dim.findData(64))
        c.seq_lens.setText("128-2k")
        for name in TILE_KNOBS:
            combo = c.field_widget(name)
            combo.setCurrentIndex(combo.findData(tile))
        c.mask.setCurrentIndex(c.mask.findData(mask))
        c.label.setText(label)
        c.run_button.click()
        _wait(app, lambda: not window.jobs.is_running(), 300)
        run_ids.append(window.jobs.last_run_id)

    window.history.select_runs(run_ids)
    _wait(app, lambda: sorted(window.plots.run_ids()) == sorted(run_ids), 10)
    window.tabs.setCurrentIndex(TABS[tab])
    window.heatmap.select_seq_len(1024)
    window.plots.show_readout_at(math.log2(1024))


# The tour's sources: the window's causal group on the H200 (runs 1-4, cuTile first), and the
# H200's decode database: its groups, measured ceilings, Nsight Compute profiles (with PC samples)
# of runs 118 and 119 (ours and cuDNN at D 64, B=1 k_len 32k) and the Hopper ladder; committed,
# and copied before opening (opening may migrate).
TOUR_DB = ROOT / "bench" / "results" / "h200.db"
TOUR_GROUP = 1
TOUR_DECODE_DB = ROOT / "bench" / "results" / "h200-decode.db"
TOUR_DECODE_GROUP = 1
TOUR_PROFILED = (118, 119)
TOUR_LADDER_GROUP = 5
TOUR_DECODE_FIT_GROUP = 27  # the README decode table's first group (B=1, k_len 4k-128k)
# The 8B decode group at B=1 measured after `bandwidth` kept the read's line: its dashed floor.
TOUR_READ_LINE_DB = ROOT / "bench" / "results" / "h200-decode-read-line.db"
# The prefill database's profiled pair: ours and FA4, fp16 D 128 B4 H32 none, profiled at 8k.
TOUR_PREFILL_DB = ROOT / "bench" / "results" / "h200-prefill.db"
TOUR_PREFILL_PROFILED = (4, 6)


def _tour(out: Path, width: int, height: int) -> int:
    """Plots and Compare of the prefill group; Roofline, a profiled Compare, Block map and
    Ladder from the decode database: the whole window at ``width`` × ``height``, one PNG each."""

    sys.path.insert(0, str(ROOT))
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from workbench.gui.app import configure_application
    from workbench.gui.main_window import MainWindow

    app = QApplication(sys.argv[:1])
    configure_application(app)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fmha-tour-") as tmp:
        settings = QSettings(os.path.join(tmp, "settings.ini"), QSettings.Format.IniFormat)
        db = Path(tmp) / "h200.db"
        _upgraded_copy(TOUR_DB, db)
        window = MainWindow(db, settings=settings, probe_backends=False)
        window.resize(width, height)
        window.show()
        window.machine_label.clear()  # nothing probed here: the runs are the H200's
        # The form's line of what its config compiles to, compiled before the first picture.
        _wait(app, lambda: not window.explain.compiled.text.text().startswith("compiling"), 120)
        # The group's runs are all labelled "window": in the copy, label them by backend so
        # the legend says who is who.
        runs = window.store.group_runs(TOUR_GROUP)
        for run in runs:
            window.store.relabel(run.id, f"{run.backend} {run.config.mask}")
        window.history.refresh()
        ids = [run.id for run in runs]
        _select(app, window, ids)
        window.tabs.setCurrentIndex(TABS["plots"])
        window.plots.show_readout_at(math.log2(4096))
        _save(app, window, out / "plots.png")
        window.tabs.setCurrentIndex(TABS["compare"])
        window.compare.pin_baseline(ids[0])  # cuTile, the group's first backend
        _save(app, window, out / "compare.png")

        decode = Path(tmp) / "h200-decode.db"
        _upgraded_copy(TOUR_DECODE_DB, decode)
        window.database.open(decode)
        _select(app, window, [run.id for run in window.store.group_runs(TOUR_DECODE_GROUP)])
        window.tabs.setCurrentIndex(TABS["roofline"])
        _save(app, window, out / "roofline.png")
        # The 8B decode group at B=1 beside its peers: GB/s, and where each one's time goes.
        group = window.store.group_runs(TOUR_DECODE_FIT_GROUP)
        _select(app, window, [run.id for run in group])
        window.tabs.setCurrentIndex(TABS["compare"])
        window.compare.pin_baseline(group[0].id)  # cuTile, the group's first backend
        _save(app, window, out / "compare-decode.png")
        _select(app, window, list(TOUR_PROFILED))
        window.tabs.setCurrentIndex(TABS["compare"])
        window.compare.pin_baseline(TOUR_PROFILED[0])
        _save(app, window, out / "compare-profiled.png")
        floor = Path(tmp) / "h200-decode-read-line.db"
        _upgraded_copy(TOUR_READ_LINE_DB, floor)
        window.database.open(floor)
        _select(app, window, [run.id for run in window.store.group_runs(1)])
        window.tabs.setCurrentIndex(TABS["plots"])
        window.plots.throughput.setCurrentIndex(1)  # GB/s of K+V
        window.plots.show_readout_at(math.log2(32768))
        _save(app, window, out / "plots-decode.png")
        window.plots.throughput.setCurrentIndex(0)
        prefill = Path(tmp) / "h200-prefill.db"
        _upgraded_copy(TOUR_PREFILL_DB, prefill)
        window.database.open(prefill)
        _select(app, window, list(TOUR_PREFILL_PROFILED))
        window.compare.pin_baseline(TOUR_PREFILL_PROFILED[0])
        # The stall rows, each with the instruction that holds it, and the hottest instructions.
        window.compare.ncu_table.scrollToBottom()
        _save(app, window, out / "compare-prefill-profiled.png")
        window.database.open(decode)

        # The Hopper ladder's baseline map at N = 2k, then the Ladder tab.
        baseline = window.store.group_runs(TOUR_LADDER_GROUP)[0].id
        _select(app, window, [baseline])
        window.tabs.setCurrentIndex(TABS["blockmap"])
        _wait(app, lambda: window.heatmap.current_grid() is not None, 10)
        window.heatmap.select_seq_len(2048)
        _wait(app, lambda: window.heatmap.current_seq_len() == 2048, 10)
        _save(app, window, out / "blockmap.png")
        window.tabs.setCurrentIndex(TABS["ladder"])
        window.ladder.show_group(TOUR_LADDER_GROUP)
        window.ladder.select_step(1)  # the 128x128 step with the warps it needs: its map
        _save(app, window, out / "ladder.png")
        window.shutdown()
    return 0


LOOP_SIZE = "1500x950"


@dataclass(frozen=True)
class LoopSetup:
    """One edit-and-rerun loop: the example copied, the backends ticked, the problem, and the
    one line of the copy that is changed and saved (``before`` -> ``after``)."""

    example: str
    backends: tuple[str, ...]
    heads: int
    head_dim: int
    dtype: str
    seq_lens: str
    before: str
    after: str


LOOPS = {
    # The NumPy example alone (any machine): its soft cap's default, 0 -> 30.
    "numpy": LoopSetup(
        "numpy_softcap.py", ("numpy-softcap",), 4, 32, "float16", "128,256,512,1024",
        "                0.0,\n                (0.0, 20.0",
        "                30.0,\n                (0.0, 20.0",
    ),
    # The Triton example beside our kernel and cuDNN (a GPU): its BLOCK_M default, 64 -> 128.
    "triton": LoopSetup(
        "triton_attention.py", ("cutile", "torch-cudnn", "triton-attention"), 16, 64,
        "float16", "1024,2048,4096",
        '_knob("BLOCK_M", 64,', '_knob("BLOCK_M", 128,',
    ),
}  # fmt: skip


def _plugin_loop(out: Path, width: int, height: int, setup: LoopSetup) -> int:
    """A copy of the example swept (a group where several backends are ticked), then saved
    with one line changed; the window reruns it by itself; every run on the plots. Prints how
    long the rerun took from the save to its last run stored."""
    sys.path.insert(0, str(ROOT))
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from workbench.backends.plugin_cli import apply_command_line
    from workbench.gui.app import configure_application
    from workbench.gui.main_window import MainWindow
    from workbench.measure.timing import TimingSettings

    app = QApplication(sys.argv[:1])
    configure_application(app)
    with tempfile.TemporaryDirectory(prefix="fmha-loop-") as tmp:
        mine = Path(tmp) / f"my_{setup.example}"
        mine.write_text((ROOT / "examples" / setup.example).read_text())
        apply_command_line(["--plugin", str(mine), "gui"])  # as `--plugin FILE gui` opens it
        settings = QSettings(os.path.join(tmp, "settings.ini"), QSettings.Format.IniFormat)
        timing = TimingSettings(warmup=1, min_samples=7, min_time_s=0.0)
        window = MainWindow(Path(tmp) / "runs.db", settings=settings, timing=timing)
        window.resize(width, height)
        window.show()
        _wait(app, lambda: bool(window.backend_statuses), 120)
        missing = [
            f"{name} ({window.backend_statuses[name].reason})"
            for name in setup.backends
            if not window.backend_statuses[name].available
        ]
        if missing:
            window.shutdown()
            raise SystemExit(f"loop: cannot run here: {'; '.join(missing)}")
        c = window.controls
        c.backends.set_checked(list(setup.backends))
        c.batch.setValue(1)
        c.heads.setValue(setup.heads)
        c.head_dim.setCurrentIndex(c.head_dim.findData(setup.head_dim))
        c.dtype.setCurrentIndex(c.dtype.findData(setup.dtype))
        c.seq_lens.setText(setup.seq_lens)
        c.mask.setCurrentIndex(c.mask.findData("causal"))
        c.run_button.click()
        _wait(app, lambda: not window.jobs.is_running() and window.store.runs(), 600)

        def complete() -> list[Any]:
            return [r for r in window.store.runs() if r.status == "complete"]

        first = len(complete())
        if first != len(setup.backends):
            ended = ", ".join(f"{r.backend} {r.status}" for r in window.store.runs())
            raise SystemExit(f"loop: the first job did not complete: {ended}")
        text = mine.read_text()
        assert setup.before in text, f"{setup.example}: the line the loop edits moved"
        saved = time.monotonic()
        mine.write_text(text.replace(setup.before, setup.after, 1))  # one line, saved
        _wait(app, lambda: len(complete()) == 2 * first, 600)
        print(f"loop: {first} run(s) rerun {time.monotonic() - saved:.1f} s after the save")
        _select(app, window, sorted(r.id for r in window.store.runs()))
        window.tabs.setCurrentIndex(TABS["plots"])
        window.statusBar().clearMessage()
        out.parent.mkdir(parents=True, exist_ok=True)
        _save(app, window, out)
        window.shutdown()
    return 0


def _select(app: object, window: Any, run_ids: list[int]) -> None:
    """Select ``run_ids`` in History, as a user's clicks would, and wait for the plots."""
    window.history.model.fetch_all()
    window.history.select_runs(run_ids)
    _wait(app, lambda: sorted(window.plots.run_ids()) == sorted(run_ids), 10)


def _save(app: object, widget: Any, path: Path) -> None:
    for _ in range(30):  # let layouts and deferred pyqtgraph range updates settle
        app.processEvents()  # type: ignore[attr-defined]
        time.sleep(0.01)
    if not widget.grab().save(str(path), "PNG", 0):
        raise SystemExit(f"screenshot: could not write {path}")
    print(f"saved {path} ({path.stat().st_size / 1024:.0f} KB)")


if __name__ == "__main__":  # a spawned child (the engine's) re-imports this file: keep it
    sys.exit(main(sys.argv[1:]))
