"""A ``cuda`` plugin added from the window where there is no GPU (issue 55): File › Add kernel…
accepts the file, and the backend picker lists the backend disabled and unticked, its tooltip
the one line that says why (``inputs="cuda" needs a GPU: …``); no warning box, nothing run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workbench.backends import catalog
from workbench.backends.plugin_env import ENV_KNOBS, ENV_PINS, ENV_PLUGINS
from workbench.gui.backend_picker import CHECKING

pytestmark = pytest.mark.gui

LOAD_TIMEOUT_MS = 90_000  # a checking child starts and imports the workbench on 2 busy cores
DEVICE_PLUGIN = """
from workbench.backends import declare

def attention(q, k, v, *, problem, config, knobs):
    return q * 1

BACKENDS = (declare("dev-attn", "a device plugin", attention, inputs="cuda"),)
"""


@pytest.fixture(autouse=True)
def no_plugins_left(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The window puts the plugins it loads in os.environ: restore it and the catalog."""
    for name in (ENV_PLUGINS, ENV_KNOBS, ENV_PINS):
        monkeypatch.setenv(name, "")
    catalog.forget_plugins()
    yield
    monkeypatch.undo()
    catalog.forget_plugins()


def test_a_cuda_plugin_added_without_a_gpu_is_listed_disabled_with_its_one_line(
    qtbot: Any, window: Any, dialogs: Any, tmp_path: Path
) -> None:
    from workbench.backends.gpu import cupy_device, torch_device

    if torch_device().available and cupy_device().available:
        pytest.skip("a GPU is here: the cuda plugin would be enabled")
    mine = tmp_path / "dev_attn.py"
    mine.write_text(DEVICE_PLUGIN)
    file_menu = next(a for a in window.menuBar().actions() if a.text() == "&File").menu()
    dialogs.save_path = str(mine)  # what the file dialog "chooses"
    next(a for a in file_menu.actions() if a.text() == "Add &kernel…").trigger()
    picker = window.controls.backends

    def row() -> Any:
        return next((picker.item(i) for i in range(picker.count())
                     if picker.item(i).text() == "dev-attn"), None)  # fmt: skip

    qtbot.waitUntil(lambda: row() is not None and row().toolTip() != CHECKING,
                    timeout=LOAD_TIMEOUT_MS)  # fmt: skip
    assert not picker.is_enabled("dev-attn")
    assert "dev-attn" not in picker.checked()
    tip = row().toolTip()
    assert tip.startswith('inputs="cuda" needs a GPU: ') and "\n" not in tip, tip
    assert window.statusBar().currentMessage().startswith(f"Added dev-attn from {mine}")
    assert dialogs.kinds().count("warning") == 0, dialogs.shown
