"""Your kernel in the window (issue 55): File › Add kernel… loads a plugin file into the backend
picker; a refused one says its one line and changes nothing; a loaded file is watched, and each
save reruns the last sweep beside the previous run, while a broken save shows its line and
leaves the previous version running."""

from __future__ import annotations

import os
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import run_and_wait, small_problem, tick_backends

from workbench.backends import catalog
from workbench.backends.plugin_env import ENV_KNOBS, ENV_PINS, ENV_PLUGINS

pytestmark = pytest.mark.gui

NUMPY_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "numpy_softcap.py"
LOAD_TIMEOUT_MS = 90_000  # a checking child starts and imports the workbench on 2 busy cores
SOFTCAP_DEFAULT = "float,\n                0.0,\n                (0.0, 20.0, 30.0, 50.0),"


@pytest.fixture(autouse=True)
def no_plugins_left(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The window puts the plugins it loads in os.environ: restore it and the catalog."""
    for name in (ENV_PLUGINS, ENV_KNOBS, ENV_PINS):
        monkeypatch.setenv(name, "")
    catalog.forget_plugins()
    yield
    monkeypatch.undo()
    catalog.forget_plugins()


def add_kernel_action(window: Any) -> Any:
    file_menu = next(a for a in window.menuBar().actions() if a.text() == "&File").menu()
    return next(a for a in file_menu.actions() if a.text() == "Add &kernel…")


def add_kernel(window: Any, dialogs: Any, path: Path) -> None:
    dialogs.save_path = str(path)  # what the file dialog "chooses"
    add_kernel_action(window).trigger()


def wait_for_backend(qtbot: Any, window: Any, name: str) -> None:
    picker = window.controls.backends
    qtbot.waitUntil(lambda: picker.is_enabled(name), timeout=LOAD_TIMEOUT_MS)
    qtbot.waitUntil(lambda: picker.checked() == [name], timeout=LOAD_TIMEOUT_MS)


def copy_of_example(tmp_path: Path) -> Path:
    mine = tmp_path / "my_softcap.py"
    mine.write_text(NUMPY_EXAMPLE.read_text())
    return mine


def test_add_kernel_puts_the_plugins_backend_in_the_picker_and_it_runs(
    qtbot: Any, window: Any, dialogs: Any, tmp_path: Path
) -> None:
    mine = copy_of_example(tmp_path)
    assert "numpy-softcap" not in window.controls.backends.names()
    add_kernel(window, dialogs, mine)
    assert ("save", "Add kernel", str(mine)) in dialogs.shown  # the file dialog was asked
    wait_for_backend(qtbot, window, "numpy-softcap")
    assert window.statusBar().currentMessage().startswith(f"Added numpy-softcap from {mine}")

    small_problem(qtbot, window, seq_lens="64,128")
    run = window.store.run(run_and_wait(qtbot, window))
    assert (run.backend, run.status) == ("numpy-softcap", "complete"), run.error
    assert run.machine["plugin_path"] == str(mine)
    points = window.store.points(run.id)
    assert [p.seq_len for p in points] == [64, 128]
    assert all(p.rel_err < 1e-2 for p in points)  # checked against float64, as any backend
    assert dialogs.kinds().count("warning") == 0, dialogs.shown


BAD_PLUGINS = {
    "a default outside its values": (
        """
        from workbench.backends import Knob, declare
        BACKENDS = (declare("mine", "mine", lambda q, k, v, **kw: q, knobs=(
            Knob("cap", float, 7.0, (0.0, 30.0), "--plugin-knob cap", "Cap", "h"),)),)
        """,
        "knobs[0].default: cap: default 7.0 is not one of its values",
    ),
    "a syntax error": ("\nimport numpy\ndef broken(:\n    pass\n", "line 3: SyntaxError"),
    "an import that crashes": (
        "import os\nos.abort()\n",
        "its import ended the process (exit code -6)",
    ),
    "an import that raises": (
        "\nimport numpy\n\nraise RuntimeError('no GPU here')\n",
        "line 4: RuntimeError: no GPU here",
    ),
}


@pytest.mark.parametrize("case", BAD_PLUGINS, ids=list(BAD_PLUGINS))
def test_a_refused_plugin_says_its_one_line_and_the_window_stays_as_it_was(
    qtbot: Any, window: Any, dialogs: Any, tmp_path: Path, case: str
) -> None:
    body, expected = BAD_PLUGINS[case]
    bad = tmp_path / "bad_attn.py"
    bad.write_text(textwrap.dedent(body))
    before = window.controls.backends.names()
    add_kernel(window, dialogs, bad)
    qtbot.waitUntil(lambda: "warning" in dialogs.kinds(), timeout=LOAD_TIMEOUT_MS)
    ((_, title, text),) = [s for s in dialogs.shown if s[0] == "warning"]
    line = f"{bad}: {expected}"
    assert title == "Add kernel" and line in text, text
    assert window.statusBar().currentMessage().startswith(line)
    assert "\n" not in window.statusBar().currentMessage()
    assert window.controls.backends.names() == before
    assert os.environ[ENV_PLUGINS] == "" and catalog.backend_names() == catalog.builtin_names()
    assert window.plugin_menu.watch.paths == []  # nothing watched either
    # The window still runs the reference.
    small_problem(qtbot, window, seq_lens="64")
    run = window.store.run(run_and_wait(qtbot, window))
    assert (run.backend, run.status) == ("reference", "complete")


def wait_for_runs(qtbot: Any, window: Any, count: int) -> list[Any]:
    def done() -> bool:
        return not window.jobs.is_running() and len(window.store.runs()) == count

    qtbot.waitUntil(done, timeout=LOAD_TIMEOUT_MS)
    return sorted(window.store.runs(), key=lambda r: r.id)


def test_saving_the_plugin_reruns_the_last_sweep_beside_the_previous_run_and_a_broken_save_keeps_it(
    qtbot: Any, window: Any, dialogs: Any, tmp_path: Path
) -> None:
    mine = copy_of_example(tmp_path)
    add_kernel(window, dialogs, mine)
    wait_for_backend(qtbot, window, "numpy-softcap")
    small_problem(qtbot, window, seq_lens="64,128", mask="causal")
    first = window.store.run(run_and_wait(qtbot, window))
    assert first.status == "complete" and first.machine["plugin_knobs"]["softcap"] == 0.0

    # Save as an editor does: a new file renamed over the old; the soft cap's default is 20.
    text = mine.read_text()
    assert SOFTCAP_DEFAULT in text
    edited = tmp_path / ".my_softcap.py.swp"
    edited.write_text(text.replace(SOFTCAP_DEFAULT, SOFTCAP_DEFAULT.replace("0.0,", "20.0,", 1)))
    os.replace(edited, mine)
    runs = wait_for_runs(qtbot, window, 2)
    second = runs[-1]
    assert (second.backend, second.status) == ("numpy-softcap", "complete"), second.error
    assert second.machine["plugin_knobs"]["softcap"] == 20.0  # the new version ran
    assert second.machine["plugin_sha256"] != first.machine["plugin_sha256"]
    assert second.seq_lens == first.seq_lens == (64, 128)  # the same settings
    assert second.config == first.config and second.problem == first.problem
    assert all(p.rel_err < 1e-2 for p in window.store.points(second.id))  # capped reference
    # Both runs are kept, selected and drawn: the new curve beside the previous one.
    qtbot.waitUntil(lambda: sorted(window.plots.run_ids()) == [first.id, second.id])
    assert sorted(window.history.selected_ids()) == [first.id, second.id]

    # A broken save: its line in the status bar, nothing rerun, the previous version kept.
    broken = mine.read_text().splitlines()
    broken.insert(19, "def half_typed(:")
    mine.write_text("\n".join(broken) + "\n")
    watch = window.plugin_menu.watch
    qtbot.waitUntil(lambda: bool(watch.last_error), timeout=LOAD_TIMEOUT_MS)
    assert watch.last_error.startswith(f"{mine}: line 20: SyntaxError"), watch.last_error
    assert window.statusBar().currentMessage().startswith(watch.last_error)
    assert len(window.store.runs()) == 2 and dialogs.kinds().count("warning") == 0
    assert window.controls.backends.is_enabled("numpy-softcap")
    # The window still works, on the version that loaded last.
    third = window.store.run(run_and_wait(qtbot, window))
    assert (third.backend, third.status) == ("numpy-softcap", "complete"), third.error
    assert third.machine["plugin_sha256"] == second.machine["plugin_sha256"]


def test_closing_the_window_while_a_plugins_import_hangs_ends_that_import_at_once(
    qtbot: Any, window: Any, dialogs: Any, tmp_path: Path
) -> None:
    hung = tmp_path / "hung_attn.py"
    hung.write_text("import time\n\ntime.sleep(600)\n")
    add_kernel(window, dialogs, hung)
    loader = window.plugin_menu.loader
    assert loader.busy()
    engine = loader._worker.engine
    qtbot.waitUntil(lambda: engine.pid is not None, timeout=LOAD_TIMEOUT_MS)
    child = engine.pid
    started = time.monotonic()
    window.shutdown()
    assert time.monotonic() - started < 10  # not the check's 120 s limit
    assert not loader.busy()
    with pytest.raises(ProcessLookupError):  # the importing child is gone
        for _ in range(50):
            os.kill(child, 0)
            time.sleep(0.1)
    assert dialogs.kinds().count("warning") == 0  # nothing said to a closed window


def test_a_plugin_given_on_the_command_line_is_watched_as_one_added_from_the_menu(
    qtbot: Any, make_window: Any, tmp_path: Path
) -> None:
    """``fmha-workbench --plugin FILE gui``: FILE's backend is in the picker, and a save of
    FILE reruns the last sweep on it."""
    from workbench.backends.plugin_cli import apply_command_line

    mine = copy_of_example(tmp_path)
    assert apply_command_line(["--plugin", str(mine), "gui"]) == ["gui"]
    window = make_window()
    qtbot.waitUntil(lambda: bool(window.backend_statuses), timeout=LOAD_TIMEOUT_MS)
    assert window.plugin_menu.watch.paths == [str(mine)]
    tick_backends(qtbot, window.controls, ["numpy-softcap"])
    small_problem(qtbot, window, seq_lens="64")
    first = window.store.run(run_and_wait(qtbot, window))
    mine.write_text(
        mine.read_text().replace(SOFTCAP_DEFAULT, SOFTCAP_DEFAULT.replace("0.0,", "50.0,", 1))
    )
    second = wait_for_runs(qtbot, window, 2)[-1]
    assert (first.status, second.status) == ("complete", "complete"), second.error
    assert second.machine["plugin_knobs"]["softcap"] == 50.0
    assert second.machine["plugin_sha256"] != first.machine["plugin_sha256"]


def test_saving_the_plugin_after_a_group_reruns_the_whole_group_beside_the_previous_one(
    qtbot: Any, window: Any, dialogs: Any, tmp_path: Path
) -> None:
    """A group of two plugins, one of them edited: the whole group reruns, the other plugin as
    it was. (Not the reference beside a plugin: the window runs such a group in a job child,
    which cannot start the engine child a plugin computes in.)"""
    mine = copy_of_example(tmp_path)
    other = tmp_path / "other_softcap.py"
    other.write_text(NUMPY_EXAMPLE.read_text().replace('"numpy-softcap"', '"other-softcap"'))
    add_kernel(window, dialogs, mine)
    wait_for_backend(qtbot, window, "numpy-softcap")
    add_kernel(window, dialogs, other)
    wait_for_backend(qtbot, window, "other-softcap")
    tick_backends(qtbot, window.controls, ["numpy-softcap", "other-softcap"])
    small_problem(qtbot, window, seq_lens="64")
    run_and_wait(qtbot, window)
    before = wait_for_runs(qtbot, window, 2)
    assert {r.backend for r in before} == {"numpy-softcap", "other-softcap"}
    assert len({r.group_id for r in before}) == 1 and before[0].group_id is not None

    capped_at_30 = SOFTCAP_DEFAULT.replace("0.0,", "30.0,", 1)
    mine.write_text(mine.read_text().replace(SOFTCAP_DEFAULT, capped_at_30))
    after = wait_for_runs(qtbot, window, 4)[2:]
    assert {r.backend for r in after} == {"numpy-softcap", "other-softcap"}
    assert len({r.group_id for r in after}) == 1 and after[0].group_id != before[0].group_id
    assert all(r.status == "complete" for r in after), [r.error for r in after]
    softcaps = {r.backend: r.machine["plugin_knobs"]["softcap"] for r in after}
    assert softcaps == {"numpy-softcap": 30.0, "other-softcap": 0.0}  # only the edit changed
    every = sorted(r.id for r in before + after)
    qtbot.waitUntil(lambda: sorted(window.plots.run_ids()) == every)


def test_a_group_of_the_reference_beside_a_plugin_runs_from_the_window(
    qtbot: Any, window: Any, dialogs: Any, tmp_path: Path
) -> None:
    """The window runs a group with the in-process reference in a job child; the plugin beside
    it computes in an engine child of its own, which that job child must be allowed to start."""
    mine = copy_of_example(tmp_path)
    add_kernel(window, dialogs, mine)
    wait_for_backend(qtbot, window, "numpy-softcap")
    tick_backends(qtbot, window.controls, ["reference", "numpy-softcap"])
    small_problem(qtbot, window, seq_lens="64")
    run_and_wait(qtbot, window)
    runs = wait_for_runs(qtbot, window, 2)
    assert {r.backend for r in runs} == {"reference", "numpy-softcap"}
    assert all(r.status == "complete" for r in runs), [r.error for r in runs]
    assert len({r.group_id for r in runs}) == 1 and runs[0].group_id is not None


def test_a_ladder_from_a_steps_file_steps_the_plugins_own_knob(
    qtbot: Any, window: Any, dialogs: Any, tmp_path: Path
) -> None:
    """Ladder › "a steps file…": the user's own steps, here the numpy example's soft cap, run
    as a ladder on that plugin, each step's run with its cap; Cancel in the file dialog goes
    back to this GPU's ladder."""
    import json

    from gui_helpers import pick
    from PySide6.QtCore import Qt

    add_kernel(window, dialogs, NUMPY_EXAMPLE)
    wait_for_backend(qtbot, window, "numpy-softcap")
    small_problem(qtbot, window, seq_lens="64", mask="causal")
    steps = tmp_path / "caps.json"
    steps.write_text(json.dumps({"name": "soft caps", "steps": [
        {"name": "no cap", "changes": {}},
        {"name": "cap 20", "changes": {"softcap": 20}},
        {"name": "cap 50", "changes": {"softcap": 50}},
    ]}))  # fmt: skip
    panel = window.ladder
    dialogs.save_path = ""  # Cancel
    pick(panel.preset, "file")
    assert panel.preset.currentData() is None  # this GPU's again
    dialogs.save_path = str(steps)
    pick(panel.preset, "file")
    assert panel.preset.currentData() == str(steps) and panel.preset.currentText() == "caps.json"
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.jobs.is_running(), timeout=LOAD_TIMEOUT_MS)
    group_id = panel.group_id()
    assert group_id is not None, dialogs.shown
    runs = window.store.group_runs(group_id)
    assert [r.step for r in runs] == ["no cap", "cap 20", "cap 50"]
    assert [r.machine["plugin_knobs"]["softcap"] for r in runs] == [0.0, 20.0, 50.0]
    assert all(r.status == "complete" and r.backend == "numpy-softcap" for r in runs)
